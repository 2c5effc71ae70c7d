#include "eval/export.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "augment/ops/tensor.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/ivalue.h"
#include "core/json.h"
#include "core/paths.h"
#include "core/pth.h"
#include "core/python_format.h"
#include "core/safetensors.h"
#include "eval/frozen_backbone.h"
#include "eval/report.h"
#include "models/registry.h"
#include "models/timm_names.h"
#include "models/weights.h"

namespace xdino::eval {
namespace {

namespace fs = std::filesystem;

// A training checkpoint's args (ssl/checkpoint.h writes them), or none: flat weights, a
// safetensors file, an official checkpoint whose args are an argparse Namespace.
IDict checkpoint_args(const fs::path& path) {
  if (is_safetensors(path)) return make_dict();
  const c10::IValue file = load_pth(path);
  if (!file.isGenericDict()) return make_dict();
  const c10::IValue* args = find(file.toGenericDict(), "args");
  return args != nullptr && args->isGenericDict() ? args->toGenericDict() : make_dict();
}

// An args value as the model card prints it: Python's repr of numbers, lists space-separated.
std::string text_of(const c10::IValue& v) {
  if (v.isString()) return v.toStringRef();
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) return python_repr(v.toDouble());
  if (v.isList()) {
    std::string out;
    for (const c10::IValue& item : v.toListRef()) out += (out.empty() ? "" : " ") + text_of(item);
    return out;
  }
  if (v.isNone()) return "";
  return "<" + std::string(v.tagKind()) + ">";
}

std::vector<double> doubles_of(const IDict& args, const char* key) {
  std::vector<double> out;
  if (const c10::IValue* v = find(args, key); v != nullptr && v->isList())
    for (const c10::IValue& item : v->toListRef()) out.push_back(as_double(item, key));
  return out;
}

// What timm's pretrained_cfg says of a family: its first conv, classifier, pooling.
struct TimmFamily {
  std::string first_conv, classifier, global_pool;
  bool fixed_input_size = true;
};
TimmFamily timm_family(const models::Backbone& model) {
  const std::string conv = models::input_conv_weight_of(model.arch());
  TimmFamily f;
  f.first_conv = conv.substr(0, conv.size() - std::string(".weight").size());
  const bool resnet = conv == "conv1.weight";
  f.classifier = resnet ? "fc" : "head";
  f.global_pool = resnet ? "avg" : "token";
  f.fixed_input_size = !resnet;
  return f;
}

std::string model_card(const ExportOptions& o, const std::string& arch, int64_t patch_size,
                       const models::Backbone& model, const std::string& timm_name,
                       const IDict& args, const fs::path& folder) {
  std::ostringstream md;
  const std::string name = models::paper_name(arch, patch_size);
  md << "---\n"
     << (o.format == "timm" ? "library_name: timm\n" : "")
     << "tags:\n- image-feature-extraction\n- dino\n- self-supervised\n- xcit-dino\n"
     << "---\n\n"
     << "# " << name << ", DINO (xcit-dino)\n\n"
     << "A " << name << " backbone (" << model.embed_dim() << "-dimensional features, "
     << model.in_chans() << "-channel input) pretrained with DINO self-supervision by "
     << "xcit-dino's `dino train`, exported by `dino export --format " << o.format << "` from `"
     << fs::path(o.pretrained_weights).filename().string() << "` (key '" << o.checkpoint_key
     << "'). It has no classifier"
     << (o.with_head ? "; the DINO head is in dino_head.safetensors" : " and no DINO head")
     << ".\n\n";
  if (o.format == "timm") {
    md << "## Use\n\n```python\nimport timm\n"
       << "model = timm.create_model(\"local-dir:" << fs::path(o.output).filename().string()
       << "\", pretrained=True)  # timm's " << timm_name << "\n"
       << "features = model(images)  # images normalised with config.json's mean and std\n```\n\n";
  } else {
    md << "## Use\n\n`dino knn --arch " << arch << " --pretrained_weights "
       << "model.safetensors ...` (the official names; metadata: arch, patch_size, in_chans, "
       << "mean, std).\n\n";
  }
  md << "## Evaluation\n\n";
  if (o.runs.empty()) {
    md << "No evaluation was given to `dino export` (--runs).\n\n";
  } else {
    std::vector<ReportRow> rows;
    for (const std::string& run : o.runs)
      for (ReportRow& r : read_run(run, registry_facts)) rows.push_back(std::move(r));
    // The curves travel with the card (the folder is uploaded whole): curves.png, curves_1.png...
    std::map<std::string, std::string> copied;
    for (ReportRow& r : rows) {
      if (r.curves.empty()) continue;
      auto [it, added] = copied.try_emplace(
          r.curves,
          copied.empty() ? "curves.png" : "curves_" + std::to_string(copied.size()) + ".png");
      if (added) fs::copy_file(r.curves, folder / it->second, fs::copy_options::overwrite_existing);
      r.curves = it->second;
    }
    md << render_report(rows, ReportFormat::kMarkdown) << "\n";
  }
  md << "## Training\n\n";
  if (args.size() == 0) {
    md << "The weights file records no training flags.\n";
  } else {
    md << "The flags of the run, as the checkpoint records them:\n\n| flag | value |\n|---|---|\n";
    for (const auto& item : args) {
      const std::string value = text_of(item.value());
      md << "| " << item.key().toStringRef() << " | "
         << (value.empty() ? "(not set)" : "`" + value + "`") << " |\n";
    }
  }
  return md.str();
}

}  // namespace

