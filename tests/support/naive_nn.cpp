#include "tests/support/naive_nn.h"

#include <cmath>

namespace xdino::testing::naive {

using torch::Tensor;

Tensor f64(const Tensor& t) { return t.detach().to(torch::kCPU, torch::kDouble).contiguous(); }

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor y = torch::matmul(f64(x), f64(weight).t());
  return bias.defined() ? y + f64(bias) : y;
}

Tensor gelu(const Tensor& x) {
  Tensor y = f64(x).clone();
  auto* p = y.data_ptr<double>();
  for (int64_t i = 0; i < y.numel(); ++i)
    p[i] = 0.5 * p[i] * (1.0 + std::erf(p[i] / std::sqrt(2.0)));
  return y;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  Tensor in = f64(x);
  const int64_t C = in.size(-1), rows = in.numel() / C;
  Tensor out = torch::empty_like(in);
  const Tensor w = f64(weight), b = f64(bias);
  const double *src = in.data_ptr<double>(), *pw = w.data_ptr<double>(), *pb = b.data_ptr<double>();
  double* dst = out.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mean += src[r * C + c];
    mean /= C;
    for (int64_t c = 0; c < C; ++c) var += (src[r * C + c] - mean) * (src[r * C + c] - mean);
    var /= C;
    for (int64_t c = 0; c < C; ++c)
      dst[r * C + c] = (src[r * C + c] - mean) / std::sqrt(var + eps) * pw[c] + pb[c];
  }
  return out;
}

Tensor softmax(const Tensor& x) {
  Tensor in = f64(x);
  const int64_t C = in.size(-1), rows = in.numel() / C;
  Tensor out = torch::empty_like(in);
  const double* src = in.data_ptr<double>();
  double* dst = out.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double mx = src[r * C];
    for (int64_t c = 1; c < C; ++c) mx = std::max(mx, src[r * C + c]);
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(src[r * C + c] - mx);
    for (int64_t c = 0; c < C; ++c) dst[r * C + c] = std::exp(src[r * C + c] - mx) / sum;
  }
  return out;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
              int64_t padding, int64_t groups) {
  const Tensor in = f64(x), w = f64(weight);
  const int64_t B = in.size(0), H = in.size(2), W = in.size(3);
  const int64_t Co = w.size(0), Cg = w.size(1), kh = w.size(2), kw = w.size(3);
  const int64_t Ho = (H + 2 * padding - kh) / stride + 1, Wo = (W + 2 * padding - kw) / stride + 1;
  const int64_t per_group_out = Co / groups;
  Tensor out = torch::zeros({B, Co, Ho, Wo}, torch::kDouble);
  auto X = in.accessor<double, 4>();
  auto K = w.accessor<double, 4>();
  auto Y = out.accessor<double, 4>();
  const Tensor bvec = bias.defined() ? f64(bias) : torch::zeros({Co}, torch::kDouble);
  auto bias_of = bvec.accessor<double, 1>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < Co; ++o) {
      const int64_t g = o / per_group_out;
      for (int64_t r = 0; r < Ho; ++r)
        for (int64_t c = 0; c < Wo; ++c) {
          double s = bias_of[o];
          for (int64_t i = 0; i < Cg; ++i)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v) {
                const int64_t rr = r * stride - padding + u, cc = c * stride - padding + v;
                if (rr < 0 || rr >= H || cc < 0 || cc >= W) continue;
                s += X[b][g * Cg + i][rr][cc] * K[o][i][u][v];
              }
          Y[b][o][r][c] = s;
        }
    }
  return out;
}

Tensor batch_norm_eval(const Tensor& x, const Tensor& mean, const Tensor& var, const Tensor& weight,
                       const Tensor& bias, double eps) {
  Tensor out = f64(x).clone();
  auto Y = out.accessor<double, 4>();
  const Tensor m = f64(mean), v = f64(var), w = f64(weight), b = f64(bias);
  for (int64_t n = 0; n < out.size(0); ++n)
    for (int64_t c = 0; c < out.size(1); ++c) {
      const double scale = w[c].item<double>() / std::sqrt(v[c].item<double>() + eps);
      const double shift = b[c].item<double>() - m[c].item<double>() * scale;
      for (int64_t r = 0; r < out.size(2); ++r)
        for (int64_t q = 0; q < out.size(3); ++q) Y[n][c][r][q] = Y[n][c][r][q] * scale + shift;
    }
  return out;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return (f64(a) - f64(b)).abs().max().item<double>();
}

}  // namespace xdino::testing::naive
