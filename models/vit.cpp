#include "models/vit.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "models/init.h"

namespace xdino::models {

namespace nn = torch::nn;
using torch::Tensor;
using torch::indexing::None;
using torch::indexing::Slice;

std::optional<ViTConfig> find_vit_variant(const std::string& name, int64_t patch_size) {
  ViTConfig c;
  c.name = name;
  c.patch_size = patch_size;
  std::string size;
  if (name == "vit_tiny") {
    c.embed_dim = 192;
    c.num_heads = 3;
    size = "Ti";
  } else if (name == "vit_small") {
    c.embed_dim = 384;
    c.num_heads = 6;
    size = "S";
  } else if (name == "vit_base") {
    c.embed_dim = 768;
    c.num_heads = 12;
    size = "B";
  } else {
    return std::nullopt;
  }
  c.paper_name = "ViT-" + size + "/" + std::to_string(patch_size);
  return c;
}

double vit_flops(const ViTConfig& c, int64_t height, int64_t width) {
  const double C = static_cast<double>(c.embed_dim);
  const double p = static_cast<double>(c.patch_size);
  const double N = static_cast<double>((height / c.patch_size) * (width / c.patch_size));
  const double T = N + 1;
  double flops = C * static_cast<double>(c.in_chans) * p * p * N;  // patch conv
  const double block = 2 * 5 * T * C                               // norm1, norm2
                       + 3 * T * C * C                             // qkv
                       + 2 * T * T * C                             // q k^T and attn @ v
                       + T * C * C                                 // proj
                       + 8 * T * C * C;                            // mlp
  flops += static_cast<double>(c.depth) * block;
  flops += 5 * T * C;  // final norm over all tokens
  flops += C * static_cast<double>(c.num_classes);
  return flops;  // the bicubic position resize is not counted by fvcore
}

Tensor interpolate_pos_encoding(const Tensor& pos_embed, int64_t height, int64_t width,
                                int64_t patch_size) {
  const int64_t rows = height / patch_size, cols = width / patch_size;
  const int64_t n0 = pos_embed.size(1) - 1, C = pos_embed.size(2);
  if (rows * cols == n0 && height == width) return pos_embed;
  const auto side = static_cast<int64_t>(std::sqrt(static_cast<double>(n0)));
  XDINO_CHECK(side * side == n0, "pos_embed holds ", n0, " patch positions, not a square grid");
  // DINO adds 0.1 so that floor(side * scale) lands on the wanted size; the kernel then uses
  // this scale factor itself (not out/in), which shifts the sampling grid slightly.
  const double scale_h = (static_cast<double>(rows) + 0.1) / std::sqrt(static_cast<double>(n0));
  const double scale_w = (static_cast<double>(cols) + 0.1) / std::sqrt(static_cast<double>(n0));
  const auto out_h = static_cast<int64_t>(std::floor(static_cast<double>(side) * scale_h));
  const auto out_w = static_cast<int64_t>(std::floor(static_cast<double>(side) * scale_w));
  XDINO_CHECK(out_h == rows && out_w == cols, "position-embedding resize gave ", out_h, "x", out_w,
              " instead of ", rows, "x", cols);
  const auto acc = accumulation_dtype(pos_embed.scalar_type());
  Tensor grid = pos_embed.index({Slice(), Slice(1, None)})
                    .reshape({1, side, side, C})
                    .permute({0, 3, 1, 2})
                    .to(acc);
  grid = at::upsample_bicubic2d(grid, {out_h, out_w}, false, scale_h, scale_w);
  grid = grid.permute({0, 2, 3, 1}).reshape({1, rows * cols, C}).to(pos_embed.scalar_type());
  return torch::cat({pos_embed.index({Slice(), Slice(0, 1)}), grid}, 1);
}

// ------------------------------------------------------------------------------------------

AttentionImpl::AttentionImpl(int64_t dim, int64_t heads) : num_heads(heads) {
  XDINO_CHECK_ARG(dim % heads == 0, "embed_dim ", dim, " is not divisible by ", heads, " heads");
  qkv = register_module("qkv", nn::Linear(nn::LinearOptions(dim, 3 * dim).bias(true)));
  proj = register_module("proj", nn::Linear(dim, dim));
}

Tensor AttentionImpl::forward(const Tensor& x, Tensor* cls_attention) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), h = num_heads, d = C / h;
  const auto parts = qkv(x).view({B, T, 3, h, d}).unbind(2);
  const Tensor q = parts[0].transpose(1, 2);  // (B, h, T, d)
  const Tensor k = parts[1].transpose(1, 2);
  const Tensor v = parts[2].transpose(1, 2);
  const auto acc = accumulation_dtype(q.scalar_type());
  // Scaling q (T*d values) instead of the logits (T*T values).
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const Tensor attn = torch::softmax(torch::matmul(q * scale, k.transpose(-2, -1)), -1, acc);
  if (cls_attention != nullptr) *cls_attention = attn.select(2, 0);
  const Tensor out = torch::matmul(attn.to(v.scalar_type()), v);  // (B, h, T, d)
  return proj(out.transpose(1, 2).reshape({B, T, C}));
}

ViTBlockImpl::ViTBlockImpl(const ViTBlockOptions& o) : drop_path_rate(o.drop_path_rate()) {
  const int64_t dim = o.dim(), heads = o.num_heads();
  norm1 = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-6)));
  attn = register_module("attn", Attention(dim, heads));
  norm2 = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-6)));
  mlp = register_module("mlp", Mlp(dim, 4 * dim));
}

