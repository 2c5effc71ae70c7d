#include "eval/export.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "augment/ops/tensor.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/ivalue.h"
#include "core/json.h"
#include "core/log.h"
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
  if (!looks_like_pth(path)) return make_dict();  // safetensors: metadata_args() below
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
     << fs::path(o.model.pretrained_weights).filename().string() << "` (key '"
     << o.model.checkpoint_key << "'). It has no classifier"
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
      // Only a plain file of the run goes into the folder a user uploads: a link may point
      // anywhere.
      if (fs::is_symlink(r.curves) || !fs::is_regular_file(r.curves)) {
        log::warn(quote(r.curves), " is not a regular file (a link?): the model card leaves ",
                  "the curves of ", r.method, " ", r.model, " out");
        r.curves.clear();
        continue;
      }
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

// The folder --output names, without a trailing separator ("runs/x/" is "runs/x": shells
// complete folder names with one).
fs::path output_folder(const std::string& output) {
  fs::path out = fs::path(output).lexically_normal();
  while (!out.empty() && !out.has_filename() && out.has_parent_path() && out != out.root_path())
    out = out.parent_path();
  XDINO_CHECK_ARG(
      !out.empty() && out.has_filename() && out.filename() != "." && out.filename() != "..",
      "--output ", quote(output), " does not name a folder to write");
  return out;
}

// The files an export writes; a folder holding anything else is not one.
bool export_file(const std::string& name) {
  if (name == "model.safetensors" || name == "config.json" || name == "README.md" ||
      name == "dino_head.safetensors" || name == "curves.png")
    return true;
  const std::string prefix = "curves_", suffix = ".png";  // curves_1.png, ...
  return name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         name.find_first_not_of("0123456789", prefix.size()) == name.size() - suffix.size();
}

// --force replaces only what an earlier export wrote: a folder of export files alone, with
// model.safetensors and a model card of this project. Anything else is refused, whole.
void check_replaceable(const fs::path& out, const std::string& output) {
  XDINO_CHECK_ARG(!fs::is_symlink(out) && fs::is_directory(out), quote(output),
                  " is not a folder: --output names the folder to write (--force replaces only "
                  "a folder that dino export wrote)");
  const std::string refuse = quote(output) + " was not written by dino export";
  const std::string fix =
      ": --force replaces only a folder of an earlier export; give another "
      "--output";
  std::vector<fs::directory_entry> entries(fs::directory_iterator(out), {});
  std::sort(entries.begin(), entries.end());  // the line names the first, whatever the disk's order
  for (const auto& e : entries) {
    const std::string name = e.path().filename().string();
    XDINO_CHECK_ARG(e.is_regular_file() && !e.is_symlink() && export_file(name), refuse,
                    " (it holds ", quote(name), ")", fix);
  }
  XDINO_CHECK_ARG(fs::is_regular_file(out / "model.safetensors") &&
                      fs::is_regular_file(out / "README.md") &&
                      read_file(out / "README.md").find("\n- xcit-dino\n") != std::string::npos,
                  refuse, " (no model.safetensors and model card of this project)", fix);
}

// What a safetensors file's metadata says of its model (dino export writes arch, patch_size,
// in_chans, mean and std): as the args of a checkpoint.
IDict metadata_args(const fs::path& path) {
  IDict args = make_dict();
  if (looks_like_pth(path)) return args;
  std::map<std::string, std::string> m;
  try {
    m = read_safetensors(path).metadata;
  } catch (const std::exception&) {
    return args;  // not one: read_pretrained says why, in the weights' own words
  }
  const auto numbers = [](const std::string& text) {
    c10::impl::GenericList list(c10::FloatType::get());
    std::istringstream in(text);
    for (double v; in >> v;) list.push_back(v);
    return list;
  };
  if (m.count("arch")) args.insert("arch", m.at("arch"));
  if (m.count("patch_size")) {
    char* end = nullptr;
    const long long v = std::strtoll(m.at("patch_size").c_str(), &end, 10);
    if (end != nullptr && *end == '\0') args.insert("patch_size", static_cast<int64_t>(v));
  }
  for (const char* key : {"mean", "std"})
    if (m.count(key)) args.insert(key, numbers(m.at(key)));
  return args;
}

