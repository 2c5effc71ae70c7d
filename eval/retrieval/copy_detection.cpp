#include "eval/retrieval/copy_detection.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "eval/retrieval/features.h"
#include "eval/retrieval/ranking.h"
#include "eval/retrieval/whitening.h"

namespace fs = std::filesystem;

namespace xdino::eval::retrieval {
namespace {

std::vector<std::string> sorted_files(const fs::path& dir,
                                      const std::function<bool(const std::string&)>& keep) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (keep(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<std::string> with_folder(const std::string& folder,
                                     const std::vector<std::string>& names) {
  std::vector<std::string> paths;
  for (const std::string& n : names) paths.push_back(folder + "/" + n);
  return paths;
}

}  // namespace

const std::vector<std::string>& CopydaysLayout::block_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"original", "strong"};
    for (int q : {3, 5, 8, 10, 15, 20, 30, 50, 75}) n.push_back("jpegqual/" + std::to_string(q));
    for (int c : {10, 15, 20, 30, 40, 50, 60, 70, 80}) n.push_back("crops/" + std::to_string(c));
    return n;
  }();
  return names;
}

CopydaysLayout CopydaysLayout::open(const std::string& root) {
  CopydaysLayout layout;
  layout.root = root;
  for (const std::string& name : block_names()) {
    const fs::path dir = fs::path(root) / name;
    XDINO_CHECK_ARG(fs::is_directory(dir), "Copydays block '", name, "' is missing: no folder ",
                    dir.string(),
                    " (--data_path must hold original, strong, jpegqual/<q> and "
                    "crops/<p>)");
    CopydaysBlock block{
        name, sorted_files(dir, [](const std::string& f) { return ends_with(f, ".jpg"); })};
    XDINO_CHECK_ARG(!block.files.empty(), "Copydays block '", name, "' has no .jpg image in ",
                    dir.string());
    layout.blocks.push_back(std::move(block));
  }
  const size_t originals = layout.blocks[0].files.size();
  for (size_t b = 2; b < layout.blocks.size(); ++b) {
    XDINO_CHECK_ARG(layout.blocks[b].files.size() == originals, "Copydays block '",
                    layout.blocks[b].name, "' has ", layout.blocks[b].files.size(),
                    " images but 'original' has ", originals,
                    ": each copy is matched to the original at its sorted position");
  }
  for (size_t q = 0; q < layout.blocks[1].files.size(); ++q) {
    XDINO_CHECK_ARG(!layout.positives(1, q).empty(), "Copydays 'strong' image ",
                    layout.blocks[1].files[q],
                    " shares its first 4 characters with no original, so it has no positive");
  }
  return layout;
}

std::vector<std::string> CopydaysLayout::paths(size_t block) const {
  return with_folder(root + "/" + blocks[block].name, blocks[block].files);
}

std::vector<int64_t> CopydaysLayout::positives(size_t block, size_t query) const {
  if (blocks[block].name != "strong") return {static_cast<int64_t>(query)};
  const std::string prefix = blocks[block].files[query].substr(0, 4);
  std::vector<int64_t> out;
  const std::vector<std::string>& originals = blocks[0].files;
  for (size_t j = 0; j < originals.size(); ++j)
    if (originals[j].substr(0, 4) == prefix) out.push_back(static_cast<int64_t>(j));
  return out;
}

CopyDetectionScores evaluate_copy_detection(const CopydaysLayout& layout,
                                            const torch::Tensor& ids) {
  size_t total = 0;
  for (const CopydaysBlock& b : layout.blocks) total += b.files.size();
  XDINO_CHECK(ids.dim() == 2 && ids.size(0) == static_cast<int64_t>(total) &&
                  ids.scalar_type() == torch::kInt64,
              "copy detection expects (", total, ", K) int64 neighbour ids, got ", ids.sizes());
  const torch::Tensor cpu = ids.contiguous().to(torch::kCPU);
  const int64_t k = cpu.size(1);
  CopyDetectionScores scores;
  double sum_all = 0;
  int64_t row = 0;
  for (size_t b = 0; b < layout.blocks.size(); ++b) {
    double sum = 0;
    const size_t n = layout.blocks[b].files.size();
    for (size_t q = 0; q < n; ++q, ++row) {
      const std::vector<int64_t> positives = layout.positives(b, q);
      std::vector<int64_t> ranks;
      const int64_t* line = cpu.data_ptr<int64_t>() + row * k;
      for (int64_t r = 0; r < k; ++r)
        if (std::find(positives.begin(), positives.end(), line[r]) != positives.end())
          ranks.push_back(r);
      sum += average_precision(ranks, static_cast<int64_t>(positives.size()));
    }
    scores.block_map.push_back(sum / static_cast<double>(n));
    if (layout.blocks[b].name == "strong") scores.strong_map = scores.block_map.back();
    sum_all += sum;
  }
  scores.overall_map = sum_all / static_cast<double>(total);
  return scores;
}

torch::Tensor search_copies(torch::Tensor queries, torch::Tensor database,
                            const torch::Tensor& whitening, int64_t k) {
  if (whitening.defined()) {
    const PcaWhitening pca = PcaWhitening::learn(whitening);
    queries = pca.apply(queries);
    database = pca.apply(database);
  }
  namespace F = torch::nn::functional;
  const auto l2 = F::NormalizeFuncOptions().p(2).dim(1);
  queries = F::normalize(queries, l2);
  database = F::normalize(database, l2);
  return std::get<1>(torch::mm(queries, database.t()).topk(k, 1, true, true));
}

