// A tiny XCiT-shaped backbone for DINO tests: the parameter kinds that matter for DINO
// (conv + BatchNorm patch embedding, cls_token, per-head temperature, LayerNorms, gammas,
// Linear weights and biases) under XCiT-like names, drop path on the RNG, any input size.
//
// forward(x (B,3,H,W)) -> (B, dim): conv(stride p) -> BN -> tokens; one residual "block"
// x + drop_path(gamma1 * proj(GELU(fc1(norm1(x)))) * mean(temperature)); CLS = cls_token +
// mean of tokens; final LayerNorm. (GELU sits between two Linear layers, as in XCiT's MLP:
// LibTorch 1.13's CPU gelu_backward reads garbage when its incoming gradient has the
// transposed-and-expanded layout that "GELU -> transpose -> mean" produces.)
#pragma once

#include <torch/torch.h>

#include "models/backbone.h"
#include "ssl/head.h"

namespace xdino::testing {

class TinyBackbone : public models::Backbone {
 public:
  explicit TinyBackbone(int64_t dim = 8, int64_t patch = 4, double drop_path_rate = 0.0)
      : dim_(dim), patch_(patch), drop_path_(drop_path_rate) {
    conv_ = register_module(
        "patch_embed",
        torch::nn::Sequential(
            torch::nn::Conv2d(torch::nn::Conv2dOptions(3, dim, patch).stride(patch).bias(false)),
            torch::nn::BatchNorm2d(dim)));
    cls_token = register_parameter("cls_token", torch::randn({1, 1, dim}) * 0.02);
    auto block = std::make_shared<torch::nn::Module>();
    norm1_ =
        block->register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    auto attn = std::make_shared<torch::nn::Module>();
    temperature = attn->register_parameter("temperature", torch::ones({2, 1, 1}));
    proj_ = attn->register_module("proj", torch::nn::Linear(dim, dim));
    block->register_module("attn", attn);
    auto mlp = std::make_shared<torch::nn::Module>();
    fc1_ = mlp->register_module("fc1", torch::nn::Linear(dim, dim));
    block->register_module("mlp", mlp);
    gamma1 = block->register_parameter("gamma1", torch::ones({dim}));
    auto blocks = std::make_shared<torch::nn::Module>();
    blocks->register_module("0", block);
    register_module("blocks", blocks);
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
  }

  models::Probe probe(torch::Tensor images, const models::ProbeRequest&) override {
    models::Probe p;
    p.feature = features(std::move(images));
    return p;
  }

  torch::Tensor features(torch::Tensor images) {
    auto x = conv_->forward(images).flatten(2).transpose(1, 2);  // (B, N, C)
    // LayerNorm in fp32, as CUDA autocast runs it (1.13's CPU layer_norm rejects bf16 input
    // with fp32 weights).
    auto y = gamma1 *
             proj_->forward(torch::gelu(fc1_->forward(norm1_->forward(x.to(torch::kFloat))))) *
             temperature.mean();
    if (is_training() && drop_path_ > 0) {
      const double keep = 1.0 - drop_path_;
      const auto mask = (torch::rand({x.size(0), 1, 1}, x.options()) < keep).to(x.dtype());
      y = y / keep * mask;
    }
    x = x + y;
    const auto cls = cls_token.squeeze(0) + x.mean(1);
    return norm_->forward(cls.to(torch::kFloat));
  }

  const std::string& arch() const override { return arch_; }
  int64_t embed_dim() const override { return dim_; }
  int64_t patch_size() const override { return patch_; }
  int64_t num_heads() const override { return 2; }
  int64_t num_blocks() const override { return 1; }
  std::pair<int64_t, int64_t> token_grid(int64_t h, int64_t w) const override {
    return {h / patch_, w / patch_};
  }
  double flops(int64_t, int64_t) const override { return 0.0; }

  torch::Tensor cls_token, temperature, gamma1;

 private:
  int64_t dim_, patch_;
  double drop_path_;
  std::string arch_ = "tiny_test";
  torch::nn::Sequential conv_{nullptr};
  torch::nn::LayerNorm norm1_{nullptr}, norm_{nullptr};
  torch::nn::Linear proj_{nullptr}, fc1_{nullptr};
};

// TinyBackbone + a narrow DINO head (in 8, hidden 12, bottleneck 4, out_dim outputs).
inline ssl::MultiCropWrapper tiny_wrapper(bool norm_last_layer, int64_t out_dim = 10) {
  ssl::DINOHeadOptions o;
  o.in_dim = 8;
  o.out_dim = out_dim;
  o.hidden_dim = 12;
  o.bottleneck_dim = 4;
  o.norm_last_layer = norm_last_layer;
  return ssl::MultiCropWrapper(std::make_shared<TinyBackbone>(), ssl::DINOHead(o));
}

}  // namespace xdino::testing
