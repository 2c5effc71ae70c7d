// The reading half of `dino report` (eval/report.h): run folders and their result files to
// rows.
#include <algorithm>
#include <filesystem>
#include <map>

#include "core/check.h"
#include "core/ini.h"
#include "core/json.h"
#include "core/recipe_name.h"
#include "eval/frozen_backbone.h"
#include "eval/report.h"
#include "models/registry.h"

namespace xdino::eval {
namespace fs = std::filesystem;
namespace {

// Key/value pairs of an INI file, sections flattened (a run's config.ini has one); a missing
// file gives none. Malformed files throw xdino::UsageError naming the line (core/ini.h).
std::map<std::string, std::string> read_ini(const fs::path& path) {
  return xdino::read_ini(path).flat();
}

// The recipe of the training run whose config.ini this is (`dino train` writes it beside the
// weights): "DINO", or with DINOv2's options "DINO + KoLeo 0.1 + ..." (core/recipe_name.h).
// A missing file or option is DINO's default.
std::string training_recipe(const fs::path& config) {
  const auto kv = read_ini(config);
  const auto number = [&](const char* k) {
    if (!kv.count(k)) return 0.0;
    try {
      return std::stod(kv.at(k));
    } catch (const std::exception&) {
      XDINO_FAIL_ARG("bad value '", kv.at(k), "' for ", k, " in ", config.string());
    }
  };
  const auto text = [&](const char* k) { return kv.count(k) ? kv.at(k) : std::string(); };
  return recipe_name(number("koleo_loss_weight"), text("centering") == "sinkhorn_knopp",
                     number("ibot_loss_weight"), text("ibot_separate_head") == "true");
}

// DIR/name, DIR/<stem>/name, or the single DIR/*/name.
std::optional<fs::path> find_result(const fs::path& dir, const std::string& name,
                                    const std::string& stem) {
  if (fs::is_regular_file(dir / name)) return dir / name;
  if (fs::is_regular_file(dir / stem / name)) return dir / stem / name;
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::is_regular_file(e.path() / name)) found.push_back(e.path() / name);
  XDINO_CHECK_ARG(found.size() <= 1, "run folder '", dir.string(), "' holds several ", name,
                  " files (", found.front().string(), ", ", found[1].string(),
                  "): give each evaluation its own --runs folder");
  if (found.empty()) return std::nullopt;
  return found.front();
}

struct ModelKey {  // unset fields are filled from config.ini, then defaults
  std::string arch;
  std::optional<int64_t> patch_size, image_size;
  std::optional<bool> pretrained;
};

// resolution false: the file's image_size is an evaluation input size (copy detection,
// retrieval), not the model resolution of the first table.
void merge_model(ModelKey& key, const Json& j, const fs::path& file, bool resolution = true) {
  if (j.contains("arch")) {
    const auto arch = j.at("arch").get<std::string>();
    XDINO_CHECK_ARG(key.arch.empty() || key.arch == arch,
                    "run folder results disagree on the architecture: '", key.arch, "' vs '", arch,
                    "' in ", file.string());
    key.arch = arch;
  }
  if (j.contains("patch_size")) key.patch_size = j.at("patch_size").get<int64_t>();
  if (resolution && j.contains("image_size")) key.image_size = j.at("image_size").get<int64_t>();
  if (j.contains("weights")) key.pretrained = j.at("weights").get<std::string>() == "pretrained";
}

}  // namespace

std::string random_init_method(const std::string& batch_norm) {
  if (batch_norm == "initial") return "Random init, initial BatchNorm statistics";
  if (batch_norm == "data") return "Random init, BatchNorm statistics of the data";
  if (batch_norm == "none") return "Random init (no BatchNorm)";
  return "Random init";
}

ModelFacts registry_facts(const std::string& arch, int64_t patch_size, int64_t image_size) {
  const auto model =
      models::create_backbone(arch, eval_backbone_options(arch, patch_size, image_size));
  ModelFacts f;
  for (const auto& p : model->parameters()) f.params += static_cast<double>(p.numel());
  f.flops = model->flops(image_size, image_size);
  return f;
}

std::string display_model_name(const std::string& arch, int64_t patch_size, int64_t image_size) {
  std::string name = models::paper_name(arch, patch_size);
  if (image_size != 224) name += "↑" + std::to_string(image_size);
  return name;
}

