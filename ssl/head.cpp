#include "ssl/head.h"

#include <cmath>

#include "core/check.h"
#include "models/batch_norm.h"

namespace xdino::ssl {

void trunc_normal_(torch::Tensor& t, double mean, double std, double a, double b) {
  torch::NoGradGuard no_grad;
  const auto norm_cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double l = norm_cdf((a - mean) / std);
  const double u = norm_cdf((b - mean) / std);
  t.uniform_(2 * l - 1, 2 * u - 1);
  t.erfinv_();
  t.mul_(std * std::sqrt(2.0));
  t.add_(mean);
  t.clamp_(a, b);
}

bool has_batchnorms(const torch::nn::Module& module) {
  // Any module owning running statistics normalises with batch statistics in train mode:
  // LibTorch's BatchNorm{1,2,3}d and the models' own (Sync)BatchNorm alike.
  for (const auto& m : module.modules(/*include_self=*/true))
    if (m->named_buffers(/*recurse=*/false).contains("running_mean")) return true;
  return false;
}

WeightNormLinearImpl::WeightNormLinearImpl(int64_t in_features, int64_t out_features) {
  // PyTorch's default Linear init (kaiming_uniform, a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)).
  torch::nn::Linear init(torch::nn::LinearOptions(in_features, out_features).bias(false));
  weight_g = register_parameter("weight_g", torch::ones({out_features, 1}));
  weight_v = register_parameter("weight_v", init->weight.detach().clone());
}

torch::Tensor WeightNormLinearImpl::weight() const {
  return torch::_weight_norm(weight_v, weight_g, 0);
}

torch::Tensor WeightNormLinearImpl::forward(const torch::Tensor& x) {
  return torch::nn::functional::linear(x, weight());
}

DINOHeadImpl::DINOHeadImpl(const DINOHeadOptions& o) : options_(o) {
  XDINO_CHECK_ARG(o.in_dim > 0 && o.out_dim > 0 && o.hidden_dim > 0 && o.bottleneck_dim > 0,
                  "DINO head dimensions must be positive (in ", o.in_dim, ", out ", o.out_dim,
                  ", hidden ", o.hidden_dim, ", bottleneck ", o.bottleneck_dim, ")");
  const int64_t nlayers = std::max<int64_t>(o.nlayers, 1);
  mlp = torch::nn::Sequential();
  if (nlayers == 1) {
    mlp->push_back(torch::nn::Linear(o.in_dim, o.bottleneck_dim));
  } else {
    auto block = [&](int64_t in, int64_t out) {
      mlp->push_back(torch::nn::Linear(in, out));
      // BatchNorm1d semantics; synchronised across processes like the official SyncBatchNorm.
      if (o.use_bn) mlp->push_back(models::BatchNorm(out));
      mlp->push_back(torch::nn::GELU());
    };
    block(o.in_dim, o.hidden_dim);
    for (int64_t i = 0; i < nlayers - 2; ++i) block(o.hidden_dim, o.hidden_dim);
    mlp->push_back(torch::nn::Linear(o.hidden_dim, o.bottleneck_dim));
  }
  register_module("mlp", mlp);
  for (const auto& m : mlp->modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      trunc_normal_(linear->weight, 0.0, 0.02, -2.0, 2.0);
      torch::NoGradGuard no_grad;
      linear->bias.zero_();
    }
  }
  // Created after the init pass, as in the official head: weight_v keeps the default init.
  last_layer = register_module("last_layer", WeightNormLinear(o.bottleneck_dim, o.out_dim));
  if (o.norm_last_layer) last_layer->weight_g.set_requires_grad(false);
}

torch::Tensor DINOHeadImpl::forward(const torch::Tensor& x) {
  auto z = mlp->forward(x);
  z = torch::nn::functional::normalize(
      z, torch::nn::functional::NormalizeFuncOptions().p(2).dim(-1).eps(1e-12));
  return last_layer->forward(z);
}

MultiCropWrapperImpl::MultiCropWrapperImpl(std::shared_ptr<models::Backbone> b, DINOHead h,
                                           DINOHead ibot)
    : backbone(std::move(b)), head(std::move(h)), ibot_head(std::move(ibot)) {
  XDINO_CHECK(backbone != nullptr, "MultiCropWrapper needs a backbone");
  register_module("backbone", backbone);
  register_module("head", head);
  if (ibot_head) register_module("ibot_head", ibot_head);
}

namespace {

// The backbone's features of crops[start..], consecutive crops of one width in one call each
// (one batch, so BatchNorm sees them together, as the official wrapper runs them), appended to
// `features` in crop order.
void add_grouped_features(models::Backbone& backbone, const std::vector<torch::Tensor>& crops,
                          size_t start, std::vector<torch::Tensor>& features) {
  while (start < crops.size()) {
    size_t end = start + 1;
    while (end < crops.size() && crops[end].size(-1) == crops[start].size(-1)) ++end;
    const std::vector<torch::Tensor> group(crops.begin() + static_cast<std::ptrdiff_t>(start),
                                           crops.begin() + static_cast<std::ptrdiff_t>(end));
    features.push_back(backbone.forward(group.size() == 1 ? group[0] : torch::cat(group)));
    start = end;
  }
}

}  // namespace

torch::Tensor MultiCropWrapperImpl::forward(const std::vector<torch::Tensor>& crops) {
  XDINO_CHECK(!crops.empty(), "MultiCropWrapper got no crops");
  std::vector<torch::Tensor> features;
  add_grouped_features(*backbone, crops, 0, features);
  return head->forward(features.size() == 1 ? features[0] : torch::cat(features));
}

CropOutputs MultiCropWrapperImpl::forward_pass(const std::vector<torch::Tensor>& crops,
                                               const CropPass& pass) {
  XDINO_CHECK(crops.size() >= 2 && crops[0].sizes() == crops[1].sizes(),
              "forward_pass needs the 2 global crops first, of one size");
  models::ProbeRequest request;
  const bool patches = pass.masks.defined();
  if (patches && pass.mask_input) request.token_mask = pass.masks;
  request.final_patch_tokens = patches;
  const models::Probe global = backbone->probe(torch::cat({crops[0], crops[1]}), request);
  CropOutputs out;
  std::vector<torch::Tensor> features{global.feature};
  add_grouped_features(*backbone, crops, 2, features);
  out.logits = head->forward(features.size() == 1 ? features[0] : torch::cat(features));
  if (pass.global_features) out.global_features = global.feature;
  if (patches) {
    const torch::Tensor tokens =
        global.final_patch_tokens.flatten(0, 1).index_select(0, pass.mask_indices);
    out.patch_logits = (ibot_head ? ibot_head : head)->forward(tokens);
  }
  return out;
}

}  // namespace xdino::ssl
