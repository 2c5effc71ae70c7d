#include "eval/video/label_propagation.h"

#include <cmath>

#include "core/check.h"

namespace xdino::eval::video {

torch::Tensor neighbourhood_mask(int64_t h, int64_t w, int64_t radius) {
  const torch::Tensor idx = torch::arange(h * w, torch::kInt64);
  const torch::Tensor row = idx.div(w, "floor"), col = idx.remainder(w);
  const torch::Tensor near_rows = (row.unsqueeze(1) - row.unsqueeze(0)).abs() <= radius;
  const torch::Tensor near_cols = (col.unsqueeze(1) - col.unsqueeze(0)).abs() <= radius;
  return (near_rows & near_cols).to(torch::kFloat32);
}

torch::Tensor propagate(const torch::Tensor& target, const torch::Tensor& sources,
                        const torch::Tensor& source_segs, const torch::Tensor& mask, int64_t topk) {
  XDINO_CHECK(target.dim() == 2 && sources.dim() == 3 && source_segs.dim() == 4,
              "propagate expects (hw, C), (n, C, hw), (n, K, h, w), got ", target.sizes(), ", ",
              sources.sizes(), ", ", source_segs.sizes());
  const int64_t n = sources.size(0), hw = target.size(0);
  const int64_t k_classes = source_segs.size(1), h = source_segs.size(2), w = source_segs.size(3);
  XDINO_CHECK(sources.size(2) == hw && h * w == hw && source_segs.size(0) == n,
              "propagate: feature grids and masks disagree");
  namespace F = torch::nn::functional;
  const torch::Tensor t = F::normalize(target, F::NormalizeFuncOptions().dim(1));
  const torch::Tensor s = F::normalize(sources, F::NormalizeFuncOptions().dim(1));
  // (n, hw target, hw source): the same target rows against each context frame.
  torch::Tensor aff = torch::exp(torch::matmul(t.unsqueeze(0), s) / 0.1);
  if (mask.defined()) aff = aff * mask.unsqueeze(0);
  aff = aff.transpose(2, 1).reshape({n * hw, hw});  // (context x source patch, target patch)
  const torch::Tensor kth = std::get<0>(aff.topk(std::min(topk, n * hw), 0)).amin(0);
  aff = aff.masked_fill(aff < kth, 0);
  aff = aff / aff.sum(0, /*keepdim=*/true);
  const torch::Tensor segs =
      source_segs.reshape({n, k_classes, hw}).transpose(2, 1).reshape({-1, k_classes}).t();
  return torch::mm(segs, aff).reshape({1, k_classes, h, w});
}

torch::Tensor norm_mask(torch::Tensor mask) {
  for (int64_t c = 0; c < mask.size(0); ++c) {
    torch::Tensor m = mask[c];
    if (m.max().item<float>() > 0) {
      m = m - m.min();
      mask[c] = m / m.max();
    }
  }
  return mask;
}

std::pair<int, int> frame_size(int height, int width, int scale) {
  if (height > width) {
    const double th = static_cast<double>(scale) * height / width;
    return {static_cast<int>(std::floor(th / 64) * 64), scale};
  }
  const double tw = static_cast<double>(scale) * width / height;
  return {scale, static_cast<int>(std::floor(tw / 64) * 64)};
}

std::pair<int, int> mask_size(int height, int width, int scale) {
  // read_seg decides landscape by width > height, read_frame by height > width: the same for
  // every frame that is not square; a square one would get a transposed mask grid.
  return frame_size(height, width, scale);
}

}  // namespace xdino::eval::video