std::vector<ReportRow> read_run(const std::string& dir_text, const ModelFactsFn& facts) {
  const fs::path dir(dir_text);
  XDINO_CHECK_ARG(fs::is_directory(dir), "run folder '", dir_text, "' not found (--runs)");
  const auto knn_file = find_result(dir, "knn.json", "knn");
  const auto linear_file = find_result(dir, "linear.json", "linear");
  const auto copy_file = find_result(dir, "copy_detection.json", "copy_detection");
  const auto davis_file = find_result(dir, "video_segmentation.json", "video_segmentation");
  std::vector<fs::path> retrieval_files;  // one per dataset
  if (fs::is_regular_file(dir / "retrieval.json"))
    retrieval_files.push_back(dir / "retrieval.json");
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::is_regular_file(e.path() / "retrieval.json"))
      retrieval_files.push_back(e.path() / "retrieval.json");
  std::sort(retrieval_files.begin(), retrieval_files.end());
  const std::optional<fs::path> any_file = knn_file      ? knn_file
                                           : linear_file ? linear_file
                                           : copy_file   ? copy_file
                                           : davis_file  ? davis_file
                                           : retrieval_files.empty()
                                               ? std::nullopt
                                               : std::optional<fs::path>(retrieval_files.front());
  XDINO_CHECK_ARG(any_file, "run folder '", dir_text,
                  "' has no knn.json, linear.json, copy_detection.json, retrieval.json or "
                  "video_segmentation.json: run an evaluation with --output_dir there first");
  ReportRow row, bn_row;  // bn_row: random weights with the data's BatchNorm statistics
  row.run = dir_text;
  ModelKey key;
  // A missing key or a value of the wrong type names the file.
  const auto read_result = [&](const fs::path& file, const auto& use, bool resolution = true) {
    const Json j = parse_json(read_file(file), file.string());
    try {
      merge_model(key, j, file, resolution);
      use(j);
    } catch (const Json::exception& e) {
      XDINO_FAIL_ARG("unexpected content in ", file.string(), ": ", e.what());
    }
  };
  if (knn_file) {
    read_result(*knn_file, [&](const Json& j) {
      const Json& rep = j.at("reported");
      row.knn = rep.at("top1").get<double>();
      row.knn_k = rep.at("k").get<int64_t>();
      if (j.contains("batch_norm")) row.batch_norm = j.at("batch_norm").get<std::string>();
      if (j.contains("data_batch_norm")) {
        const Json& bn = j.at("data_batch_norm");
        bn_row.knn = bn.at("reported").at("top1").get<double>();
        bn_row.knn_k = bn.at("reported").at("k").get<int64_t>();
        bn_row.bn_images = bn.at("images").get<int64_t>();
        bn_row.batch_norm = "data";
      }
    });
  }
  if (linear_file) {
    read_result(*linear_file, [&](const Json& j) {
      row.linear = j.at("best").at("acc1").get<double>();
      row.linear_cached = j.at("protocol").get<std::string>().rfind("cached-features", 0) == 0;
    });
  }
  if (copy_file)
    read_result(
        *copy_file, [&](const Json& j) { row.copydays_strong = j.at("strong_mAP").get<double>(); },
        false);
  for (const fs::path& f : retrieval_files) {
    read_result(
        f,
        [&](const Json& j) {
          const std::string dataset = j.at("dataset").get<std::string>();
          auto& m = dataset == "roxford5k" ? row.roxford_m : row.rparis_m;
          auto& h = dataset == "roxford5k" ? row.roxford_h : row.rparis_h;
          XDINO_CHECK_ARG(!m, "run folder '", dir_text, "' holds two retrieval.json files for ",
                          dataset, ": give each its own --runs folder");
          m = j.at("mAP_M").get<double>();
          h = j.at("mAP_H").get<double>();
        },
        false);
  }
  if (davis_file) {
    read_result(
        *davis_file,
        [&](const Json& j) {
          if (!j.contains("J&F-Mean")) return;  // segmented without --evaluate
          row.davis_jf = 100.0 * j.at("J&F-Mean").get<double>();
          row.davis_j = 100.0 * j.at("J-Mean").get<double>();
          row.davis_f = 100.0 * j.at("F-Mean").get<double>();
        },
        false);
  }
  // Results written by older or other tools may lack fields: the run's config.ini has them.
  const fs::path ini = any_file->parent_path() / "config.ini";
  const auto kv = read_ini(fs::exists(ini) ? ini : dir / "config.ini");
  const auto int_of = [&](const std::string& k) -> std::optional<int64_t> {
    if (!kv.count(k)) return std::nullopt;
    try {
      return std::stoll(kv.at(k));
    } catch (const std::exception&) {
      XDINO_FAIL_ARG("bad value '", kv.at(k), "' for ", k, " in ", ini.string());
    }
  };
  if (key.arch.empty() && kv.count("arch")) key.arch = kv.at("arch");
  if (!key.patch_size) key.patch_size = int_of("patch_size");
  if (!key.image_size) key.image_size = int_of("image_size");
  if (!key.pretrained && kv.count("pretrained_weights"))
    key.pretrained = !kv.at("pretrained_weights").empty();
  std::string recipe = "DINO";
  if (kv.count("pretrained_weights") && !kv.at("pretrained_weights").empty()) {
    const fs::path trained = fs::path(kv.at("pretrained_weights")).parent_path();
    const fs::path curves = trained / "curves.png";
    if (fs::exists(curves)) row.curves = curves.string();
    recipe = training_recipe(trained / "config.ini");
  }
  XDINO_CHECK_ARG(!key.arch.empty(), "run folder '", dir_text,
                  "': no architecture in its results or config.ini");
  const int64_t patch = key.patch_size.value_or(16), size = key.image_size.value_or(224);
  row.arch = key.arch;
  row.image_size = size;
  row.model = display_model_name(key.arch, patch, size);
  row.method = key.arch == "pixels"            ? "None"
               : key.pretrained.value_or(true) ? recipe
                                               : random_init_method(row.batch_norm);
  if (facts) {
    const ModelFacts f = facts(key.arch, patch, size);
    row.params = f.params;
    row.flops = f.flops;
  }
  std::vector<ReportRow> rows{row};
  if (bn_row.knn) {
    bn_row.method = random_init_method(bn_row.batch_norm);
    bn_row.model = row.model;
    bn_row.params = row.params;
    bn_row.flops = row.flops;
    bn_row.run = row.run;
    bn_row.arch = row.arch;
    bn_row.image_size = row.image_size;
    rows.push_back(bn_row);
  }
  return rows;
}

}  // namespace xdino::eval
