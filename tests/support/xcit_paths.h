// A seeded XCiT-N4/4's output and parameter gradients on one LayerKernels path, for the tests
// that hold a path of kernels/ against torch's ops (tests/kernels/).
//
// Contract: xcit_on_path(kernels, run) builds xcit_nano_4_p4 (no head, stochastic depth 0.1)
// from seed 21 on run.device in run.dtype, in training or eval mode, takes 4 seeded images of
// run.img_size pixels and seeded weights (the same on every path), runs the forward under
// bfloat16 autocast where asked with the same stochastic-depth draws (seed 5), and the
// backward of (output . weights), and returns {output, each parameter's gradient} (undefined
// for a parameter that got none). Throws what the model throws.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "core/compat.h"
#include "models/layers.h"
#include "models/registry.h"

namespace xdino::testing {

struct XcitRun {
  torch::Device device = torch::kCPU;
  torch::Dtype dtype = torch::kFloat;
  int64_t img_size = 28;
  bool training = true;
  bool bf16_autocast = false;
};

inline std::vector<torch::Tensor> xcit_on_path(models::LayerKernels kernels, const XcitRun& run) {
  models::BackboneOptions o;
  o.num_classes = 0;
  o.img_size = run.img_size;
  o.drop_path_rate = 0.1;
  o.layer_kernels = kernels;
  torch::manual_seed(21);
  auto model = models::create_backbone("xcit_nano_4_p4", o);
  model->to(run.device, run.dtype);
  model->train(run.training);
  torch::manual_seed(22);
  const auto on = torch::TensorOptions().device(run.device).dtype(run.dtype);
  const torch::Tensor images = torch::randn({4, 3, run.img_size, run.img_size}).to(on);
  const torch::Tensor weights = torch::randn({4, 128}).to(on);
  torch::Tensor y;
  {
    compat::AutocastGuard guard(run.device.type(), torch::kBFloat16, run.bf16_autocast);
    torch::manual_seed(5);  // the same stochastic-depth draws on every path
    y = model->forward(images);
  }
  // Not y^2: a LayerNorm's output has a fixed sum of squares, whose gradient is noise.
  (y.to(run.dtype) * weights).sum().backward();
  std::vector<torch::Tensor> out{y.detach()};
  for (const auto& p : model->named_parameters()) out.push_back(p.value().grad());
  return out;
}

}  // namespace xdino::testing
