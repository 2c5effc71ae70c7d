#include "models/registry.h"

#include <functional>
#include <map>

#include "core/check.h"
#include "models/pixels.h"
#include "models/resnet.h"
#include "models/vit.h"
#include "models/xcit.h"
#include "models/xvit.h"

namespace xdino::models {

namespace {

using Factory = std::function<std::shared_ptr<Backbone>(const BackboneOptions&)>;

std::shared_ptr<Backbone> make_xcit(XCiTConfig config, const BackboneOptions& options) {
  config.num_classes = options.num_classes;
  config.drop_path_rate = options.drop_path_rate;
  config.in_chans = options.in_chans;
  config.xca_attention = options.xca_attention;
  config.layer_kernels = options.layer_kernels;
  return std::make_shared<XCiT>(std::move(config));
}

std::shared_ptr<Backbone> make_vit(const std::string& name, const BackboneOptions& options) {
  XDINO_CHECK_ARG(options.patch_size == 16 || options.patch_size == 8,
                  "DINO ViTs come with patch size 16 or 8, not ", options.patch_size);
  ViTConfig config = *find_vit_variant(name, options.patch_size);
  config.img_size = options.img_size;
  config.num_classes = options.num_classes;
  config.drop_path_rate = options.drop_path_rate;
  config.in_chans = options.in_chans;
  return std::make_shared<VisionTransformer>(std::move(config));
}

std::shared_ptr<Backbone> make_xvit(XViTConfig config, const BackboneOptions& options) {
  config.num_classes = options.num_classes;
  config.drop_path_rate = options.drop_path_rate;
  config.in_chans = options.in_chans;
  return std::make_shared<XViT>(std::move(config));
}

// One registered name: everything the rest of the code asks of a family, in one place.
struct Entry {
  Factory make;
  std::function<std::string(int64_t patch_flag)> paper_name;
  int64_t patch_size = 0;         // 0: DINO's ViTs, from --patch_size; the others: their own
  std::string input_conv_weight;  // the state_dict key of the input conv ("": none)
  bool patch_tokens = true;       // false: a convolutional network (check_arch)
};

const std::map<std::string, Entry>& entries() {
  static const std::map<std::string, Entry> table = [] {
    std::map<std::string, Entry> t;
    for (const auto* table : {&xcit_variants(), &xcit_small_image_variants()})
      for (const XCiTConfig& c : *table)
        t[c.name] = {[c](const BackboneOptions& o) { return make_xcit(c, o); },
                     [c](int64_t) { return c.paper_name; }, c.patch_size,
                     "patch_embed.proj.0.0.weight"};
    for (const XViTConfig& c : xvit_variants())
      t[c.name] = {[c](const BackboneOptions& o) { return make_xvit(c, o); },
                   [c](int64_t) { return c.paper_name; }, c.patch_size,
                   "patch_embed.proj.0.0.weight"};
    for (const char* name : {"vit_tiny", "vit_small", "vit_base"}) {
      const std::string n = name;
      t[n] = {[n](const BackboneOptions& o) { return make_vit(n, o); },
              [n](int64_t patch) { return find_vit_variant(n, patch)->paper_name; },
              /*patch_size=*/0, "patch_embed.proj.weight"};
    }
    for (const ResNetConfig& c : resnet_variants())
      t[c.name] = {[c](const BackboneOptions& o) -> std::shared_ptr<Backbone> {
                     ResNetConfig config = c;  // no drop path, as main_dino.py builds them
                     config.num_classes = o.num_classes;
                     config.in_chans = o.in_chans;
                     return std::make_shared<ResNet>(std::move(config));
                   },
                   [c](int64_t) { return c.paper_name; },
                   /*patch_size=*/32,  // the output stride (models/resnet.h)
                   "conv1.weight", /*patch_tokens=*/false};
    t["pixels"] = {[](const BackboneOptions& o) -> std::shared_ptr<Backbone> {
                     return std::make_shared<Pixels>(o.img_size, o.in_chans);
                   },
                   [](int64_t) { return std::string("Pixels"); }, /*patch_size=*/1, ""};
    return t;
  }();
  return table;
}

}  // namespace

int64_t patch_size_of(const std::string& arch, int64_t flag) {
  const auto it = entries().find(arch);
  return it == entries().end() || it->second.patch_size == 0 ? flag : it->second.patch_size;
}

std::string input_conv_weight_of(const std::string& arch) {
  const auto it = entries().find(arch);
  return it == entries().end() ? std::string() : it->second.input_conv_weight;
}

std::vector<std::string> backbone_names() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries()) names.push_back(name);
  return names;
}

std::string paper_name(const std::string& arch, int64_t patch_flag) {
  const auto it = entries().find(arch);
  return it == entries().end() ? arch : it->second.paper_name(patch_flag);
}

std::string patch_size_help() {
  std::string flag_takers;
  for (const auto& [name, entry] : entries())
    if (entry.patch_size == 0) flag_takers += (flag_takers.empty() ? "" : ", ") + name;
  return "patch size of " + flag_takers +
         " (DINO's --patch_size); every other --arch carries "
         "its patch size in its name";
}

std::string backbone_list(bool with_pixels) {
  std::string out;
  for (const auto& name : backbone_names())
    if (with_pixels || name != "pixels") out += (out.empty() ? "" : ", ") + name;
  return out;
}

std::string training_arch_name(const std::string& arch) {
  return arch.rfind("deit", 0) == 0 ? "vit" + arch.substr(4) : arch;
}

void check_arch(const std::string& arch, const char* needs_patch_tokens) {
  const auto it = entries().find(arch);
  if (it == entries().end()) {
    XDINO_FAIL_ARG("unknown architecture '", arch, "' (known: ", backbone_list(), ")");
  }
  XDINO_CHECK_ARG(needs_patch_tokens == nullptr || it->second.patch_tokens, "--arch ", arch,
                  " is a convolutional network without patch tokens, which ", needs_patch_tokens,
                  " needs");
}

std::shared_ptr<Backbone> create_backbone(const std::string& arch, const BackboneOptions& options) {
  check_arch(arch);
  XDINO_CHECK_ARG(options.in_chans >= 1, "--in_chans must be at least 1, got ", options.in_chans);
  return entries().at(arch).make(options);
}

}  // namespace xdino::models
