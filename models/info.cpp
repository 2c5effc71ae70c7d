#include "models/info.h"

#include <cstdio>
#include <sstream>

#include "core/check.h"
#include "models/registry.h"

namespace xdino::models {

ModelInfo describe(const InfoOptions& options) {
  const auto& size = options.image_size;
  XDINO_CHECK_ARG(size.size() == 1 || size.size() == 2,
                  "--image_size takes one value (square) or two (H W), got ", size.size());
  ModelInfo info;
  info.height = size[0];
  info.width = size.size() == 2 ? size[1] : size[0];
  XDINO_CHECK_ARG(info.height > 0 && info.width > 0, "--image_size must be positive, got ",
                  info.height, "x", info.width);
  BackboneOptions backbone_options;
  backbone_options.patch_size = options.patch_size;
  const auto model = create_backbone(options.arch, backbone_options);
  info.arch = model->arch();
  XDINO_CHECK_ARG(info.height >= model->patch_size() && info.width >= model->patch_size(),
                  "--image_size ", info.height, "x", info.width, " is smaller than one ",
                  model->patch_size(), "x", model->patch_size(), " patch");
  info.parameters = model->num_parameters();
  info.flops = model->flops(info.height, info.width);
  info.embed_dim = model->embed_dim();
  info.num_heads = model->num_heads();
  info.num_blocks = model->num_blocks();
  info.patch_size = model->patch_size();
  std::tie(info.grid_rows, info.grid_cols) = model->token_grid(info.height, info.width);
  info.notes = model->info_lines();
  return info;
}

std::string format_info(const ModelInfo& i) {
  char millions[32], gflops[32];
  std::snprintf(millions, sizeof(millions), "%.3f", i.parameters / 1e6);
  std::snprintf(gflops, sizeof(gflops), "%.2f", i.flops / 1e9);
  std::ostringstream os;
  os << "arch: " << i.arch << "\n"
     << "image size: " << i.height << " x " << i.width << "\n"
     << "parameters: " << i.parameters << " (" << millions << "M)\n"
     << "GFLOPs: " << gflops << " (" << static_cast<int64_t>(i.flops)
     << " FLOPs, fvcore convention: one multiply-add = 1)\n"
     << "embed dim: " << i.embed_dim << "\n"
     << "heads: " << i.num_heads << "\n"
     << "blocks: " << i.num_blocks << "\n"
     << "patch size: " << i.patch_size << "\n"
     << "token grid: " << i.grid_rows << " x " << i.grid_cols << " (" << i.grid_rows * i.grid_cols
     << " patch tokens)\n";
  for (const std::string& note : i.notes) os << note << "\n";
  return os.str();
}

}  // namespace xdino::models