// What the exporter needs of the normalisation: as many means and stds as the model has
// input channels (the checkpoint's, or the defaults of 1 and 3 channels). Unlike the loaders,
// any count: exporting reads no image.
augment::Normalization export_normalization(int64_t channels, const IDict& args,
                                            const std::string& weights) {
  const std::vector<double> mean = doubles_of(args, "mean"), std = doubles_of(args, "std");
  augment::Normalization n;
  n.channels = channels;
  if (mean.empty() && std.empty()) {
    XDINO_CHECK_ARG(channels == 1 || channels == 3, quote(weights), " holds a ", channels,
                    "-channel model and records no mean and std for its config; only 1 and 3 "
                    "channels have a default (export it from the training checkpoint, whose "
                    "args hold them)");
    return augment::default_normalization(channels);
  }
  const auto expand = [&](const std::vector<double>& v, const char* what) {
    XDINO_CHECK_ARG(v.size() == 1 || static_cast<int64_t>(v.size()) == channels, quote(weights),
                    " records ", v.size(), " ", what, " values for a ", channels, "-channel model");
    return v.size() == 1 ? std::vector<double>(channels, v[0]) : v;
  };
  n.mean = expand(mean, "mean");
  n.std = expand(std, "std");
  return n;
}

// The model to export, built for its weights and loaded strictly: what is exported is what
// evaluates.
struct Exported {
  std::string arch;
  int64_t patch_size = 0, image_size = 0;
  std::optional<models::TimmTwin> twin;
  std::shared_ptr<models::Backbone> model;
  models::StateDict state, head;
  IDict args = make_dict();
  augment::Normalization norm;
};

Exported read_model(const ExportOptions& o) {
  Exported x;
  x.args = checkpoint_args(o.model.pretrained_weights);
  if (x.args.size() == 0) x.args = metadata_args(o.model.pretrained_weights);
  x.arch = o.model.arch;
  if (x.arch.empty())
    if (const c10::IValue* a = find(x.args, "arch"); a != nullptr && a->isString())
      x.arch = a->toStringRef();
  XDINO_CHECK_ARG(!x.arch.empty(), "--arch is required: ", quote(o.model.pretrained_weights),
                  " records no architecture");
  models::check_arch(x.arch);
  x.patch_size = o.model.patch_size;
  if (const c10::IValue* p = find(x.args, "patch_size"); p != nullptr && o.model.arch.empty())
    x.patch_size = as_int(*p, "patch_size");
  x.patch_size = models::patch_size_of(x.arch, x.patch_size);
  std::string why;
  x.twin = models::timm_twin(x.arch, x.patch_size, &why);
  XDINO_CHECK_ARG(o.format != "timm" || x.twin, why,
                  "; --format safetensors exports it in this project's own layout");

  const models::PretrainedWeights weights =
      models::read_pretrained(o.model.pretrained_weights, o.model.checkpoint_key);
  x.image_size = o.image_size;
  if (x.image_size == 0) {
    const c10::IValue* g = find(x.args, "global_crops_size");
    x.image_size = g != nullptr ? as_int(*g, "global_crops_size") : 224;
  }
  x.image_size = models::position_table_image_size(weights, x.patch_size, x.image_size);
  models::BackboneOptions bo = eval_backbone_options(x.arch, x.patch_size, x.image_size);
  bo.in_chans = models::kInChansFromWeights;
  x.model = models::create_backbone_for(x.arch, bo, weights);
  models::load_pretrained(*x.model, weights, /*strict=*/true);
  x.state = models::state_dict(*x.model);
  for (const auto& item : weights.weights) {
    const std::string name = models::pretrained_name(item.key().toStringRef());
    if (o.with_head && models::is_dino_head_key(name) && item.value().isTensor())
      x.head.insert(name, item.value().toTensor());
  }
  XDINO_CHECK_ARG(!o.with_head || !x.head.is_empty(),
                  "--with_head: ", quote(o.model.pretrained_weights),
                  " holds no DINO head (head.mlp.*, head.last_layer.*)");
  x.norm = export_normalization(x.model->in_chans(), x.args, o.model.pretrained_weights);
  return x;
}

// timm's config.json for the model (what timm.create_model("local-dir:DIR") reads).
Json timm_config(const Exported& x) {
  const TimmFamily family = timm_family(*x.model);
  Json model_args = Json::object();
  model_args["num_classes"] = 0;
  model_args["in_chans"] = x.model->in_chans();
  model_args["global_pool"] = family.global_pool;
  if (family.fixed_input_size) model_args["img_size"] = Json::array({x.image_size, x.image_size});
  for (const auto& [k, v] : x.twin->model_args.items()) model_args[k] = v;
  Json cfg = Json::object();
  cfg["tag"] = "dino";
  cfg["custom_load"] = false;
  cfg["input_size"] = Json::array({x.model->in_chans(), x.image_size, x.image_size});
  cfg["fixed_input_size"] = family.fixed_input_size;
  cfg["interpolation"] = "bicubic";
  cfg["crop_pct"] = 0.875;  // DINO's evaluations: Resize(size * 256 / 224), CenterCrop(size)
  cfg["crop_mode"] = "center";
  cfg["mean"] = x.norm.mean;
  cfg["std"] = x.norm.std;
  cfg["num_classes"] = 0;
  cfg["pool_size"] = nullptr;
  cfg["first_conv"] = family.first_conv;
  cfg["classifier"] = family.classifier;
  Json config = Json::object();
  config["architecture"] = x.twin->architecture;
  config["num_classes"] = 0;
  config["num_features"] = x.model->embed_dim();
  config["global_pool"] = family.global_pool;
  config["model_args"] = model_args;
  config["pretrained_cfg"] = cfg;
  return config;
}

