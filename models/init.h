// Weight initialisation shared by the backbones (and usable by heads): timm's trunc_normal_
// and the "Linear: truncated normal, LayerNorm: 1/0" pass of the official models.
//
// Contract:
//  - trunc_normal_(t, mean, std, a, b) fills `t` in place (no autograd) with samples of
//    N(mean, std^2) conditioned on [a, b]; a and b are ABSOLUTE bounds, as in timm (so
//    std 0.02 with a=-2, b=2 is an untruncated normal in practice). Draws from the global
//    torch generator. Throws xdino::Error for std <= 0 or a >= b.
//  - init_linear_and_layernorm(module) visits `module` and every descendant: Linear weights
//    get trunc_normal_(std 0.02), Linear biases 0, LayerNorm weight 1 and bias 0. Other
//    modules keep LibTorch's defaults (which equal PyTorch's for Conv2d and BatchNorm).
#pragma once

#include <torch/torch.h>

namespace xdino::models {

torch::Tensor& trunc_normal_(torch::Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0,
                             double b = 2.0);

void init_linear_and_layernorm(torch::nn::Module& module);

}  // namespace xdino::models
