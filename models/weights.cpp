#include "models/weights.h"

#include <cmath>
#include <sstream>

#include "core/check.h"
#include "core/log.h"
#include "core/pth.h"
#include "core/safetensors.h"
#include "models/backbone.h"
#include "models/timm_names.h"

namespace xdino::models {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string remove_all(std::string s, const std::string& part) {
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at))
    s.erase(at, part.size());
  return s;
}

void collect(const torch::nn::Module& module, const std::string& prefix, StateDict& out) {
  for (const auto& p : module.named_parameters(/*recurse=*/false))
    if (p.value().defined()) out.insert(prefix + p.key(), p.value().detach());
  for (const auto& b : module.named_buffers(/*recurse=*/false))
    if (b.value().defined()) out.insert(prefix + b.key(), b.value().detach());
  for (const auto& child : module.named_children())
    collect(*child.value(), prefix + child.key() + ".", out);
}

std::string first_keys(const std::vector<std::string>& keys) {
  std::ostringstream os;
  for (size_t i = 0; i < keys.size() && i < 3; ++i) os << (i ? ", " : "") << keys[i];
  if (keys.size() > 3) os << ", ...";
  return os.str();
}

// Why a key may be absent: a hint for the one-line error.
std::string prefix_hint(const std::string& key) {
  if (starts_with(key, "module.") || starts_with(key, "backbone.") ||
      key.find(".backbone.") != std::string::npos)
    return "; the checkpoint's keys carry a DDP/wrapper prefix: load it with load_pretrained "
           "(--pretrained_weights), which removes 'module.' and 'backbone.'";
  return "";
}

// The stored input conv made to fit the model's channel count, or a refusal (weights.h).
void match_input_channels(const Backbone& backbone, const StateDict& model, StateDict& state,
                          const std::string& source) {
  const std::string key = backbone.input_conv_weight();
  if (key.empty() || !model.contains(key) || !state.contains(key)) return;
  const torch::Tensor stored = state[key];
  const torch::Tensor& expected = model[key];
  // Only a difference in the input-channel axis alone is a channel count; anything else is a
  // shape mismatch load_state_dict reports.
  if (!stored.defined() || stored.dim() != 4 || expected.dim() != 4 ||
      stored.size(1) == expected.size(1) || stored.size(0) != expected.size(0) ||
      stored.size(2) != expected.size(2) || stored.size(3) != expected.size(3))
    return;
  const int64_t have = stored.size(1), want = expected.size(1);
  XDINO_CHECK_ARG(have == 3, source, ": the input convolution '", key, "' reads ", have,
                  "-channel images but the model was built for ", want,
                  "; build it with --in_chans ", have,
                  " (only 3-channel weights are adapted to another count)");
  state[key] = adapt_input_conv(stored, want);
  log::info("pretrained weights ", source, ": ", key, ": 3 input channels ",
            adapt_input_conv_summary(want), ", as timm's adapt_input_conv does");
}

}  // namespace

torch::Tensor adapt_input_conv(const torch::Tensor& rgb_weight, int64_t in_chans) {
  XDINO_CHECK_ARG(rgb_weight.defined() && rgb_weight.dim() == 4 && rgb_weight.size(1) == 3,
                  "adapt_input_conv takes an (out, 3, k, k) RGB conv weight, got ",
                  rgb_weight.defined() ? rgb_weight.sizes() : torch::IntArrayRef{});
  XDINO_CHECK_ARG(in_chans >= 1, "--in_chans must be at least 1, got ", in_chans);
  // Half-precision files are summed in float32, as timm does; float64 keeps its precision.
  const torch::Tensor w =
      rgb_weight.to(torch::promote_types(rgb_weight.scalar_type(), torch::kFloat));
  torch::Tensor out;
  if (in_chans == 1) {
    out = w.sum(1, /*keepdim=*/true);
  } else {
    const int64_t repeats = (in_chans + 2) / 3;
    out =
        w.repeat({1, repeats, 1, 1}).narrow(1, 0, in_chans) * (3.0 / static_cast<double>(in_chans));
  }
  return out.to(rgb_weight.scalar_type()).contiguous();
}