std::vector<std::string> list_image_files(const std::string& folder) {
  static const std::vector<std::string> extensions = {"jpg", "jpeg", "png",  "ppm", "bmp",
                                                      "pgm", "tif",  "tiff", "webp"};
  return sorted_files(folder, [](const std::string& f) {
    const size_t dot = f.rfind('.');
    const std::string ext = dot == std::string::npos ? f : f.substr(dot + 1);
    return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
  });
}

Json run_copy_detection(const CopyDetectionOptions& o, Communicator& comm, torch::Device device,
                        const ChecksPassed& checks_passed) {
  const auto start = std::chrono::steady_clock::now();
  models::check_arch(o.model.arch,
                     "copy detection (GeM over the patch tokens; eval_copy_detection.py takes "
                     "ViTs only)");
  const CopydaysLayout layout = CopydaysLayout::open(o.data_path);
  for (const std::string* p : {&o.whitening_path, &o.distractors_path}) {
    XDINO_CHECK_ARG(p->empty() || fs::is_directory(*p), "'", *p,
                    "' is not a folder (--whitening_path / --distractors_path: a folder of "
                    "images, or empty for none)");
  }
  const BackboneSpec& spec = o.model;
  const auto model = load_frozen_backbone(spec, o.input, device, "copy detection").model;
  const ImageInput& x = o.input;
  const fs::path dump = fs::path(o.output_dir) / "copy_detection_features";

  std::vector<std::string> query_paths;
  for (size_t b = 0; b < layout.blocks.size(); ++b) {
    const std::vector<std::string> p = layout.paths(b);
    query_paths.insert(query_paths.end(), p.begin(), p.end());
  }
  std::vector<std::pair<std::string, FeatureSet>> sets;
  sets.emplace_back(
      "queries", copy_detection_features(*model, query_paths, "Copydays queries", x, comm, device));
  sets.emplace_back("database", copy_detection_features(*model, layout.paths(0),
                                                        "Copydays originals", x, comm, device));
  std::vector<std::string> distractors, whitening;
  if (!o.distractors_path.empty()) {
    distractors = with_folder(o.distractors_path, list_image_files(o.distractors_path));
    log::info("Using ", distractors.size(), " distractors from ", o.distractors_path);
    sets.emplace_back("distractors",
                      copy_detection_features(*model, distractors, "distractors", x, comm, device));
  }
  if (!o.whitening_path.empty()) {
    whitening = with_folder(o.whitening_path, list_image_files(o.whitening_path));
    log::info("Extracting features of ", whitening.size(), " images from ", o.whitening_path,
              " for the whitening");
    sets.emplace_back("whitening", copy_detection_features(*model, whitening, "whitening images", x,
                                                           comm, device));
  }
  const double extraction_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Json j;
  notify(checks_passed);
  if (comm.is_main()) {
    fs::create_directories(dump);
    for (auto& [name, set] : sets) {
      set_model_attributes(set.attributes, spec, name);
      write_features(dump / (name + ".h5"), set);
    }
    const torch::Device search_on = o.use_cuda && device.is_cuda() ? device : torch::kCPU;
    torch::Tensor queries = sets[0].second.features.to(search_on);
    torch::Tensor database = sets[1].second.features.to(search_on);
    if (!distractors.empty())
      database = torch::cat({database, sets[2].second.features.to(search_on)});
    const torch::Tensor ids =
        search_copies(
            queries, database,
            whitening.empty() ? torch::Tensor() : sets.back().second.features.to(search_on),
            std::min<int64_t>(20, database.size(0)))
            .cpu();
    const CopyDetectionScores s = evaluate_copy_detection(layout, ids);
    Json blocks = Json::object();
    for (size_t b = 0; b < layout.blocks.size(); ++b) {
      char line[160];
      std::snprintf(line, sizeof line, "eval on %s mAP=%.3f", layout.blocks[b].name.c_str(),
                    s.block_map[b]);
      log::info(line);
      blocks[layout.blocks[b].name] = 100.0 * s.block_map[b];
    }
    log::info("Copy detection: strong mAP ", 100.0 * s.strong_map, ", all queries mAP ",
              100.0 * s.overall_map);
    j = Json::object();
    j["protocol"] = "copy detection (eval_copy_detection.py)";
    add_model_fields(j, spec, o.input.image_size);
    j["imsize"] = o.input.image_size;
    j["num_queries"] = queries.size(0);
    j["num_database"] = database.size(0);
    j["num_distractors"] = static_cast<int64_t>(distractors.size());
    j["num_whitening"] = static_cast<int64_t>(whitening.size());
    j["blocks"] = blocks;
    j["strong_mAP"] = 100.0 * s.strong_map;
    j["mAP"] = 100.0 * s.overall_map;
    j["seconds"] = Json{{"extraction", extraction_s}};
    write_file_atomically(fs::path(o.output_dir) / "copy_detection.json",
                          python_dumps(j, 2) + "\n");
    log::info("wrote ", (fs::path(o.output_dir) / "copy_detection.json").string());
  }
  comm.barrier();
  return j;
}

}  // namespace xdino::eval::retrieval
