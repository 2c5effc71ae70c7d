// Label propagation of eval_video_segmentation.py (after Jabri et al.'s space-time walk, as in
// UVC): the first frame's mask carried to each next frame through patch-feature affinities.
//
// Contract:
//  - neighbourhood_mask(h, w, r): (h*w, h*w) float, 1 where the two patches' rows and columns
//    both differ by at most r (restrict_neighborhood), built by broadcasting (no loop over
//    pairs).
//  - propagate(target, sources, source_segs, mask, topk): target (h*w, C) features of the new
//    frame; sources (n, C, h*w) features of the context frames; source_segs (n, K, h, w)
//    their soft masks. Both feature sets L2-normalised over C; affinity exp(cos / 0.1) per
//    (context, source patch, target patch), times `mask` when defined; per target patch only
//    the values >= its topk-th largest over all contexts' patches are kept (ties keep more,
//    as the script's `aff < min(topk)` rule), columns normalised to sum 1; the result is
//    (1, K, h, w) = segs (K, n*h*w) x affinity. Float32, on the inputs' device.
//  - norm_mask(mask): per channel whose max is > 0: (x - min) / max(x - min) (NaN for a
//    constant positive channel, as the script).
//  - frame_size(height, width): read_frame's resize target: the shorter side 480, the longer
//    one 480 x long / short floored to a multiple of 64 (portrait: width 480).
//  - mask_size(height, width): read_seg's, which is frame_size for every frame that is not
//    square. For a square frame the script's read_seg (landscape when width > height) and
//    read_frame (portrait when height > width) disagree, so its masks lie transposed on the
//    feature grid; ours follow frame_size (docs/evaluation.md).
#pragma once

#include <torch/torch.h>

#include <utility>

namespace xdino::eval::video {

torch::Tensor neighbourhood_mask(int64_t h, int64_t w, int64_t radius);

torch::Tensor propagate(const torch::Tensor& target, const torch::Tensor& sources,
                        const torch::Tensor& source_segs, const torch::Tensor& mask, int64_t topk);

torch::Tensor norm_mask(torch::Tensor mask);

// (height, width)
std::pair<int, int> frame_size(int height, int width, int scale = 480);
std::pair<int, int> mask_size(int height, int width, int scale = 480);

}  // namespace xdino::eval::video