std::string adapt_input_conv_summary(int64_t in_chans) {
  if (in_chans == 1) return "summed into 1";
  const std::string c = std::to_string(in_chans);
  return "repeated into " + c + " and scaled by 3/" + c;
}

StateDict state_dict(const torch::nn::Module& module) {
  StateDict out;
  collect(module, "", out);
  return out;
}

c10::IValue to_ivalue(const StateDict& state) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& item : state) dict.insert(item.key(), item.value());
  return dict;
}

StateDict from_ivalue(const c10::IValue& value, const std::string& source) {
  XDINO_CHECK(value.isGenericDict(), source, " is a ", value.tagKind(), ", not a dict of tensors");
  StateDict out;
  for (const auto& item : value.toGenericDict()) {
    XDINO_CHECK(item.key().isString(), source, " has a key of type ", item.key().tagKind(),
                "; state dict keys are strings");
    const std::string& key = item.key().toStringRef();
    XDINO_CHECK(item.value().isTensor(), source, ": entry '", key, "' is a ",
                item.value().tagKind(), ", not a tensor");
    out.insert(key, item.value().toTensor());
  }
  return out;
}

std::string LoadReport::summary() const {
  std::ostringstream os;
  os << loaded << " tensors loaded";
  if (!missing.empty()) os << "; " << missing.size() << " missing (" << first_keys(missing) << ")";
  if (!unexpected.empty())
    os << "; " << unexpected.size() << " unexpected (" << first_keys(unexpected) << ")";
  if (!ignored.empty()) os << "; " << ignored.size() << " ignored (" << first_keys(ignored) << ")";
  return os.str();
}

LoadReport load_state_dict(torch::nn::Module& module, const StateDict& state, bool strict,
                           const std::string& source) {
  const StateDict target = state_dict(module);
  LoadReport report;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;  // (model tensor, value)
  for (const auto& item : target) {
    const std::string& key = item.key();
    const torch::Tensor& dst = item.value();
    const torch::Tensor* src = state.find(key);
    if (src == nullptr) {
      if (!ends_with(key, "num_batches_tracked")) report.missing.push_back(key);
      continue;
    }
    XDINO_CHECK(src->defined(), source, ": checkpoint key '", key, "' holds an undefined tensor");
    torch::Tensor value = *src;
    if (dst.dim() == 0 && value.dim() == 1 && value.numel() == 1) value = value[0];
    XDINO_CHECK(value.sizes() == dst.sizes(), source, ": checkpoint key '", key, "' has shape ",
                value.sizes(), " but the model expects ", dst.sizes());
    copies.emplace_back(dst, value);
  }
  for (const auto& item : state)
    if (!target.contains(item.key())) report.unexpected.push_back(item.key());
  if (strict && !report.missing.empty()) {
    const std::string& key = report.missing.front();
    XDINO_FAIL(source, ": the model's key '", key, "' (shape ", target[key].sizes(),
               ") is missing from the checkpoint (", report.missing.size(), " missing, ",
               report.unexpected.size(), " unexpected)",
               prefix_hint(report.unexpected.empty() ? "" : report.unexpected.front()));
  }
  if (strict && !report.unexpected.empty()) {
    const std::string& key = report.unexpected.front();
    XDINO_FAIL(source, ": checkpoint key '", key, "' (shape ", state[key].sizes(),
               ") is not in the model (", report.unexpected.size(), " unexpected)",
               prefix_hint(key));
  }
  torch::NoGradGuard no_grad;
  for (auto& [dst, src] : copies) dst.copy_(src);
  report.loaded = static_cast<int64_t>(copies.size());
  return report;
}

namespace {

// "0.5 0.25" (dino export's metadata) -> {0.5, 0.25}; anything else -> {}.
std::vector<double> numbers_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<double> out;
  for (double v; in >> v;) out.push_back(v);
  return in.eof() ? out : std::vector<double>{};
}

