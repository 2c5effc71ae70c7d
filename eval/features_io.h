// Feature files: one HDF5 file per split, readable by h5py.
//
// Contract:
//  - Layout (HDF5 C API, file version 1.8-compatible):
//      /features  float32 [N, C]   one row per image, in dataset order
//      /labels    int64   [N]      class index (sorted class-folder rank), -1 when unlabeled
//      /paths     variable-length UTF-8 strings [N]  the image paths (may be empty strings)
//    plus root attributes: arch, checkpoint, checkpoint_key, split, feature (strings),
//    image_size, patch_size (int64), normalized (int64 0/1: rows are L2-normalised).
//  - write_features() writes through write_atomically(): a reader never sees a torn file. A
//    write that fails for want of space (ENOSPC, EDQUOT, EFBIG from a file-size limit, EIO)
//    throws xdino::Error "cannot write '<path>': <reason> (the previous file is left as it
//    was)" and leaves `path` as it was and no temporary file behind.
//    features must be a 2-D float32 tensor (any device; copied to the CPU), labels a 1-D
//    tensor of N integers, paths empty or N strings; violations throw xdino::Error.
//  - read_features() accepts any numeric HDF5 types for features and labels (converted to
//    float32 / int64), missing /paths (filled with empty strings) and missing attributes
//    (defaults below). A missing file or dataset, or inconsistent N, throws xdino::Error with
//    one line naming the file and the dataset.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

namespace xdino::eval {

struct FeatureAttributes {
  std::string arch;                  // backbone name, e.g. "xcit_small_12_p16"
  std::string checkpoint;            // --pretrained_weights ("" = random weights)
  std::string checkpoint_key;        // e.g. "teacher"
  std::string split;                 // "train" or "val"
  std::string feature = "backbone";  // what a row is: "backbone" or "linear n=4 avgpool=false"
  int64_t image_size = 224;          // evaluation crop side
  int64_t patch_size = 16;
  bool normalized = true;  // rows L2-normalised (k-NN features)
};

struct FeatureSet {
  torch::Tensor features;          // float32 [N, C], CPU
  torch::Tensor labels;            // int64 [N], CPU
  std::vector<std::string> paths;  // N entries
  FeatureAttributes attributes;
};

void write_features(const std::filesystem::path& path, const FeatureSet& set);

FeatureSet read_features(const std::filesystem::path& path);

}  // namespace xdino::eval
