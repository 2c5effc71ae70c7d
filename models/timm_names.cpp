#include "models/timm_names.h"

#include <regex>

#include "core/check.h"
#include "models/resnet.h"
#include "models/xcit.h"

namespace xdino::models {
namespace {

bool has_prefix(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// "cls_attn_blocks.<i>.attn.<part>.<weight|bias>" -> (prefix up to "attn.", part, suffix).
const std::regex kClassAttention(R"((cls_attn_blocks\.\d+\.attn\.)(qkv|q|k|v)\.(weight|bias))");

}  // namespace

std::optional<TimmTwin> timm_twin(const std::string& arch, int64_t patch_size, std::string* why) {
  const auto refuse = [&](const std::string& reason) -> std::optional<TimmTwin> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  if (const auto c = find_xcit_variant(arch)) {
    for (const XCiTConfig& official : xcit_variants())
      if (official.name == arch) return TimmTwin{arch + "_224"};
    return refuse(arch + " has no timm twin: timm's XCiT embeds patches of 16 or 8 pixels, and " +
                  arch + " (ours, for small images) has patches of " +
                  std::to_string(c->patch_size));
  }
  if (arch == "vit_tiny" || arch == "vit_small" || arch == "vit_base") {
    XDINO_CHECK_ARG(patch_size == 16 || patch_size == 8, "--patch_size ", patch_size,
                    ": DINO's ViTs have patch 16 or 8");
    const std::string size = arch.substr(4);
    if (patch_size == 8 && size == "tiny")  // timm has no vit_tiny_patch8_224: say it
      return TimmTwin{"vit_tiny_patch16_224", Json{{"patch_size", 8}}};
    return TimmTwin{"vit_" + size + "_patch" + std::to_string(patch_size) + "_224"};
  }
  if (find_resnet_variant(arch)) return TimmTwin{arch};
  if (has_prefix(arch, "xvit")) return refuse(arch + " has no timm twin: X-ViT is this project's");
  return refuse(arch + " has no weights to export");
}

StateDict to_timm_layout(const StateDict& state, const std::string& arch) {
  if (!find_xcit_variant(arch)) return state;
  StateDict out;
  for (const auto& item : state) {
    const std::string& key = item.key();
    std::smatch m;
    if (has_prefix(key, "pos_embeder.")) {
      out.insert("pos_embed." + key.substr(std::string("pos_embeder.").size()), item.value());
    } else if (std::regex_match(key, m, kClassAttention) && m[2] == "qkv") {
      const std::vector<torch::Tensor> parts = item.value().chunk(3, 0);
      XDINO_CHECK(parts.size() == 3 && item.value().size(0) % 3 == 0, "'", key, "' of shape ",
                  item.value().sizes(), " does not split into q, k and v");
      const char* names[] = {"q", "k", "v"};
      for (int i = 0; i < 3; ++i)
        out.insert(m[1].str() + names[i] + "." + m[3].str(), parts[i].contiguous());
    } else {
      out.insert(key, item.value());
    }
  }
  return out;
}

StateDict from_timm_layout(const StateDict& state) {
  StateDict out;
  for (const auto& item : state) {
    const std::string& key = item.key();
    std::smatch m;
    if (has_prefix(key, "pos_embed.")) {  // XCiT's Fourier encoding; a ViT's is "pos_embed"
      out.insert("pos_embeder." + key.substr(std::string("pos_embed.").size()), item.value());
    } else if (std::regex_match(key, m, kClassAttention) && m[2] != "qkv") {
      if (m[2] != "q") {  // k and v join q's entry
        XDINO_CHECK_ARG(state.contains(m[1].str() + "q." + m[3].str()), "timm's '", key,
                        "' comes without its '", m[1].str(), "q.", m[3].str(), "'");
        continue;
      }
      std::vector<torch::Tensor> parts;
      for (const char* part : {"q", "k", "v"}) {
        const torch::Tensor* t = state.find(m[1].str() + part + "." + m[3].str());
        XDINO_CHECK_ARG(t != nullptr, "timm's '", key, "' comes without its '", m[1].str(), part,
                        ".", m[3].str(), "'");
        parts.push_back(*t);
      }
      out.insert(m[1].str() + "qkv." + m[3].str(), torch::cat(parts, 0));
    } else {
      out.insert(key, item.value());
    }
  }
  return out;
}

}  // namespace xdino::models
