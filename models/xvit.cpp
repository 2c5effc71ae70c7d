#include "models/xvit.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "models/class_attention_probe.h"
#include "models/init.h"

namespace xdino::models {

namespace nn = torch::nn;
using torch::Tensor;

namespace {

nn::LayerNorm pre_norm(int64_t dim) {
  return nn::LayerNorm(nn::LayerNormOptions({dim}).eps(1e-6));  // XCiT's eps
}

// |rows| over the last axis, in `acc`, with the squared sum clamped before the root so that
// an all-zero row has a finite gradient (see the header).
Tensor row_norm(const Tensor& t, torch::Dtype acc, double eps_squared) {
  return t.square().sum({-1}, /*keepdim=*/true, acc).clamp_min(eps_squared).sqrt();
}

}  // namespace

// ------------------------------------------------------------------------------------------

XNormAttentionImpl::XNormAttentionImpl(const XNormAttentionOptions& o) : options(o) {
  XDINO_CHECK_ARG(o.num_heads() > 0 && o.dim() % o.num_heads() == 0, "embed_dim ", o.dim(),
                  " is not divisible by ", o.num_heads(), " heads");
  gamma = register_parameter("gamma", torch::full({o.num_heads(), 1, 1}, o.gamma_init()));
  qkv = register_module("qkv", nn::Linear(nn::LinearOptions(o.dim(), 3 * o.dim()).bias(true)));
  proj = register_module("proj", nn::Linear(o.dim(), o.dim()));
}

Tensor XNormAttentionImpl::forward(const Tensor& x, QKNorms* norms) {
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), h = options.num_heads(), d = C / h;
  const auto parts = qkv(x).view({B, N, 3, h, d}).unbind(2);
  const Tensor q = parts[0].transpose(1, 2);  // (B, h, N, d), strided views
  const Tensor k = parts[1].transpose(1, 2);
  const Tensor v = parts[2].transpose(1, 2);
  const auto acc = accumulation_dtype(q.scalar_type());
  const double eps2 = options.eps_squared();
  // float16 cannot hold K^T V summed over thousands of tokens; M^ is invariant to a positive
  // scale of M, so summing k/N instead (a mean) gives the same M^ without overflow.
  const Tensor k_sum = k.scalar_type() == torch::kHalf ? k / static_cast<double>(N) : k;
  // The associativity the paper relies on: K^T V first, (B, h, d, d), linear in N.
  const Tensor m = torch::matmul(k_sum.transpose(-2, -1), v);
  const Tensor g2 = gamma.to(acc).square();  // shared by both normalisations (header)
  // gamma^2 folded into the small d x d matrix, not into the (N, d) output.
  const Tensor m_hat = m.to(acc) * (g2 / row_norm(m, acc, eps2));
  const Tensor q_sq = q.square().sum({-1}, /*keepdim=*/true, acc);  // (B, h, N, 1)
  const Tensor nq = q_sq.clamp_min(eps2).sqrt();
  const Tensor q_hat = q.to(acc) / nq;
  if (norms != nullptr) {
    const Tensor q_raw = q_sq.sqrt();
    norms->q_raw = q_raw.squeeze(-1);
    norms->k_raw = k.square().sum({-1}, /*keepdim=*/false, acc).sqrt();
    // |q^_n| = |q_n| / max(|q_n|, 1e-12): exactly 1 (x / x in IEEE arithmetic) unless q_n
    // is ~0, so the map shows the design, not rounding noise stretched over a colormap.
    norms->q_hat = (q_raw / nq).squeeze(-1);
    norms->k_hat = Tensor();
  }
  const Tensor out = torch::matmul(q_hat.to(v.scalar_type()), m_hat.to(v.scalar_type()));
  // (B, h, N, d) -> (B, N, h, d) -> (B, N, C): channel = head * d + i.
  return proj(out.transpose(1, 2).reshape({B, N, C}));
}

// ------------------------------------------------------------------------------------------

AffineImpl::AffineImpl(int64_t dim, double alpha_init) {
  alpha = register_parameter("alpha", torch::full({dim}, alpha_init));
  beta = register_parameter("beta", torch::zeros({dim}));
}

Tensor AffineImpl::forward(const Tensor& x) { return torch::addcmul(beta, x, alpha); }

// ------------------------------------------------------------------------------------------

XViTBlockImpl::XViTBlockImpl(const XViTBlockOptions& o) : options(o) {
  const int64_t C = o.dim();
  norm1 = register_module("norm1", pre_norm(C));
  attn = register_module("attn", XNormAttention(XNormAttentionOptions(C, o.num_heads())));
  affine1 = register_module("affine1", Affine(C, o.affine_init()));
  norm2 = register_module("norm2", pre_norm(C));
  local_mp = register_module("local_mp", LPI(C));
  affine2 = register_module("affine2", Affine(C, o.affine_init()));
  norm3 = register_module("norm3", pre_norm(C));
  mlp = register_module("mlp", Mlp(C, o.mlp_ratio() * C));
  affine3 = register_module("affine3", Affine(C, o.affine_init()));
}

