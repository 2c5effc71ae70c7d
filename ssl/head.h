// The DINO projection head and the multi-crop wrapper (docs/dino.md, "Networks").
//
// Contract:
//  - DINOHead(in_dim, out_dim): x (N, in_dim) -> mlp -> row-wise L2 normalisation (eps 1e-12)
//    -> weight-normalised Linear(bottleneck, out_dim, no bias) -> (N, out_dim) logits; with
//    g = 1 they are cosines in [-1, 1]. Parameter names are the official ones:
//    mlp.{0,2,4}.{weight,bias} (use_bn: mlp.{0,3,6} Linear, mlp.{1,4} BatchNorm1d),
//    last_layer.weight_g [out_dim, 1], last_layer.weight_v [out_dim, bottleneck].
//  - Init: mlp Linear weights truncated normal (std 0.02, cut at +-2), biases 0; weight_v keeps
//    PyTorch's default Linear init (it is created after the init pass); weight_g = 1 and, with
//    norm_last_layer, requires_grad = false (the optimiser never sees it).
//  - MultiCropWrapper(backbone, head): forward(crops) groups consecutive crops of equal width,
//    runs the backbone once per group on the batch-concatenated crops (crop-major rows), then
//    the head once on all features: (n_crops * B, out_dim), rows in crop order. Submodules are
//    registered as `backbone` and `head`, so state-dict keys are `backbone.*` / `head.*`.
//  - With DINOv2's additions (ssl/recipe.h), forward_pass(crops, pass) runs the two global
//    crops (crops[0], crops[1], one backbone call) and then the others as forward() does, and
//    returns forward()'s logits in the same row order, and as the pass asks: the global crops'
//    CLS features (2B, C), before the head (KoLeo); and, given pass.masks (2B, N) bool over
//    the global rows with pass.mask_indices (n,) = the set entries of masks.flatten(), the
//    head's logits of the final-normed patch tokens at those patches (n, K), from ibot_head
//    when there is one, else from head (iBOT). pass.mask_input replaces the masked patches by
//    the backbone's mask token first (the student; the teacher reads them unmasked).
//    ibot_head, when given, is registered as `ibot_head` (keys ibot_head.*).
//  - Shapes that do not fit throw c10::Error from LibTorch; an empty crop list throws
//    xdino::Error; forward_pass with fewer than 2 crops, or 2 global crops of unequal sizes,
//    throws xdino::Error.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "models/backbone.h"

namespace xdino::ssl {

// main_dino.py's --out_dim: the head's output, and so the loss's and the center's width.
constexpr int64_t kDefaultOutDim = 65536;

struct DINOHeadOptions {
  int64_t in_dim = 384;
  int64_t out_dim = kDefaultOutDim;
  bool use_bn = false;
  bool norm_last_layer = true;
  int64_t nlayers = 3;
  int64_t hidden_dim = 2048;
  int64_t bottleneck_dim = 256;
};

// nn.utils.weight_norm(Linear(in, out, bias=False)) with the pre-2.1 parameter names:
// W[r,:] = weight_g[r] * weight_v[r,:] / ||weight_v[r,:]||.
class WeightNormLinearImpl : public torch::nn::Module {
 public:
  WeightNormLinearImpl(int64_t in_features, int64_t out_features);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight() const;  // the effective (out, in) weight

  torch::Tensor weight_g;  // (out, 1)
  torch::Tensor weight_v;  // (out, in)
};
TORCH_MODULE(WeightNormLinear);

class DINOHeadImpl : public torch::nn::Module {
 public:
  explicit DINOHeadImpl(const DINOHeadOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  const DINOHeadOptions& options() const { return options_; }

  torch::nn::Sequential mlp{nullptr};
  WeightNormLinear last_layer{nullptr};

 private:
  DINOHeadOptions options_;
};
TORCH_MODULE(DINOHead);

// What one pass over the crops should give besides the logits (forward_pass).
struct CropPass {
  torch::Tensor masks;         // (2B, N) bool over the global rows; undefined: no patch logits
  torch::Tensor mask_indices;  // (n,) int64: masks.flatten().nonzero(), on the crops' device
  bool mask_input = false;     // replace the masked patches by the mask token
  bool global_features = false;
};

struct CropOutputs {
  torch::Tensor logits;           // (n_crops * B, K), as forward()
  torch::Tensor global_features;  // (2B, C) when asked
  torch::Tensor patch_logits;     // (n, K_ibot) when masks are given
};

class MultiCropWrapperImpl : public torch::nn::Module {
 public:
  MultiCropWrapperImpl(std::shared_ptr<models::Backbone> backbone, DINOHead head,
                       DINOHead ibot_head = nullptr);
  torch::Tensor forward(const std::vector<torch::Tensor>& crops);
  CropOutputs forward_pass(const std::vector<torch::Tensor>& crops, const CropPass& pass);

  std::shared_ptr<models::Backbone> backbone;
  DINOHead head;
  DINOHead ibot_head{nullptr};  // iBOT's separate head, or null
};
TORCH_MODULE(MultiCropWrapper);

// timm/DINO trunc_normal_: inverse-CDF sampling of N(mean, std) restricted to [a, b]
// (absolute bounds), in place, without autograd.
void trunc_normal_(torch::Tensor& t, double mean, double std, double a, double b);

// Whether any submodule is a BatchNorm (decides whether the teacher is DDP-wrapped in the
// official code, and so whether its checkpoint keys carry `module.`).
bool has_batchnorms(const torch::nn::Module& module);

}  // namespace xdino::ssl
