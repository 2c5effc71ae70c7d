#include "augment/data/open_dataset.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>

#include "augment/data/h5_dataset.h"
#include "augment/data/idx_dataset.h"
#include "augment/data/image_folder.h"
#include "core/check.h"
#include "core/log.h"

namespace xdino::augment {
namespace fs = std::filesystem;

namespace {

// ROOT/split.h5, or every shard ROOT/split-IIIII-of-NNNNN.h5 (all N of them must be there).
std::vector<fs::path> find_h5_shards(const fs::path& root, const std::string& split) {
  if (fs::is_regular_file(root / (split + ".h5"))) return {root / (split + ".h5")};
  const std::regex pattern(split + R"(-(\d{5})-of-(\d{5})\.h5)");
  std::map<int64_t, fs::path> found;
  int64_t count = -1;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, pattern)) continue;
    const int64_t n = std::stoll(m[2].str());
    XDINO_CHECK_ARG(count < 0 || count == n, "HDF5 shards of '", split, "' in ", root,
                    " disagree on their count (", count, " and ", n, ")");
    count = n;
    found[std::stoll(m[1].str())] = e.path();
  }
  std::vector<fs::path> shards;
  for (int64_t i = 0; i < std::max<int64_t>(count, 0); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "-%05lld-of-%05lld.h5", static_cast<long long>(i),
                  static_cast<long long>(count));
    XDINO_CHECK_ARG(found.count(i), "HDF5 shard ", root / (split + name),
                    " is missing (was packing interrupted?)");
    shards.push_back(found[i]);
  }
  return shards;
}

DatasetPtr open_folder(const fs::path& dir, const DatasetOptions& o) {
  return std::make_shared<ImageFolderDataset>(dir.string(), detect_folder_layout(dir), o.decode);
}

DatasetPtr detect(const fs::path& root, const std::string& split, const DatasetOptions& o) {
  if (fs::is_regular_file(root)) {
    XDINO_CHECK_ARG(root.extension() == ".h5", "data path ", root,
                    " is a file but not an HDF5 (.h5) pack; give a folder or a .h5 file");
    XDINO_CHECK_ARG(split == "train", "data path ", root,
                    " is a single HDF5 file, which serves as the training set only; give the "
                    "folder holding ",
                    split, ".h5");
    return std::make_shared<H5Dataset>(std::vector<fs::path>{root}, o.decode);
  }
  if (fs::is_directory(root / split)) return open_folder(root / split, o);
  std::vector<fs::path> shards = find_h5_shards(root, split);
  if (!shards.empty()) return std::make_shared<H5Dataset>(shards, o.decode);
  const std::string idx_prefix = split == "train" ? "train" : "t10k";
  if (std::optional<IdxFiles> idx = find_idx_files(root, idx_prefix))
    return std::make_shared<IdxDataset>(*idx);
  XDINO_CHECK_ARG(split == "train", "no ", split, " split in ", root, ": expected ", split,
                  "/ (ImageFolder), ", split, ".h5 (HDF5) or t10k-images-idx3-ubyte[.gz] (IDX)");
  return open_folder(root, o);  // main_dino.py: --data_path names the training folder itself
}

}  // namespace

DatasetPtr open_dataset(const std::string& root, const std::string& split,
                        const DatasetOptions& options) {
  XDINO_CHECK_ARG(split == "train" || split == "val", "split must be train or val, not '", split,
                  "'");
  XDINO_CHECK_ARG(options.max_samples >= 0, "max_samples must be >= 0, got ", options.max_samples);
  XDINO_CHECK_ARG(fs::exists(root), "data path ", root, " does not exist");
  DatasetPtr dataset = detect(fs::path(root), split, options);
  if (options.max_samples > 0 && options.max_samples < dataset->size()) {
    log::info("data (", split, "): ", dataset->describe(), "; keeping a class-balanced subset of ",
              options.max_samples);
    return std::make_shared<SubsetDataset>(dataset, balanced_subset(*dataset, options.max_samples));
  }
  log::info("data (", split, "): ", dataset->describe());
  return dataset;
}

std::string dataset_layouts() {
  return "ROOT/<split>/ (ImageFolder), ROOT/<split>.h5 or its shards <split>-NNNNN-of-NNNNN.h5 "
         "(HDF5), {train,t10k}-images-idx3-ubyte[.gz] (IDX); for training also a .h5 file or "
         "ROOT itself (ImageFolder or a flat folder of images)";
}

}  // namespace xdino::augment
