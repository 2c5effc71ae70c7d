// ToTensor + Normalize: uint8 HWC RGB -> float32 CHW, (v / 255 - mean_c) / std_c.
//
// Contract:
//  - Values equal torchvision's bit for bit: the division by 255, the subtraction and the
//    division by std are float32 operations, as in ToTensor().div(255) then sub_/div_.
//  - The float* overload writes 3*H*W floats (plane R, then G, then B) to dst, which the caller
//    owns; the tensor overload writes into an existing float32 contiguous (3, H, W) CPU tensor,
//    e.g. one slot batch[i] of a (B, 3, H, W) batch, and throws xdino::Error on another shape,
//    dtype or layout.
//  - std must be non-zero (UsageError). Thread-safe; allocates nothing but the returned tensor.
#pragma once

#include <torch/torch.h>

#include <array>

#include "augment/ops/image.h"

namespace xdino::augment {

struct Normalization {
  std::array<double, 3> mean{0.485, 0.456, 0.406};  // ImageNet
  std::array<double, 3> std{0.229, 0.224, 0.225};
};

// Per-channel lookup tables of the 256 normalised values.
class Normalizer {
 public:
  explicit Normalizer(const Normalization& n = {});
  void operator()(const Image& image, float* dst) const;
  void operator()(const Image& image, const torch::Tensor& dst) const;
  torch::Tensor operator()(const Image& image) const;

 private:
  std::array<std::array<float, 256>, 3> lut_;
};

}  // namespace xdino::augment