// A training checkpoint's args.mean / args.std (ssl/checkpoint.h), or {}.
std::vector<double> numbers_of(const c10::impl::GenericDict& file, const char* key) {
  std::vector<double> out;
  if (!file.contains("args") || !file.at("args").isGenericDict()) return out;
  const auto args = file.at("args").toGenericDict();
  if (!args.contains(key) || !args.at(key).isList()) return out;
  for (const c10::IValue& v : args.at(key).toListRef()) {
    if (!v.isDouble() && !v.isInt()) return {};
    out.push_back(v.isDouble() ? v.toDouble() : static_cast<double>(v.toInt()));
  }
  return out;
}

}  // namespace

PretrainedWeights read_pretrained(const std::filesystem::path& path,
                                  const std::string& checkpoint_key) {
  const std::string where = quote(path.string());
  // A safetensors file (timm's, the hub's, `dino export`'s) is one flat dict of tensors, in
  // the official layout or timm's (models/timm_names.h): no key to take. A file named
  // .safetensors, or one that neither starts nor is named as a torch.save file, is read as
  // one, so that its own reader names what is wrong with it (a .pth error about zip headers
  // would not help); a file named .pth that is not one gets the .pth reader's line.
  const std::string ext = path.extension().string();
  const bool pth_name = ext == ".pth" || ext == ".pt" || ext == ".tar" || ext == ".ckpt";
  if (ext == ".safetensors" || (!looks_like_pth(path) && !pth_name)) {
    Safetensors file;
    try {
      file = read_safetensors(path);
    } catch (const UsageError& e) {
      if (ext == ".safetensors" || is_safetensors(path)) throw;
      XDINO_FAIL_ARG(where, " is neither a torch.save file (.pth: it does not start with a zip ",
                     "header) nor a safetensors file (", e.what(), ")");
    }
    const StateDict state = from_timm_layout(file.tensors);
    c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
    for (const auto& item : state) dict.insert(item.key(), item.value());
    PretrainedWeights w{dict, where, false};
    if (file.metadata.count("mean") && file.metadata.count("std")) {
      w.mean = numbers_of(file.metadata.at("mean"));
      w.std = numbers_of(file.metadata.at("std"));
    }
    return w;
  }
  const c10::IValue file = load_pth(path);
  XDINO_CHECK(file.isGenericDict(), where, " holds a ", file.tagKind(), ", not a dict of weights");
  const auto top = file.toGenericDict();
  std::string taken;
  for (const std::string& key : {checkpoint_key, std::string("model"), std::string("state_dict")}) {
    if (key.empty() || !top.contains(key)) continue;
    if (key != checkpoint_key && !top.at(key).isGenericDict()) continue;
    taken = key;
    break;
  }
  // eval_knn.py falls back to the whole file when --checkpoint_key is absent, which is right
  // for a flat file of weights (the released DINO ones have no 'teacher' key). A file that
  // holds anything but tensors cannot be that: name the keys it does hold.
  if (taken.empty() && !checkpoint_key.empty()) {
    std::string keys;
    bool flat = true;
    int64_t listed = 0;
    for (const auto& item : top) {
      flat = flat && item.value().isTensor();
      if (!item.key().isString() || ++listed > 12) continue;
      keys += (keys.empty() ? "'" : ", '") + item.key().toStringRef() + "'";
    }
    if (listed > 12) keys += ", ...";
    XDINO_CHECK_ARG(flat, where, " has no key '", checkpoint_key, "' (--checkpoint_key); it holds ",
                    keys);
  }
  const c10::IValue weights = taken.empty() ? file : top.at(taken);
  const std::string source = taken.empty() ? where : where + " (key " + quote(taken) + ")";
  XDINO_CHECK(weights.isGenericDict(), source, " is a ", weights.tagKind(),
              ", not a dict of weights");
  PretrainedWeights w{weights.toGenericDict(), source,
                      taken.empty() && (top.contains("student") || top.contains("teacher"))};
  w.mean = numbers_of(top, "mean");
  w.std = numbers_of(top, "std");
  return w;
}

