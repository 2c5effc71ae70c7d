// Naive float64 reference implementations of the neural-network operations the models use,
// written with explicit loops (or plain matmuls) for tests to compare against.
//
// Contract: every function takes and returns float64 CPU tensors (inputs of another dtype are
// converted first) and follows the textbook definition; speed is irrelevant (tiny inputs).
#pragma once

#include <torch/torch.h>

#include <string>

namespace xdino::testing::naive {

torch::Tensor f64(const torch::Tensor& t);  // detached float64 CPU copy

// y = x W^T + b over the last dim.
torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias);
// Exact GELU: x * Phi(x).
torch::Tensor gelu(const torch::Tensor& x);
// LayerNorm over the last dim, biased variance, eps inside the square root.
torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps);
// Softmax over the last dim.
torch::Tensor softmax(const torch::Tensor& x);
// 2-D convolution (B, Ci, H, W) with weight (Co, Ci/groups, kh, kw), zero padding.
torch::Tensor conv2d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     int64_t stride, int64_t padding, int64_t groups);
// Eval-mode BatchNorm2d with running statistics.
torch::Tensor batch_norm_eval(const torch::Tensor& x, const torch::Tensor& mean,
                              const torch::Tensor& var, const torch::Tensor& weight,
                              const torch::Tensor& bias, double eps);

// Max |a - b| after converting both to float64.
double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace xdino::testing::naive
