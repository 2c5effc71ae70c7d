#include "models/xcit.h"

#include <algorithm>

#include "core/check.h"
#include "models/class_attention_probe.h"
#include "models/init.h"

namespace xdino::models {

namespace nn = torch::nn;
using torch::Tensor;

const std::vector<XCiTConfig>& xcit_variants() {
  static const std::vector<XCiTConfig> table = [] {
    struct Row {
      const char *size, *paper;
      int64_t dim, depth, heads;
      double eta;
      bool tokens_norm;
    };
    // The official family (docs/architecture.md, "XCiT").
    const Row rows[] = {
        {"nano_12", "N12", 128, 12, 4, 1.0, false},   {"tiny_12", "T12", 192, 12, 4, 1.0, true},
        {"small_12", "S12", 384, 12, 8, 1.0, true},   {"tiny_24", "T24", 192, 24, 4, 1e-5, true},
        {"small_24", "S24", 384, 24, 8, 1e-5, true},  {"medium_24", "M24", 512, 24, 8, 1e-5, true},
        {"large_24", "L24", 768, 24, 16, 1e-5, true},
    };
    std::vector<XCiTConfig> out;
    for (int64_t patch : {16, 8}) {
      for (const Row& r : rows) {
        XCiTConfig c;
        c.name = std::string("xcit_") + r.size + "_p" + std::to_string(patch);
        c.paper_name = std::string("XCiT-") + r.paper + "/" + std::to_string(patch);
        c.patch_size = patch;
        c.embed_dim = r.dim;
        c.depth = r.depth;
        c.num_heads = r.heads;
        c.eta = r.eta;
        c.tokens_norm = r.tokens_norm;
        out.push_back(c);
      }
    }
    return out;
  }();
  return table;
}

const std::vector<XCiTConfig>& xcit_small_image_variants() {
  static const std::vector<XCiTConfig> table = [] {
    // Patch 4 turns a 28-32 px image into a 7x7-8x8 token grid (docs/architecture.md,
    // "Small-image XCiT"). nano_12/tiny_12 are the official widths and depths; the shallower
    // rows trade depth for images per second in CPU-budget runs.
    struct Row {
      const char *size, *paper;
      int64_t dim, depth, heads;
    };
    const Row rows[] = {{"nano_12", "N12", 128, 12, 4},
                        {"tiny_12", "T12", 192, 12, 4},
                        {"nano_6", "N6", 128, 6, 4},
                        {"nano_4", "N4", 128, 4, 4}};
    std::vector<XCiTConfig> out;
    for (const Row& r : rows) {
      XCiTConfig c;
      c.name = std::string("xcit_") + r.size + "_p4";
      c.paper_name = std::string("XCiT-") + r.paper + "/4";
      c.patch_size = 4;
      c.embed_dim = r.dim;
      c.depth = r.depth;
      c.num_heads = r.heads;
      c.eta = 1.0;
      c.tokens_norm = r.dim != 128;  // as the official nano (CLS-only norm2) and tiny
      out.push_back(c);
    }
    return out;
  }();
  return table;
}

std::optional<XCiTConfig> find_xcit_variant(const std::string& name) {
  for (const auto* table : {&xcit_variants(), &xcit_small_image_variants()})
    for (const XCiTConfig& c : *table)
      if (c.name == name) return c;
  return std::nullopt;
}

double xcit_flops(const XCiTConfig& c, int64_t height, int64_t width) {
  const double C = static_cast<double>(c.embed_dim);
  const double d = C / static_cast<double>(c.num_heads);
  double flops = ConvPatchEmbedImpl::flops(height, width, c.patch_size, c.embed_dim, c.in_chans);
  const auto [h, w] = ConvPatchEmbedImpl::grid(height, width, c.patch_size);
  const double N = static_cast<double>(h * w), T = N + 1;
  flops += FourierPositionalEncodingImpl::flops(h * w, c.embed_dim);
  const double xca_block = 3 * 5 * N * C                // norm1, norm2, norm3
                           + 3 * N * C * C              // qkv
                           + 2 * N * C * d              // q^ k^T and attn @ v
                           + N * C * C                  // proj
                           + 2 * 9 * N * C + 2 * N * C  // LPI convs + BN
                           + 8 * N * C * C;             // mlp
  flops += static_cast<double>(c.depth) * xca_block;
  const double ca_block = 5 * T * C                              // norm1 over all tokens
                          + 3 * T * C * C                        // qkv over all tokens
                          + T * C                                // attn @ v (one query)
                          + C * C                                // proj of CLS
                          + (c.tokens_norm ? 5 * T * C : 5 * C)  // norm2
                          + 8 * C * C;                           // mlp of CLS
  flops += static_cast<double>(c.cls_attn_layers) * ca_block;
  flops += 5 * T * C;  // final norm (applied to all tokens officially)
  flops += C * static_cast<double>(c.num_classes);
  return flops;
}

XCiT::XCiT(XCiTConfig config)
    : ClassAttentionBackbone(
          {config.name, config.patch_size, config.embed_dim, config.depth, config.num_heads,
           config.cls_attn_layers, config.num_classes, config.in_chans},
          "XCA", /*unit_queries=*/false),
      config_(std::move(config)) {
  const XCiTConfig& c = config_;
  XDINO_CHECK_ARG(c.depth > 0 && c.cls_attn_layers > 0 && c.num_heads > 0,
                  "XCiT needs depth, cls_attn_layers and num_heads > 0");
  XDINO_CHECK_ARG(c.drop_path_rate >= 0 && c.drop_path_rate < 1,
                  "drop_path_rate must be in [0, 1), got ", c.drop_path_rate);
  const int64_t C = c.embed_dim;
  // The official state_dict order: stem, blocks, norm, head, then the positions.
  register_stem();
  register_blocks(
      [&] {
        return XCABlock(XCABlockOptions(C, c.num_heads)
                            .eta(c.eta)
                            .drop_path_rate(c.drop_path_rate)
                            .attention(c.xca_attention)
                            .kernels(c.layer_kernels));
      },
      [&] {
        return ClassAttentionBlock(
            ClassAttentionBlockOptions(C, c.num_heads).eta(c.eta).tokens_norm(c.tokens_norm));
      });
  register_norm_and_head(nn::LayerNorm(nn::LayerNormOptions({C}).eps(1e-6)));
  register_positions();
  init_weights();
}

double XCiT::flops(int64_t height, int64_t width) const {
  return xcit_flops(config_, height, width);
}

}  // namespace xdino::models
