#include "models/backbone.h"

#include <algorithm>

#include "core/check.h"

namespace xdino::models {

torch::Tensor Backbone::forward(torch::Tensor images) {
  return probe(std::move(images), ProbeRequest{}).feature;
}

torch::Tensor Backbone::linear_features(torch::Tensor images, int64_t, bool) {
  return forward(std::move(images));
}

std::vector<torch::Tensor> Backbone::block_outputs(torch::Tensor images,
                                                   const std::vector<int64_t>& block_indices) {
  ProbeRequest request;
  request.blocks = block_indices;
  request.feature = false;
  return probe(std::move(images), request).blocks;
}

torch::Tensor Backbone::patch_tokens(torch::Tensor images) {
  ProbeRequest request;
  request.patch_tokens = true;
  request.feature = false;
  return probe(std::move(images), request).patch_tokens;
}

torch::Tensor Backbone::cls_attention(torch::Tensor images, int64_t layer) {
  ProbeRequest request;
  request.cls_attention_layer = layer;
  request.feature = false;
  return probe(std::move(images), request).cls_attention;
}

QKNorms Backbone::qk_norms(torch::Tensor images, int64_t block) {
  ProbeRequest request;
  request.qk_block = block;
  request.feature = false;
  return probe(std::move(images), request).qk;
}

void Backbone::add_mask_token() {
  XDINO_CHECK_ARG(supports_token_mask(), arch(),
                  " has no patch tokens to mask (iBOT needs an xcit_*, xvit_* or vit_* backbone)");
  if (!mask_token_.defined())
    mask_token_ = register_parameter("mask_token", torch::zeros({1, embed_dim()}));
}

torch::Tensor Backbone::apply_token_mask(const torch::Tensor& tokens,
                                         const torch::Tensor& mask) const {
  if (!mask.defined()) return tokens;
  XDINO_CHECK(mask_token_.defined(), arch(), ": a token mask needs add_mask_token() first");
  XDINO_CHECK(mask.dim() == 2 && mask.size(0) == tokens.size(0) && mask.size(1) == tokens.size(1),
              arch(), ": the token mask is ", mask.sizes(), " for ", tokens.size(0), " images of ",
              tokens.size(1), " patches");
  return torch::where(mask.to(tokens.device()).unsqueeze(-1),
                      mask_token_.to(tokens.scalar_type()).view({1, 1, -1}), tokens);
}

int64_t Backbone::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

int64_t resolve_index(int64_t index, int64_t count, const char* what) {
  XDINO_CHECK_ARG(index >= -count && index < count, what, " index ", index,
                  " is out of range: the model has ", count, " (use 0..", count - 1, " or -1..-",
                  count, ")");
  return index < 0 ? index + count : index;
}

std::vector<int64_t> resolve_indices(const std::vector<int64_t>& indices, int64_t count,
                                     const char* what, int64_t* last) {
  std::vector<int64_t> out;
  for (int64_t i : indices) {
    out.push_back(resolve_index(i, count, what));
    if (last != nullptr) *last = std::max(*last, out.back());
  }
  return out;
}

}  // namespace xdino::models
