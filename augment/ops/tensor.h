// ToTensor + Normalize: uint8 HWC RGB -> float32 CHW, (v / 255 - mean_c) / std_c, with 3
// channels (RGB) or 1 (grayscale: what torchvision gives on images opened with convert("L"));
// and float images of any channel count (augment/ops/float_image.h) -> (v - mean_c) / std_c.
//
// Contract:
//  - Normalization::channels is the one switch of the whole data pipeline between RGB and
//    grayscale (--in_chans 1): every transform (augment/multicrop.h, augment/eval_transforms.h)
//    takes its input through Normalizer::input() and writes Normalizer::channels() planes.
//    With 1 channel, input() is the image converted RGB -> L -> RGB (PIL's L weights,
//    augment/ops/color.h) and the Normalizer writes channel 0 alone with mean[0] and std[0].
//    Why that equals torchvision's pipeline on the L image: on an image whose three channels
//    are equal, every op DINO uses (bicubic/bilinear resize, flip, brightness, contrast, Pillow's
//    L of a gray pixel is itself, saturation and hue, which leave gray unchanged, grayscale,
//    blur, solarize) works per channel or keeps the channels equal, giving three copies of
//    what it gives on the L image (tests/augment/test_in_chans_augment.cpp).
//  - default_normalization(1): one mean and one std, the averages of ImageNet's three
//    (0.449, 0.226). timm has no single-channel default (its resolve_data_config repeats a
//    one-value --mean over in_chans and otherwise keeps ImageNet's three), and the average
//    keeps a gray pixel's normalised value near what each RGB channel of it gets.
//  - Values equal torchvision's bit for bit: the division by 255, the subtraction and the
//    division by std are float32 operations, as in ToTensor().div(255) then sub_/div_.
//  - The float* overload writes C*H*W floats (C = channels: plane R, then G, then B; or the
//    one gray plane) to dst, which the caller owns; the tensor overload writes into an existing
//    float32 contiguous (C, H, W) CPU tensor, e.g. one slot batch[i] of a (B, C, H, W) batch,
//    and throws xdino::Error on another shape, dtype or layout.
//  - A float image's channels are converted by input() (float_image.h, convert_channels);
//    operator() takes exactly `channels`. Its values are normalised as torchvision's Normalize does
//    on a float tensor: float32 subtraction, then division.
//  - mean and std hold `channels` values; std must be non-zero (UsageError). With channels
//    other than 1 or 3, only float images can be normalised (8-bit images are RGB).
//    Thread-safe; allocates nothing but the returned tensor and input()'s scratch.
#pragma once

#include <torch/torch.h>

#include <array>
#include <vector>

#include "augment/ops/image.h"

namespace xdino::augment {

// ImageNet's per-channel statistics as torchvision gives them: the one place they are written.
inline const std::vector<double> kImageNetMean{0.485, 0.456, 0.406};
inline const std::vector<double> kImageNetStd{0.229, 0.224, 0.225};

struct Normalization {
  std::vector<double> mean = kImageNetMean;
  std::vector<double> std = kImageNetStd;
  int64_t channels = 3;  // 3: RGB; 1: grayscale; others: float images only
};

// The normalisation of --in_chans `channels`: ImageNet's for 3, (0.449, 0.226) for 1. Any
// other count has no default: one UsageError line asking for --mean and --std.
Normalization default_normalization(int64_t channels);

// --mean / --std (timm's flags) for `channels` channels: each empty (the default above), one
// value (repeated, as timm does) or `channels` values; anything else is a UsageError line.
Normalization normalization_for(int64_t channels, const std::vector<double>& mean,
                                const std::vector<double>& std);

// Per-channel lookup tables of the 256 normalised values.
class Normalizer {
 public:
  explicit Normalizer(const Normalization& n = {});
  int64_t channels() const { return channels_; }
  // Throws xdino::Error naming `what` unless the transforms can take `image`: non-empty, and
  // RGB uint8 (channels 1 or 3) or a continuous float image.
  void check_input(const Image& image, const char* what) const;
  // The image the transforms read: `image` for 3 channels; for 1, its RGB -> L -> RGB copy
  // in `scratch`; a float image with its channels converted to channels() (in `scratch`).
  const Image& input(const Image& image, Image& scratch) const;
  void operator()(const Image& image, float* dst) const;
  void operator()(const Image& image, const torch::Tensor& dst) const;
  torch::Tensor operator()(const Image& image) const;

 private:
  std::array<std::array<float, 256>, 3> lut_{};
  std::vector<float> mean_, std_;  // of float images
  int64_t channels_;
};

}  // namespace xdino::augment
