// Turning attention-like maps into pictures and files people can open.
//
// Contract (maps are float tensors on the CPU; images are 8-bit RGB cv::Mat, CV_8UC3):
//  - attention_mask(attn (h, N), threshold): per head, the patches with the highest weights
//    whose share of the head's total mass reaches `threshold` (DINO's visualize_attention.py:
//    sort ascending, normalise by the sum, keep entries whose cumulative sum exceeds
//    1 - threshold). Returns (h, N) float of 0/1.
//  - upsample_nearest(maps (h, Hf, Wf), factor) -> (h, Hf*factor, Wf*factor).
//  - colorize(map (H, W), colormap): per-map min/max scaling to [0, 1] (matplotlib imsave's
//    default), then the 256-entry colormap; a constant map becomes the colormap's first entry.
//  - overlay_mask(image, mask (H, W), colour): image*(1 - 0.5 m) + 0.5 m * colour, plus the
//    mask's contours in the same colour, as DINO's display_instances draws them.
//  - make_grid: rows of equally tall tiles with a label column on the left, for overviews.
//  - write_npy writes atomically (temp + rename) and stores tensors as .npy v1.0 (numpy.load
//    and most plotting tools read it). Errors throw xdino::Error naming the path. Images are
//    written with augment/data/encode.h.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "augment/data/encode.h"

namespace xdino::eval {

using augment::write_png;

enum class Colormap { kViridis, kInferno };

torch::Tensor attention_mask(const torch::Tensor& attn, double threshold);
torch::Tensor upsample_nearest(const torch::Tensor& maps, int64_t factor);
cv::Mat colorize(const torch::Tensor& map, Colormap colormap = Colormap::kViridis);
cv::Mat overlay_mask(const cv::Mat& image, const torch::Tensor& mask,
                     const cv::Scalar& colour_rgb = cv::Scalar(255, 0, 0));
// A normalised image tensor (3, H, W) shown as DINO's img.png: min-max scaled over the image.
cv::Mat tensor_to_image(const torch::Tensor& chw);

struct GridRow {
  std::string label;
  std::vector<cv::Mat> tiles;         // RGB, any sizes: scaled to the grid's tile height
  std::vector<std::string> captions;  // optional, one per tile
};
// `title` (optional) is printed above the rows.
cv::Mat make_grid(const std::vector<GridRow>& rows, int tile_height = 128,
                  const std::string& title = "");

void write_npy(const std::filesystem::path& path, const torch::Tensor& tensor);

}  // namespace xdino::eval
