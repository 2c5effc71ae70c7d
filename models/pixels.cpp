#include "models/pixels.h"

#include "core/check.h"

namespace xdino::models {

Pixels::Pixels(int64_t img_size, int64_t in_chans) : size_(img_size), in_chans_(in_chans) {
  XDINO_CHECK_ARG(img_size > 0, "pixels needs img_size > 0, got ", img_size);
  XDINO_CHECK_ARG(in_chans >= 1, "--in_chans must be at least 1, got ", in_chans);
}

Probe Pixels::probe(torch::Tensor images, const ProbeRequest& request) {
  XDINO_CHECK_ARG(request.blocks.empty() && !request.patch_tokens && !request.cls_attention_layer &&
                      !request.qk_block,
                  "the pixels baseline has no blocks, tokens or attention maps to show");
  XDINO_CHECK(images.dim() == 4 && images.size(1) == in_chans_, "pixels expects images (B, ",
              in_chans_, ", H, W), got ", images.sizes());
  namespace F = torch::nn::functional;
  Probe out;
  torch::Tensor x = images;
  const int64_t h = x.size(2), w = x.size(3);
  if (h != size_ || w != size_) {
    const bool shrink = h >= size_ && w >= size_;
    auto opts = F::InterpolateFuncOptions().size(std::vector<int64_t>{size_, size_});
    if (shrink)
      opts.mode(torch::kArea);
    else
      opts.mode(torch::kBilinear).align_corners(false);
    x = F::interpolate(x, opts);
  }
  out.feature = x.flatten(1);
  return out;
}

}  // namespace xdino::models