Tensor XViTBlockImpl::forward(const Tensor& x, int64_t rows, int64_t cols, QKNorms* norms) {
  const bool train = is_training();
  const double rate = options.drop_path_rate();
  Tensor y = residual_drop_path(x, affine1(attn(norm1(x), norms)), rate, train);
  y = residual_drop_path(y, affine2(local_mp(norm2(y), rows, cols)), rate, train);
  return residual_drop_path(y, affine3(mlp(norm3(y))), rate, train);
}

// ------------------------------------------------------------------------------------------

XViTClassAttentionBlockImpl::XViTClassAttentionBlockImpl(const XViTBlockOptions& o) : options(o) {
  const int64_t C = o.dim();
  norm1 = register_module("norm1", pre_norm(C));
  attn = register_module("attn", ClassAttention(C, o.num_heads()));
  affine1 = register_module("affine1", Affine(C, o.affine_init()));
  norm2 = register_module("norm2", pre_norm(C));
  mlp = register_module("mlp", Mlp(C, o.mlp_ratio() * C));
  affine2 = register_module("affine2", Affine(C, o.affine_init()));
}

Tensor XViTClassAttentionBlockImpl::forward(const Tensor& x, Tensor* attention) {
  const int64_t T = x.size(1);
  Tensor cls = x.narrow(1, 0, 1) + affine1(attn(norm1(x), attention));
  cls = cls + affine2(mlp(norm2(cls)));
  return torch::cat({cls, x.narrow(1, 1, T - 1)}, 1);
}

// ------------------------------------------------------------------------------------------

const std::vector<XViTConfig>& xvit_variants() {
  static const std::vector<XViTConfig> table = [] {
    struct Size {
      const char *name, *paper;
      int64_t dim, depth, heads;
    };
    // See the table in the header: head dim 48, sized to the paper's params and FLOPs.
    const Size sizes[] = {{"tiny", "T", 192, 20, 4},
                          {"small", "S", 384, 9, 8},
                          {"medium", "M", 384, 18, 8},
                          {"base", "B", 480, 20, 10}};
    std::vector<XViTConfig> out;
    for (const char* suffix : {"", "_p8"}) {
      for (const Size& s : sizes) {
        XViTConfig c;
        c.name = std::string("xvit_") + s.name + suffix;
        c.patch_size = *suffix ? 8 : 16;
        c.paper_name = std::string("X-ViT-") + s.paper + "/" + std::to_string(c.patch_size);
        c.embed_dim = s.dim;
        c.depth = s.depth;
        c.num_heads = s.heads;
        c.affine_init = s.depth <= 12 ? 1.0 : 1e-5;  // XCiT's eta rule
        out.push_back(c);
      }
    }
    return out;
  }();
  return table;
}

std::optional<XViTConfig> find_xvit_variant(const std::string& name) {
  for (const XViTConfig& c : xvit_variants())
    if (c.name == name) return c;
  return std::nullopt;
}

std::optional<XViTPublished> xvit_published(const std::string& name) {
  if (name == "xvit_tiny") return XViTPublished{78.8, 10, 1.9, std::nullopt};
  if (name == "xvit_small") return XViTPublished{82.0, 21, 3.7, std::nullopt};
  if (name == "xvit_medium") return XViTPublished{82.8, 37, 7.0, 20.5};
  if (name == "xvit_base") return XViTPublished{83.3, 64, 11.9, 35.1};
  return std::nullopt;
}