std::string pretrained_name(const std::string& key) {
  return remove_all(remove_all(key, "module."), "backbone.");
}

bool is_dino_head_key(const std::string& name) {
  return starts_with(name, "head.mlp.") || starts_with(name, "head.last_layer.");
}

bool is_training_only_key(const std::string& name) {
  return is_dino_head_key(name) || starts_with(name, "ibot_head.") || name == "mask_token";
}

torch::Tensor find_weight(const PretrainedWeights& w, const std::string& name) {
  for (const auto& item : w.weights)
    if (item.key().isString() && item.value().isTensor() &&
        pretrained_name(item.key().toStringRef()) == name)
      return item.value().toTensor();
  return {};
}

int64_t position_table_image_size(const PretrainedWeights& weights, int64_t patch_size,
                                  int64_t otherwise) {
  const torch::Tensor table = find_weight(weights, "pos_embed");
  if (!table.defined() || table.dim() != 3 || table.size(0) != 1) return otherwise;
  const auto side = static_cast<int64_t>(std::lround(std::sqrt(double(table.size(1) - 1))));
  if (side < 1 || side * side + 1 != table.size(1)) return otherwise;
  return side * patch_size;
}

std::shared_ptr<Backbone> create_backbone_for(const std::string& arch, BackboneOptions options,
                                              const PretrainedWeights& weights) {
  options.img_size =
      position_table_image_size(weights, patch_size_of(arch, options.patch_size), options.img_size);
  if (options.in_chans == kInChansFromWeights) {
    const std::string key = input_conv_weight_of(arch);
    const torch::Tensor conv = key.empty() ? torch::Tensor() : find_weight(weights, key);
    options.in_chans = conv.defined() && conv.dim() == 4 ? conv.size(1) : 3;
    // The count is the file's, not a flag's: say so, rather than advise an --in_chans the user
    // never typed.
    XDINO_CHECK_ARG(options.in_chans >= 1, weights.source, ": its input convolution ", quote(key),
                    " has shape ", conv.sizes(),
                    ", which takes no input channel; a model needs at least one");
  }
  return create_backbone(arch, options);
}

LoadReport load_pretrained(torch::nn::Module& module, const std::filesystem::path& path,
                           const std::string& checkpoint_key, bool strict) {
  return load_pretrained(module, read_pretrained(path, checkpoint_key), strict);
}

LoadReport load_pretrained(torch::nn::Module& module, const PretrainedWeights& w, bool strict) {
  const std::string& source = w.source;
  const StateDict model = state_dict(module);
  bool model_has_head = false;
  for (const auto& item : model)
    model_has_head = model_has_head || starts_with(item.key(), "head.");

  StateDict state;
  std::vector<std::string> ignored;
  for (const auto& item : w.weights) {
    XDINO_CHECK(item.key().isString(), source, " has a key of type ", item.key().tagKind(),
                "; weight names are strings");
    const std::string& raw = item.key().toStringRef();
    XDINO_CHECK(item.value().isTensor(), source, ": entry '", raw, "' is a ",
                item.value().tagKind(), ", not a tensor",
                w.whole_training_checkpoint
                    ? "; the file is a DINO training checkpoint: choose its 'teacher' or "
                      "'student' weights with --checkpoint_key"
                    : "");
    const std::string name = pretrained_name(raw);
    const bool training_only = is_training_only_key(name);
    if (!model.contains(name) &&
        (training_only || (!model_has_head && starts_with(name, "head.")))) {
      ignored.push_back(raw);
      continue;
    }
    XDINO_CHECK(!state.contains(name), source, ": two keys become '", name,
                "' once 'module.' and 'backbone.' are removed (one is '", raw, "')");
    state.insert(name, item.value().toTensor());
  }
  if (const auto* backbone = dynamic_cast<const Backbone*>(&module))
    match_input_channels(*backbone, model, state, source);
  LoadReport report = load_state_dict(module, state, strict, source);
  report.ignored = std::move(ignored);
  log::info("pretrained weights ", source, ": ", report.summary());
  return report;
}

}  // namespace xdino::models