// Every file of the export into `dir`.
void write_export(const ExportOptions& o, const Exported& x, const fs::path& dir) {
  if (o.format == "timm") {
    write_safetensors(dir / "model.safetensors", models::to_timm_layout(x.state, x.arch),
                      {{"format", "pt"}});
    write_file_atomically(dir / "config.json", timm_config(x).dump(2) + "\n");
  } else {
    const auto list = [](const std::vector<double>& v) {
      std::string text;
      for (double value : v) {
        if (!text.empty()) text += ' ';
        text += python_repr(value);
      }
      return text;
    };
    write_safetensors(dir / "model.safetensors", x.state,
                      {{"format", "pt"},
                       {"arch", x.arch},
                       {"patch_size", std::to_string(x.patch_size)},
                       {"in_chans", std::to_string(x.model->in_chans())},
                       {"mean", list(x.norm.mean)},
                       {"std", list(x.norm.std)}});
  }
  if (!x.head.is_empty()) write_safetensors(dir / "dino_head.safetensors", x.head);
  write_file_atomically(dir / "README.md",
                        model_card(o, x.arch, x.patch_size, *x.model,
                                   x.twin ? x.twin->architecture : "", x.args, dir));
}

// Puts the finished folder `tmp` where `out` is. An earlier export there is exchanged with it
// in one step (renameat2's RENAME_EXCHANGE: both names or neither), then removed. Where the
// file system cannot exchange, the old folder goes aside first, and comes back if the new one
// cannot take its place: a failed replace never leaves the earlier export at <name>.old-<pid>.
static void replace_folder(const fs::path& tmp, const fs::path& out, bool exists,
                           const fs::path& old) {
  if (!exists) {
    fs::rename(tmp, out);
    return;
  }
  if (renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);  // the earlier export, now under the temporary name
    return;
  }
  fs::rename(out, old);
  try {
    fs::rename(tmp, out);
  } catch (...) {
    std::error_code ec;
    fs::rename(old, out, ec);
    throw;
  }
  fs::remove_all(old);
}

}  // namespace

std::string export_weights(const ExportOptions& o) {
  XDINO_CHECK_ARG(o.format == "timm" || o.format == "safetensors", "--format ", o.format,
                  " is not one of timm, safetensors");
  XDINO_CHECK_ARG(!o.output.empty(), "--output is required: the folder to write");
  XDINO_CHECK_ARG(!o.model.pretrained_weights.empty(), "--pretrained_weights is required");
  XDINO_CHECK_ARG(o.image_size >= 0 && o.image_size <= 65536, "--image_size must be 0 (the run's) ",
                  "or a size in pixels, got ", o.image_size);
  const std::string problem = file_problem(o.model.pretrained_weights);
  XDINO_CHECK_ARG(problem.empty(), "weights file ", quote(o.model.pretrained_weights), " ", problem,
                  " (--pretrained_weights)");
  const fs::path out = output_folder(o.output);
  const bool exists = fs::exists(fs::symlink_status(out));
  XDINO_CHECK_ARG(!exists || o.force, quote(o.output),
                  " exists: give --force to replace it, or another --output");
  if (exists) check_replaceable(out, o.output);

  const Exported x = read_model(o);

  // Everything into a temporary folder beside the output, renamed into place at the end.
  const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const std::string stem = out.filename().string(), pid = std::to_string(getpid());
  const fs::path tmp = parent / (stem + ".tmp-" + pid);
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    write_export(o, x, tmp);
    replace_folder(tmp, out, exists, parent / (stem + ".old-" + pid));
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return "exported " + x.arch + " (" + std::to_string(x.state.size()) + " tensors" +
         (o.format == "timm" ? ", as timm's " + x.twin->architecture : ", official layout") +
         (x.head.is_empty() ? "" : ", with the DINO head") + ") to " + out.string();
}

}  // namespace xdino::eval