std::vector<std::string> XViT::info_lines() const {
  char line[256];
  std::vector<std::string> out;
  std::snprintf(line, sizeof line,
                "x-vit config: depth %lld, %lld heads of %lld channels, mlp ratio %lld, %lld "
                "class-attention layers, affine init %g",
                static_cast<long long>(config_.depth), static_cast<long long>(config_.num_heads),
                static_cast<long long>(config_.embed_dim / config_.num_heads),
                static_cast<long long>(config_.mlp_ratio),
                static_cast<long long>(config_.cls_attn_layers), config_.affine_init);
  out.emplace_back(line);
  out.emplace_back(
      "x-vit why: the paper gives only top-1/params/FLOPs; depth and width are chosen so that "
      "params and FLOPs fall within 5% of its rows, head dim 48 as XCiT-T/S (models/xvit.h)");
  for (const XViTConfig& c : xvit_variants()) {
    const auto pub = xvit_published(c.name);
    if (!pub) continue;
    const double params = static_cast<double>(XViT(c).num_parameters()) / 1e6;
    const double g224 = xvit_flops(c, 224, 224) / 1e9, g384 = xvit_flops(c, 384, 384) / 1e9;
    std::string at384 = "";
    if (pub->gflops_384) {
      char buf[64];
      std::snprintf(buf, sizeof buf, " (paper %.1f)", *pub->gflops_384);
      at384 = buf;
    }
    std::snprintf(line, sizeof line,
                  "x-vit table: %-11s C %3lld depth %2lld heads %2lld | params %.2fM (paper %gM) "
                  "| GFLOPs 224 %.2f (paper %.1f) | GFLOPs 384 %.2f%s | paper top-1 %.1f",
                  c.name.c_str(), static_cast<long long>(c.embed_dim),
                  static_cast<long long>(c.depth), static_cast<long long>(c.num_heads), params,
                  pub->params_m, g224, pub->gflops_224, g384, at384.c_str(), pub->top1);
    out.emplace_back(line);
  }
  return out;
}

double xnorm_attention_flops(int64_t num_tokens, int64_t dim, int64_t num_heads) {
  const double N = static_cast<double>(num_tokens), C = static_cast<double>(dim);
  const double d = C / static_cast<double>(num_heads);
  return 3 * N * C * C  // qkv
         + N * C * d    // K^T V: h products of (d x N)(N x d)
         + N * C * d    // Q^ M^: h products of (N x d)(d x d)
         + N * C * C;   // proj
}

double xvit_flops(const XViTConfig& c, int64_t height, int64_t width) {
  const double C = static_cast<double>(c.embed_dim);
  const double r = static_cast<double>(c.mlp_ratio);
  double total = ConvPatchEmbedImpl::flops(height, width, c.patch_size, c.embed_dim, c.in_chans);
  const auto [rows, cols] = ConvPatchEmbedImpl::grid(height, width, c.patch_size);
  const double N = static_cast<double>(rows * cols), T = N + 1;
  total += FourierPositionalEncodingImpl::flops(rows * cols, c.embed_dim);
  const double attention = xnorm_attention_flops(rows * cols, c.embed_dim, c.num_heads);
  const double block = attention              // XNorm attention
                       + 3 * 5 * N * C        // 3 LayerNorms
                       + N * C * (2 * 9 + 2)  // LPI: 2 depthwise 3x3 + BN
                       + 2 * r * N * C * C;   // MLP
  total += static_cast<double>(c.depth) * block;
  const double ca = 5 * T * C         // norm1 over all tokens
                    + C * C           // q of CLS
                    + 2 * T * C * C   // k, v of all tokens
                    + 2 * T * C       // q k^T and attn v for one query
                    + C * C           // proj of CLS
                    + 5 * C           // norm2 of CLS
                    + 2 * r * C * C;  // MLP of CLS
  total += static_cast<double>(c.cls_attn_layers) * ca;
  total += 5 * C;  // final LayerNorm of CLS
  total += C * static_cast<double>(c.num_classes);
  return total;
}

// ------------------------------------------------------------------------------------------

XViT::XViT(XViTConfig config)
    : ClassAttentionBackbone(
          {config.name, config.patch_size, config.embed_dim, config.depth, config.num_heads,
           config.cls_attn_layers, config.num_classes, config.in_chans},
          "XNorm", /*unit_queries=*/true),
      config_(std::move(config)) {
  const XViTConfig& c = config_;
  XDINO_CHECK_ARG(c.depth > 0 && c.cls_attn_layers > 0 && c.num_heads > 0 && c.mlp_ratio > 0,
                  "X-ViT needs depth, cls_attn_layers, num_heads and mlp_ratio > 0");
  XDINO_CHECK_ARG(c.drop_path_rate >= 0 && c.drop_path_rate < 1,
                  "drop_path_rate must be in [0, 1), got ", c.drop_path_rate);
  const auto block_options = XViTBlockOptions(c.embed_dim, c.num_heads)
                                 .mlp_ratio(c.mlp_ratio)
                                 .affine_init(c.affine_init)
                                 .drop_path_rate(c.drop_path_rate);
  // Our order (no official checkpoint): stem, positions, blocks, norm, head.
  register_stem();
  register_positions();
  register_blocks(
      [&] { return XViTBlock(block_options); },
      [&] { return XViTClassAttentionBlock(XViTBlockOptions(block_options).drop_path_rate(0)); });
  register_norm_and_head(pre_norm(c.embed_dim));
  init_weights();
}

double XViT::flops(int64_t height, int64_t width) const {
  return xvit_flops(config_, height, width);
}

}  // namespace xdino::models
