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
//  - write_png() encodes an Image (RGB) as PNG and writes it atomically.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "augment/dataset.h"
#include "augment/loader.h"

namespace xdino::augment {

inline const std::vector<double> kImageNetMean = {0.485, 0.456, 0.406};
inline const std::vector<double> kImageNetStd = {0.229, 0.224, 0.225};

Image views_grid(const std::vector<std::vector<torch::Tensor>>& rows,
                 const std::vector<double>& mean = kImageNetMean,
                 const std::vector<double>& std = kImageNetStd, int padding = 4);

std::vector<std::vector<torch::Tensor>> preview_rows(const Dataset& dataset,
                                                     const SampleTransform& transform,
                                                     const std::vector<int64_t>& indices,
                                                     int64_t seed, int64_t epoch);

void write_png(const std::string& path, const Image& rgb);

}  // namespace xdino::augment
