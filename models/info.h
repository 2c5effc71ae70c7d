// What `dino info` reports about an architecture: exact parameter count, fvcore FLOPs, widths
// and the token grid at a resolution.
//
// Contract: describe(options) builds the named backbone (BackboneOptions from the fields
// below), counts its parameters (BN running statistics excluded, no classifier) and evaluates
// its analytic FLOP count for one image of image_size. image_size is {S} (S x S) or {H, W}.
// Unknown arch or a bad size: xdino::UsageError. format_info renders the report, one
// "key: value" line per item.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xdino::models {

struct InfoOptions {
  std::string arch = "xcit_small_12_p16";
  int64_t patch_size = 16;                  // ViT only; XCiT names carry their patch size
  std::vector<int64_t> image_size = {224};  // one value (square) or two (H W)
};

struct ModelInfo {
  std::string arch;
  int64_t height = 0, width = 0;
  int64_t parameters = 0;
  double flops = 0;  // fvcore convention, one multiply-add = 1
  int64_t embed_dim = 0, num_heads = 0, num_blocks = 0, patch_size = 0;
  int64_t grid_rows = 0, grid_cols = 0;
  std::vector<std::string> notes;  // family-specific "key: value" lines (X-ViT: its table)
};

ModelInfo describe(const InfoOptions& options);

std::string format_info(const ModelInfo& info);

}  // namespace xdino::models
