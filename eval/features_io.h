// Feature files: one HDF5 file per split, readable by h5py.
//
// Contract:
//  - Layout (HDF5 C API, file version 1.8-compatible):
//      /features  float32 [N, C]   one row per image, in dataset order
//      /labels    int64   [N]      class index (sorted class-folder rank), -1 when unlabeled
//      /paths     variable-length UTF-8 strings [N]  the image paths (may be empty strings)
//    plus root attributes: arch, checkpoint, checkpoint_key, split, feature (strings),
//    image_size, patch_size (int64), normalized (int64 0/1: rows are L2-normalised).
//    With `dino features --patch_tokens` also
//      /patch_tokens  float32 [N, T, D]  row i: image i's patch tokens leaving the last block
//                                        (models/backbone.h, patch_tokens), one row per chunk
//  - write_features() writes through write_atomically(): a reader never sees a torn file. A
//    write that fails for want of space (ENOSPC, EDQUOT, EFBIG from a file-size limit, EIO)
//    throws xdino::Error "cannot write '<path>': <reason> (the previous file is left as it
//    was)" and leaves `path` as it was and no temporary file behind.
//    features must be a 2-D float32 tensor (any device; copied to the CPU), labels a 1-D
//    tensor of N integers, paths empty or N strings; violations throw xdino::Error.
//  - write_features_with_patch_tokens(path, images, extract) streams the patch tokens to disk while
//    they are extracted (ImageNet's 50000 validation images at ViT-S/16 make 15 GB, more than
//    memory holds): it creates the temporary file, calls extract(sink), where
//    sink(tokens [B, T, D] float32, index [B] int64) stores each image's tokens at its dataset
//    index (in [0, images)), then keeps the rows of the returned set's `indices` (images that could
//    not be read have none, so /patch_tokens row i is /features row i), writes the rest as
//    write_features does, and renames. Same failure behaviour. read_patch_tokens(path) reads
//    /patch_tokens whole; a file without it throws xdino::Error naming the file and the flag.
//  - read_features() accepts any numeric HDF5 types for features and labels (converted to
//    float32 / int64), missing /paths (filled with empty strings) and missing attributes
//    (defaults below). A missing file or dataset, or inconsistent N, throws xdino::Error with
//    one line naming the file and the dataset.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <functional>
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
  torch::Tensor indices;           // int64 [N], CPU: each row's dataset index (not stored)
  std::vector<std::string> paths;  // N entries
  FeatureAttributes attributes;
};

void write_features(const std::filesystem::path& path, const FeatureSet& set);

FeatureSet read_features(const std::filesystem::path& path);

using PatchTokenSink =
    std::function<void(const torch::Tensor& tokens, const torch::Tensor& dataset_index)>;
void write_features_with_patch_tokens(
    const std::filesystem::path& path, int64_t images,
    const std::function<FeatureSet(const PatchTokenSink& sink)>& extract);

torch::Tensor read_patch_tokens(const std::filesystem::path& path);

// Whether `path` is a feature file of this layout (an HDF5 file with /features): what
// `dino features` may replace. Never throws; false for anything else or unreadable.
bool is_features_file(const std::filesystem::path& path);

}  // namespace xdino::eval
