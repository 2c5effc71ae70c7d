// Pictures of augmented views, for checking an augmentation by eye (`dino preview`).
//
// Contract:
//  - views_grid(rows) draws one row per image, its views left to right in the order the
//    transform returned them, top-aligned, separated by `padding` pixels of background
//    (mid grey). Views are (3,H,W) float tensors normalised with mean/std (ToTensor +
//    Normalize); they are mapped back with x * std + mean, scaled by 255, rounded and clipped.
//    Returns an Image (CV_8UC3 RGB). Views of other shapes throw xdino::Error.
//  - preview_rows() runs `transform` on the given dataset indices with the Rng the loader
//    would use in `epoch` (sample_seed(seed, epoch, index)), so the picture shows exactly the
//    crops training sees.
//  - write_preview() is `dino preview`: opens the dataset, picks the images (the given
//    indices, else a class-balanced pick of num_images, see balanced_subset), runs the chosen
//    pipeline ("multicrop": MultiCropAugmentation with `multi_crop`; "eval": EvalTransform;
//    "linear": LinearTrainTransform) and writes the grid. Bad options throw UsageError.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "augment/data/dataset.h"
#include "augment/data/loader.h"
#include "augment/multicrop.h"
#include "augment/ops/tensor.h"

namespace xdino::augment {

Image views_grid(const std::vector<std::vector<torch::Tensor>>& rows,
                 const std::vector<double>& mean = kImageNetMean,
                 const std::vector<double>& std = kImageNetStd, int padding = 4);

std::vector<std::vector<torch::Tensor>> preview_rows(const Dataset& dataset,
                                                     const SampleTransform& transform,
                                                     const std::vector<int64_t>& indices,
                                                     int64_t seed, int64_t epoch);

struct PreviewOptions {
  std::string data_path;
  std::string split = "train";
  std::string output = "preview.png";
  int64_t num_images = 4;
  std::vector<int64_t> indices;  // dataset indices; empty: a class-balanced pick
  int64_t seed = 0;
  int64_t epoch = 0;
  std::string transform = "multicrop";  // multicrop, eval or linear
  MultiCropOptions multi_crop;
};

// Returns the dataset indices drawn, one row each.
std::vector<int64_t> write_preview(const PreviewOptions& options);

}  // namespace xdino::augment
