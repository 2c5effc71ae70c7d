// Naive float64 references of the XCiT layers (docs/architecture.md, "XCiT"), written from the
// official semantics with loops and plain matmuls, independent of models/xcit_layers.cpp; plus
// helpers to read a module's parameters and to fill them with random, non-trivial values.
//
// Contract: parameters are looked up by their official names under `prefix` in a Params map
// (float64 copies). Activations are float64: x (B, N, C) patch tokens, (B, T, C) with CLS
// first for class attention. BatchNorm runs with running statistics (eval mode).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace xdino::testing::naive {

using Params = std::map<std::string, torch::Tensor>;

// Every parameter and buffer of `m` by name, as float64 copies.
Params params_of(const torch::nn::Module& m);
// The module's (key, tensor) pairs in PyTorch state_dict order: own parameters, own buffers,
// then children recursively.
std::vector<std::pair<std::string, torch::Tensor>> state_entries(const torch::nn::Module& m);
// Fills parameters and buffers with seeded random values: matrices ~ N(0, 1/fan_in), biases
// U(-0.3, 0.3), 1-D scales (norm weights, gammas, temperature) U(0.5, 1.5), running means
// U(-0.3, 0.3), running variances U(0.5, 1.5).
void randomize(torch::nn::Module& m, uint64_t seed);

torch::Tensor mlp(const torch::Tensor& x, const Params& p, const std::string& prefix);
// XCA output and, optionally, the per-token norms ||q_n||, ||q^_n||, ||k_n||, ||k^_n||, each
// (B, h, N).
struct XcaNorms {
  torch::Tensor q_raw, k_raw, q_hat, k_hat;
};
torch::Tensor xca(const torch::Tensor& x, const Params& p, const std::string& prefix, int64_t heads,
                  XcaNorms* norms = nullptr);
torch::Tensor lpi(const torch::Tensor& x, const Params& p, const std::string& prefix, int64_t rows,
                  int64_t cols);
torch::Tensor xca_block(const torch::Tensor& x, const Params& p, const std::string& prefix,
                        int64_t heads, int64_t rows, int64_t cols);
// Class-attention block with the official quirks; `attention` gets (B, h, T).
torch::Tensor class_attention_block(const torch::Tensor& x, const Params& p,
                                    const std::string& prefix, int64_t heads, bool tokens_norm,
                                    torch::Tensor* attention = nullptr);
// The 64 Fourier features per token, (rows*cols, 64), straight from the formula.
torch::Tensor fourier_features(int64_t rows, int64_t cols);
torch::Tensor positional_encoding(const Params& p, const std::string& prefix, int64_t rows,
                                  int64_t cols);  // (1, N, C)
// images (B, 3, H, W) -> tokens (B, N, C) and grid.
std::pair<torch::Tensor, std::pair<int64_t, int64_t>> conv_patch_embed(const torch::Tensor& images,
                                                                       const Params& p,
                                                                       const std::string& prefix,
                                                                       int64_t units);
// The whole model (eval mode): final-normed CLS (B, C).
torch::Tensor xcit(const torch::Tensor& images, const Params& p, int64_t patch, int64_t depth,
                   int64_t heads, bool tokens_norm, int64_t cls_layers = 2);

}  // namespace xdino::testing::naive