Tensor ViTBlockImpl::forward(const Tensor& x, Tensor* cls_attention) {
  const bool train = is_training();
  const Tensor y = residual_drop_path(x, attn(norm1(x), cls_attention), drop_path_rate, train);
  return residual_drop_path(y, mlp(norm2(y)), drop_path_rate, train);
}

// ------------------------------------------------------------------------------------------

VisionTransformer::VisionTransformer(ViTConfig config) : config_(std::move(config)) {
  const ViTConfig& c = config_;
  XDINO_CHECK_ARG(c.patch_size > 0 && c.img_size >= c.patch_size,
                  "ViT needs 0 < patch_size <= img_size, got patch ", c.patch_size, " and image ",
                  c.img_size);
  XDINO_CHECK_ARG(c.drop_path_rate >= 0 && c.drop_path_rate < 1,
                  "drop_path_rate must be in [0, 1), got ", c.drop_path_rate);
  const int64_t C = c.embed_dim, side = c.img_size / c.patch_size;
  cls_token = register_parameter("cls_token", torch::zeros({1, 1, C}));
  pos_embed = register_parameter("pos_embed", torch::zeros({1, side * side + 1, C}));
  patch_embed = register_module("patch_embed", ViTPatchEmbed(c.patch_size, C, c.in_chans));
  auto list = nn::ModuleList();
  for (int64_t i = 0; i < c.depth; ++i) {
    // torch.linspace(0, rate, depth)
    const double rate =
        c.depth > 1 ? c.drop_path_rate * static_cast<double>(i) / static_cast<double>(c.depth - 1)
                    : 0.0;
    blocks.push_back(ViTBlock(ViTBlockOptions(C, c.num_heads).drop_path_rate(rate)));
    list->push_back(blocks.back());
  }
  register_module("blocks", list);
  norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({C}).eps(1e-6)));
  if (c.num_classes > 0) head = register_module("head", nn::Linear(C, c.num_classes));

  trunc_normal_(pos_embed, 0.0, 0.02, -2.0, 2.0);
  trunc_normal_(cls_token, 0.0, 0.02, -2.0, 2.0);
  init_linear_and_layernorm(*this);
}

std::pair<int64_t, int64_t> VisionTransformer::token_grid(int64_t height, int64_t width) const {
  return {height / config_.patch_size, width / config_.patch_size};
}

double VisionTransformer::flops(int64_t height, int64_t width) const {
  return vit_flops(config_, height, width);
}

Probe VisionTransformer::probe(Tensor images, const ProbeRequest& request) {
  XDINO_CHECK_ARG(!request.qk_block, "|Q|/|K| maps need XCA blocks; ", config_.name,
                  " has none (use an xcit_* architecture)");
  const int64_t depth = config_.depth;
  int64_t last_block = -1;
  const std::vector<int64_t> wanted = resolve_indices(request.blocks, depth, "block", &last_block);
  std::optional<int64_t> attn_block;
  if (request.cls_attention_layer) {
    attn_block = resolve_index(*request.cls_attention_layer, depth, "attention block");
    last_block = std::max(last_block, *attn_block);
  }
  const bool run_all = request.feature || request.patch_tokens || request.final_patch_tokens;

  Probe out;
  out.blocks.resize(wanted.size());
  const int64_t B = images.size(0);
  Tensor x = apply_token_mask(patch_embed(images), request.token_mask);
  const auto dtype = torch::promote_types(x.scalar_type(), cls_token.scalar_type());
  x = torch::cat({cls_token.expand({B, 1, -1}).to(dtype), x.to(dtype)}, 1);
  x = x + interpolate_pos_encoding(pos_embed, images.size(2), images.size(3), config_.patch_size);
  for (int64_t i = 0; i < depth; ++i) {
    x = blocks[i](x, attn_block == i ? &out.cls_attention : nullptr);
    for (size_t j = 0; j < wanted.size(); ++j)
      if (wanted[j] == i) out.blocks[j] = x;
    if (!run_all && i >= last_block) return out;
  }
  if (request.patch_tokens || request.final_patch_tokens) {
    const Tensor normed = norm(x.index({Slice(), Slice(1, None)}));
    if (request.patch_tokens) out.patch_tokens = normed;
    if (request.final_patch_tokens) out.final_patch_tokens = normed;
  }
  if (!request.feature) return out;
  out.feature = norm(x.select(1, 0));
  if (head) out.feature = head(out.feature);
  return out;
}

Tensor VisionTransformer::linear_features(Tensor images, int64_t n_last_blocks,
                                          bool avgpool_patchtokens) {
  XDINO_CHECK_ARG(n_last_blocks >= 1 && n_last_blocks <= config_.depth,
                  "n_last_blocks must be in 1..", config_.depth, ", got ", n_last_blocks);
  XDINO_CHECK_ARG(!avgpool_patchtokens || n_last_blocks == 1,
                  "avgpool_patchtokens needs n_last_blocks 1 (eval_linear.py cannot combine them)");
  std::vector<int64_t> indices;
  for (int64_t i = -n_last_blocks; i < 0; ++i) indices.push_back(i);
  const std::vector<Tensor> outs = block_outputs(std::move(images), indices);
  if (avgpool_patchtokens) {
    const Tensor normed = norm(outs.back());
    const Tensor cls = normed.select(1, 0);
    const Tensor avg = normed.index({Slice(), Slice(1, None)}).mean(1);
    return torch::stack({cls, avg}, -1).flatten(1);  // interleaved, as eval_linear.py
  }
  std::vector<Tensor> cls;
  for (const Tensor& o : outs) cls.push_back(norm(o.select(1, 0)));  // LayerNorm is per token
  return torch::cat(cls, -1);
}

}  // namespace xdino::models
