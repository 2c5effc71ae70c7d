// The features of the retrieval-style evaluations (copy detection, image retrieval), from a
// list of image files through the frozen backbone, with the loader, extractor and HDF5 files
// of `dino features` (eval/extract.h, eval/features_io.h).
//
// Contract:
//  - Both read the images as `input` says (its image_size is the scripts' --imsize, its batch
//    size, workers; RGB, ImageNet's normalisation).
//  - copy_detection_features(): eval_copy_detection.py's extract_features. Each image resized
//    to imsize x imsize (Pillow bicubic), ToTensor, Normalize; the row is the final-normalised
//    CLS feature concatenated with GeM (p = 4) over the last layer's patch tokens clamped at
//    1e-6: (N, 2C). ViT: the tokens of get_intermediate_layers(n=1) (final-normed); XCiT and
//    X-ViT: the CLS feature after class attention and the last XCA block's patch tokens
//    (models/backbone.h patch_tokens).
//  - retrieval_features(): eval_image_retrieval.py's loader and eval_knn.extract_features.
//    Each image thumbnailed to imsize (augment/eval_transforms.h thumbnail), ToTensor,
//    Normalize, one image per batch (whatever input's batch size); the row is forward()'s CLS
//    feature, or with multiscale utils.multi_scale: the mean of the features at scales 1,
//    1/sqrt(2), 1/2 (LibTorch bilinear interpolate by scale factor, align_corners false), divided
//    by its L2 norm.
//  - Rows are in list order, float32 on the CPU, on rank 0 (undefined elsewhere). Every image
//    must be readable: one that is not is an error naming how many were not (a row missing
//    would shift every index of the ground truth).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "eval/features_io.h"
#include "eval/image_input.h"
#include "models/backbone.h"

namespace xdino::eval::retrieval {

FeatureSet copy_detection_features(models::Backbone& model, const std::vector<std::string>& paths,
                                   const std::string& what, const ImageInput& input,
                                   Communicator& comm, torch::Device device);

FeatureSet retrieval_features(models::Backbone& model, const std::vector<std::string>& paths,
                              const std::string& what, const ImageInput& input, bool multiscale,
                              Communicator& comm, torch::Device device);

// GeM of (B, N, C) tokens: (mean over N of clamp(x, 1e-6)^p)^(1/p), (B, C).
torch::Tensor gem(const torch::Tensor& tokens, double p = 4.0);

// utils.multi_scale for one batch: features at the three scales, averaged, divided by the L2
// norm of the whole (B, C) result (the official divides by v.norm(); batches hold one image).
// `rows` maps a (B, 3, H, W) batch to (B, C) features; the Backbone overload uses forward().
using FeatureFunction = std::function<torch::Tensor(const torch::Tensor&)>;
torch::Tensor multi_scale_feature(const FeatureFunction& rows, const torch::Tensor& images);
torch::Tensor multi_scale_feature(models::Backbone& model, const torch::Tensor& images);

}  // namespace xdino::eval::retrieval