std::string export_weights(const ExportOptions& o) {
  XDINO_CHECK_ARG(o.format == "timm" || o.format == "safetensors", "--format ", o.format,
                  " is not one of timm, safetensors");
  XDINO_CHECK_ARG(!o.output.empty(), "--output is required: the folder to write");
  XDINO_CHECK_ARG(!o.pretrained_weights.empty(), "--pretrained_weights is required");
  const std::string problem = file_problem(o.pretrained_weights);
  XDINO_CHECK_ARG(problem.empty(), "weights file '", o.pretrained_weights, "' ", problem,
                  " (--pretrained_weights)");
  const fs::path out(o.output);
  XDINO_CHECK_ARG(!fs::exists(out) || o.force, "'", o.output,
                  "' exists: give --force to replace it, or another --output");
  XDINO_CHECK_ARG(!fs::exists(out) || fs::is_directory(out), "'", o.output,
                  "' is a file: --output names a folder");

  const IDict args = checkpoint_args(o.pretrained_weights);
  std::string arch = o.arch;
  if (arch.empty())
    if (const c10::IValue* a = find(args, "arch"); a != nullptr && a->isString())
      arch = a->toStringRef();
  XDINO_CHECK_ARG(!arch.empty(), "--arch is required: '", o.pretrained_weights,
                  "' records no architecture");
  models::check_arch(arch);
  int64_t patch_size = o.patch_size;
  if (const c10::IValue* p = find(args, "patch_size"); p != nullptr && o.arch.empty())
    patch_size = as_int(*p, "patch_size");
  patch_size = models::patch_size_of(arch, patch_size);
  std::string why;
  const std::optional<models::TimmTwin> twin = models::timm_twin(arch, patch_size, &why);
  XDINO_CHECK_ARG(o.format != "timm" || twin, why,
                  "; --format safetensors exports it in this project's own layout");

  // The model, built for its weights and loaded strictly: what is exported is what evaluates.
  const models::PretrainedWeights weights =
      models::read_pretrained(o.pretrained_weights, o.checkpoint_key);
  int64_t image_size = o.image_size;
  if (image_size == 0) {
    const c10::IValue* g = find(args, "global_crops_size");
    image_size = g != nullptr ? as_int(*g, "global_crops_size") : 224;
  }
  image_size = models::position_table_image_size(weights, patch_size, image_size);
  models::BackboneOptions bo = eval_backbone_options(arch, patch_size, image_size);
  bo.in_chans = models::kInChansFromWeights;
  const auto model = models::create_backbone_for(arch, bo, weights);
  models::load_pretrained(*model, weights, /*strict=*/true);
  models::StateDict state = models::state_dict(*model);
  models::StateDict head;
  for (const auto& item : weights.weights) {
    const std::string name = models::pretrained_name(item.key().toStringRef());
    if (o.with_head && models::is_dino_head_key(name) && item.value().isTensor())
      head.insert(name, item.value().toTensor());
  }
  XDINO_CHECK_ARG(!o.with_head || !head.is_empty(), "--with_head: '", o.pretrained_weights,
                  "' holds no DINO head (head.mlp.*, head.last_layer.*)");
  const augment::Normalization norm = augment::normalization_for(
      model->in_chans(), doubles_of(args, "mean"), doubles_of(args, "std"));

  // Everything into a temporary folder beside the output, renamed into place at the end.
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const fs::path tmp = parent / (out.filename().string() + ".tmp-" + std::to_string(getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    const std::string timm_name = twin ? twin->architecture : "";
    if (o.format == "timm") {
      write_safetensors(tmp / "model.safetensors", models::to_timm_layout(state, arch),
                        {{"format", "pt"}});
      const TimmFamily family = timm_family(*model);
      Json model_args = Json::object();
      model_args["num_classes"] = 0;
      model_args["in_chans"] = model->in_chans();
      model_args["global_pool"] = family.global_pool;
      if (family.fixed_input_size) model_args["img_size"] = Json::array({image_size, image_size});
      for (const auto& [k, v] : twin->model_args.items()) model_args[k] = v;
      Json cfg = Json::object();
      cfg["tag"] = "dino";
      cfg["custom_load"] = false;
      cfg["input_size"] = Json::array({model->in_chans(), image_size, image_size});
      cfg["fixed_input_size"] = family.fixed_input_size;
      cfg["interpolation"] = "bicubic";
      cfg["crop_pct"] = 0.875;  // DINO's evaluations: Resize(size * 256 / 224), CenterCrop(size)
      cfg["crop_mode"] = "center";
      cfg["mean"] = norm.mean;
      cfg["std"] = norm.std;
      cfg["num_classes"] = 0;
      cfg["pool_size"] = nullptr;
      cfg["first_conv"] = family.first_conv;
      cfg["classifier"] = family.classifier;
      Json config = Json::object();
      config["architecture"] = timm_name;
      config["num_classes"] = 0;
      config["num_features"] = model->embed_dim();
      config["global_pool"] = family.global_pool;
      config["model_args"] = model_args;
      config["pretrained_cfg"] = cfg;
      write_file_atomically(tmp / "config.json", config.dump(2) + "\n");
    } else {
      const auto list = [](const std::vector<double>& v) {
        std::string s;
        for (double x : v) s += (s.empty() ? "" : " ") + python_repr(x);
        return s;
      };
      write_safetensors(tmp / "model.safetensors", state,
                        {{"format", "pt"},
                         {"arch", arch},
                         {"patch_size", std::to_string(patch_size)},
                         {"in_chans", std::to_string(model->in_chans())},
                         {"mean", list(norm.mean)},
                         {"std", list(norm.std)}});
    }
    if (!head.is_empty()) write_safetensors(tmp / "dino_head.safetensors", head);
    write_file_atomically(tmp / "README.md",
                          model_card(o, arch, patch_size, *model, timm_name, args, tmp));
    // Replace the old folder whole: aside, the new one in, the old one gone.
    const fs::path old = parent / (out.filename().string() + ".old-" + std::to_string(getpid()));
    if (fs::exists(out)) fs::rename(out, old);
    fs::rename(tmp, out);
    fs::remove_all(old);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return "exported " + arch + " (" + std::to_string(state.size()) + " tensors" +
         (o.format == "timm" ? ", as timm's " + twin->architecture : ", official layout") +
         (head.is_empty() ? "" : ", with the DINO head") + ") to " + o.output;
}

}  // namespace xdino::eval
