#include "models/class_attention_probe.h"

#include <algorithm>
#include <optional>

namespace xdino::models {

Probe probe_class_attention_model(torch::Tensor x, const torch::Tensor& cls_token,
                                  const ProbeRequest& request, const ClassAttentionSteps& steps) {
  const int64_t depth = steps.depth;
  // The last main block any capture needs; without a CLS capture the pass stops there.
  int64_t last_block = request.patch_tokens ? depth - 1 : -1;
  const std::vector<int64_t> wanted = resolve_indices(request.blocks, depth, "block", &last_block);
  std::optional<int64_t> qk_block;
  if (request.qk_block) {
    qk_block = resolve_index(*request.qk_block, depth, steps.block_kind);
    last_block = std::max(last_block, *qk_block);
  }
  std::optional<int64_t> ca_layer;
  if (request.cls_attention_layer)
    ca_layer =
        resolve_index(*request.cls_attention_layer, steps.ca_layers, "class-attention layer");
  const bool need_cls = request.feature || ca_layer.has_value() || request.final_patch_tokens;

  // Under autocast the patch embedding ends in half precision (its BatchNorms keep their
  // inputs half, as torch's do). The token stream runs in the parameters' dtype, as the
  // official one does from its first gamma-scaled residual on, and as LibTorch 1.13's CPU
  // LayerNorm requires.
  x = x.to(torch::promote_types(x.scalar_type(), cls_token.scalar_type()));
  Probe out;
  out.blocks.resize(wanted.size());
  for (int64_t i = 0; i < depth; ++i) {
    x = steps.block(x, i, qk_block == i ? &out.qk : nullptr);
    for (size_t j = 0; j < wanted.size(); ++j)
      if (wanted[j] == i) out.blocks[j] = x;
    if (request.patch_tokens && i == depth - 1) out.patch_tokens = x;
    if (!need_cls && i >= last_block) return out;
  }

  const int64_t B = x.size(0);
  const auto dtype = torch::promote_types(x.scalar_type(), cls_token.scalar_type());
  x = torch::cat({cls_token.expand({B, 1, -1}).to(dtype), x.to(dtype)}, 1);
  for (int64_t j = 0; j < steps.ca_layers; ++j) {
    x = steps.class_attention(x, j, ca_layer == j ? &out.cls_attention : nullptr);
    if (!request.feature && !request.final_patch_tokens && ca_layer == j) return out;
  }
  if (request.final_patch_tokens) out.final_patch_tokens = steps.norm(x.slice(1, 1));
  if (!request.feature) return out;
  out.feature = steps.final(x.select(1, 0));
  return out;
}

}  // namespace xdino::models
