// The probe shared by the class-attention families (XCiT, X-ViT): embedded patch tokens go
// through `depth` main blocks, then CLS is prepended and `ca_layers` class-attention blocks
// run, then the CLS row gets the final norm (and head). One implementation, so both families
// capture, stop early and check indices the same way (models/backbone.h's probe contract).
//
// Contract: tokens (B, N, C) are the patch tokens after embedding and position encoding;
// cls_token (1, 1, C). steps.block(x, i, norms) runs main block i (filling `norms` when not
// null); steps.class_attention(x, j, attention) runs class-attention block j on (B, 1+N, C);
// steps.final(cls) maps the (B, C) CLS row to forward()'s result; steps.norm is the final norm
// (for final_patch_tokens). Out-of-range indices in the
// request throw xdino::UsageError naming steps.block_kind ("XCA block", ...).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "models/backbone.h"

namespace xdino::models {

struct ClassAttentionSteps {
  int64_t depth = 0, ca_layers = 0;
  const char* block_kind = "block";  // names the qk_block index in errors
  std::function<torch::Tensor(const torch::Tensor&, int64_t, QKNorms*)> block;
  std::function<torch::Tensor(const torch::Tensor&, int64_t, torch::Tensor*)> class_attention;
  std::function<torch::Tensor(const torch::Tensor&)> final;
  std::function<torch::Tensor(const torch::Tensor&)> norm;
};

Probe probe_class_attention_model(torch::Tensor tokens, const torch::Tensor& cls_token,
                                  const ProbeRequest& request, const ClassAttentionSteps& steps);

// The steps of a model whose main blocks are called block(x, rows, cols, norms) and whose
// class-attention blocks are called ca(x, attention), then final norm and optional head.
// The vectors and modules are referenced, not copied: use the steps within the probe call.
template <typename Block, typename CaBlock>
ClassAttentionSteps class_attention_steps(std::vector<Block>& blocks,
                                          std::vector<CaBlock>& ca_blocks,
                                          torch::nn::LayerNorm& norm, torch::nn::Linear& head,
                                          int64_t rows, int64_t cols, const char* block_kind) {
  ClassAttentionSteps steps;
  steps.depth = static_cast<int64_t>(blocks.size());
  steps.ca_layers = static_cast<int64_t>(ca_blocks.size());
  steps.block_kind = block_kind;
  steps.block = [&blocks, rows, cols](const torch::Tensor& t, int64_t i, QKNorms* norms) {
    return blocks[i](t, rows, cols, norms);
  };
  steps.class_attention = [&ca_blocks](const torch::Tensor& t, int64_t j, torch::Tensor* a) {
    return ca_blocks[j](t, a);
  };
  // LayerNorm is per token, so normalising CLS alone equals norm(x)[:, 0].
  steps.final = [&norm, &head](const torch::Tensor& cls) {
    return head ? head(norm(cls)) : norm(cls);
  };
  steps.norm = [&norm](const torch::Tensor& x) { return norm(x); };
  return steps;
}

}  // namespace xdino::models
