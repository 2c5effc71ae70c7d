// The interface every backbone implements (XCiT family, DINO ViT, pixels baseline).
//
// Contract:
//  - Input images are float tensors (B, 3, H, W), ImageNet-normalised, any H and W the
//    architecture accepts (XCiT: any size, rounded up per stage; ViT: position embeddings are
//    interpolated). Outputs are float tensors on the input's device.
//  - forward(x): (B, C) final-normalised CLS feature when num_classes == 0, else (B, classes).
//    Train mode enables drop path; the official "(y, y) tuple in train mode" is not reproduced
//    because DINO's wrapper takes element 0 anyway.
//  - linear_features(x, n_last_blocks, avgpool): the feature eval_linear.py feeds to the linear
//    layer for this architecture (XCiT: forward(x); ViT: concatenated normalised CLS tokens of
//    the last n blocks, plus the averaged patch tokens when avgpool).
//  - cls_attention(x, layer): (B, heads, N+1) attention of the CLS query over [CLS, patches],
//    rows summing to 1. XCiT: class-attention layer `layer` (negative counts from the end);
//    ViT: CLS row of block `layer`'s self-attention. Throws xdino::Error where undefined.
//  - qk_norms(x, block): per-patch |q|, |k| (raw and after XCA's token-axis L2 normalisation),
//    each (B, heads, N), for XCA block `block`. XCiT only.
//  - Parameter names equal the official state_dict keys, so checkpoints map 1:1.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>

namespace xdino::models {

struct QKNorms {
  torch::Tensor q_raw, k_raw;  // ||q_n||, ||k_n|| per head before normalisation, (B, h, N)
  torch::Tensor q_hat, k_hat;  // the same after L2 normalisation over tokens, (B, h, N)
};

class Backbone : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
  virtual torch::Tensor linear_features(torch::Tensor images, int64_t n_last_blocks,
                                        bool avgpool_patchtokens) {
    return forward(std::move(images));
  }
  virtual torch::Tensor cls_attention(torch::Tensor images, int64_t layer);
  virtual QKNorms qk_norms(torch::Tensor images, int64_t block);

  virtual const std::string& arch() const = 0;
  virtual int64_t embed_dim() const = 0;  // C, the width of forward()'s feature
  virtual int64_t patch_size() const = 0;
  virtual int64_t num_heads() const = 0;
  // Token grid (rows, cols) for an H x W input.
  virtual std::pair<int64_t, int64_t> token_grid(int64_t height, int64_t width) const = 0;
  // Forward FLOPs for one H x W image, fvcore convention (one multiply-add = 1 FLOP; spec
  // eval.md section 6).
  virtual double flops(int64_t height, int64_t width) const = 0;
};

}  // namespace xdino::models
