// `pixels`: the trivial backbone for sanity baselines (k-NN on raw pixels).
//
// Contract: forward(x) resizes the (B, in_chans, H, W) input to img_size x img_size (area
// averaging when shrinking, bilinear with align_corners=false when enlarging, no-op at that
// size) and flattens it to (B, in_chans * img_size^2), channel-major (c, row, col). No
// parameters (input_conv_weight() is ""), 0 FLOPs.
// Block outputs, patch tokens and attention maps do not exist (UsageError).
#pragma once

#include "models/backbone.h"

namespace xdino::models {

class Pixels : public Backbone {
 public:
  explicit Pixels(int64_t img_size, int64_t in_chans = 3);

  Probe probe(torch::Tensor images, const ProbeRequest& request) override;

  const std::string& arch() const override { return name_; }
  int64_t embed_dim() const override { return in_chans_ * size_ * size_; }
  int64_t patch_size() const override { return 1; }
  int64_t in_chans() const override { return in_chans_; }
  int64_t num_heads() const override { return 0; }
  int64_t num_blocks() const override { return 0; }
  std::pair<int64_t, int64_t> token_grid(int64_t, int64_t) const override { return {size_, size_}; }
  double flops(int64_t, int64_t) const override { return 0.0; }

 private:
  std::string name_ = "pixels";
  int64_t size_;
  int64_t in_chans_;
};

}  // namespace xdino::models
