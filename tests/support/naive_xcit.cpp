#include "tests/support/naive_xcit.h"

#include <cmath>

#include "tests/support/naive_nn.h"

namespace xdino::testing::naive {

using torch::Tensor;

Params params_of(const torch::nn::Module& m) {
  Params p;
  for (const auto& item : m.named_parameters()) p[item.key()] = f64(item.value());
  for (const auto& item : m.named_buffers()) p[item.key()] = f64(item.value());
  return p;
}

std::vector<std::pair<std::string, Tensor>> state_entries(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& item : m.named_modules("", /*include_self=*/true)) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false))
      out.emplace_back(prefix + p.key(), p.value());
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false))
      out.emplace_back(prefix + b.key(), b.value());
  }
  return out;
}

void randomize(torch::nn::Module& m, uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(seed);
  for (auto& item : m.named_parameters()) {
    Tensor t = item.value();
    const std::string& k = item.key();
    const bool is_bias = k.size() >= 4 && k.compare(k.size() - 4, 4, "bias") == 0;
    if (t.dim() >= 2 && t.size(0) > 1 && t.numel() / t.size(0) > 1) {
      t.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(t.numel() / t.size(0))));
    } else if (is_bias) {
      t.uniform_(-0.3, 0.3);
    } else {
      t.uniform_(0.5, 1.5);  // norm weights, gammas, temperature, cls_token-like vectors
    }
  }
  for (auto& item : m.named_buffers()) {
    Tensor t = item.value();
    const std::string& k = item.key();
    if (k.find("running_mean") != std::string::npos) t.uniform_(-0.3, 0.3);
    if (k.find("running_var") != std::string::npos) t.uniform_(0.5, 1.5);
  }
}

Tensor mlp(const Tensor& x, const Params& p, const std::string& pre) {
  const Tensor h = naive::gelu(naive::linear(x, p.at(pre + "fc1.weight"), p.at(pre + "fc1.bias")));
  return naive::linear(h, p.at(pre + "fc2.weight"), p.at(pre + "fc2.bias"));
}

Tensor xca(const Tensor& x, const Params& p, const std::string& pre, int64_t heads,
           XcaNorms* norms) {
  const int64_t B = x.size(0), N = x.size(1), C = x.size(2), d = C / heads;
  const Tensor qkv = naive::linear(x, p.at(pre + "qkv.weight"), p.at(pre + "qkv.bias"));
  auto Q = qkv.accessor<double, 3>();
  auto tau = p.at(pre + "temperature").accessor<double, 3>();
  Tensor out = torch::zeros({B, N, C}, torch::kDouble);
  auto O = out.accessor<double, 3>();
  if (norms) {
    for (Tensor* t : {&norms->q_raw, &norms->k_raw, &norms->q_hat, &norms->k_hat})
      *t = torch::zeros({B, heads, N}, torch::kDouble);
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      // q_i, k_i: channel i of head h over the N tokens; normalised over tokens.
      std::vector<double> nq(d), nk(d);
      for (int64_t i = 0; i < d; ++i) {
        double sq = 0, sk = 0;
        for (int64_t n = 0; n < N; ++n) {
          sq += Q[b][n][h * d + i] * Q[b][n][h * d + i];
          sk += Q[b][n][C + h * d + i] * Q[b][n][C + h * d + i];
        }
        nq[i] = std::max(std::sqrt(sq), 1e-12);
        nk[i] = std::max(std::sqrt(sk), 1e-12);
      }
      std::vector<double> A(d * d);
      for (int64_t i = 0; i < d; ++i) {
        double mx = -1e300;
        for (int64_t j = 0; j < d; ++j) {
          double s = 0;
          for (int64_t n = 0; n < N; ++n)
            s += Q[b][n][h * d + i] / nq[i] * Q[b][n][C + h * d + j] / nk[j];
          A[i * d + j] = tau[h][0][0] * s;
          mx = std::max(mx, A[i * d + j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < d; ++j) sum += (A[i * d + j] = std::exp(A[i * d + j] - mx));
        for (int64_t j = 0; j < d; ++j) A[i * d + j] /= sum;
      }
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < d; ++i) {
          double s = 0;
          for (int64_t j = 0; j < d; ++j) s += A[i * d + j] * Q[b][n][2 * C + h * d + j];
          O[b][n][h * d + i] = s;
        }
      if (norms) {
        for (int64_t n = 0; n < N; ++n) {
          double qr = 0, kr = 0, qh = 0, kh = 0;
          for (int64_t i = 0; i < d; ++i) {
            const double q = Q[b][n][h * d + i], k = Q[b][n][C + h * d + i];
            qr += q * q;
            kr += k * k;
            qh += (q / nq[i]) * (q / nq[i]);
            kh += (k / nk[i]) * (k / nk[i]);
          }
          norms->q_raw[b][h][n] = std::sqrt(qr);
          norms->k_raw[b][h][n] = std::sqrt(kr);
          norms->q_hat[b][h][n] = std::sqrt(qh);
          norms->k_hat[b][h][n] = std::sqrt(kh);
        }
      }
    }
  return naive::linear(out, p.at(pre + "proj.weight"), p.at(pre + "proj.bias"));
}

namespace {

// (B, N, C) tokens <-> (B, C, rows, cols) image, with loops.
Tensor to_image(const Tensor& x, int64_t rows, int64_t cols) {
  const int64_t B = x.size(0), C = x.size(2);
  Tensor img = torch::zeros({B, C, rows, cols}, torch::kDouble);
  auto X = x.accessor<double, 3>();
  auto I = img.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t q = 0; q < cols; ++q) I[b][c][r][q] = X[b][r * cols + q][c];
  return img;
}

Tensor to_tokens(const Tensor& img) {
  const int64_t B = img.size(0), C = img.size(1), rows = img.size(2), cols = img.size(3);
  Tensor x = torch::zeros({B, rows * cols, C}, torch::kDouble);
  auto X = x.accessor<double, 3>();
  auto I = img.accessor<double, 4>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t q = 0; q < cols; ++q) X[b][r * cols + q][c] = I[b][c][r][q];
  return x;
}

Tensor ln(const Tensor& x, const Params& p, const std::string& name) {
  return naive::layer_norm(x, p.at(name + ".weight"), p.at(name + ".bias"), 1e-6);
}

Tensor bn(const Tensor& x, const Params& p, const std::string& name) {
  return naive::batch_norm_eval(x, p.at(name + ".running_mean"), p.at(name + ".running_var"),
                                p.at(name + ".weight"), p.at(name + ".bias"), 1e-5);
}

}  // namespace

Tensor lpi(const Tensor& x, const Params& p, const std::string& pre, int64_t rows, int64_t cols) {
  const int64_t C = x.size(2);
  Tensor img = to_image(f64(x), rows, cols);
  img = naive::conv2d(img, p.at(pre + "conv1.weight"), p.at(pre + "conv1.bias"), 1, 1, C);
  img = bn(naive::gelu(img), p, pre + "bn");
  img = naive::conv2d(img, p.at(pre + "conv2.weight"), p.at(pre + "conv2.bias"), 1, 1, C);
  return to_tokens(img);
}

Tensor xca_block(const Tensor& x0, const Params& p, const std::string& pre, int64_t heads,
                 int64_t rows, int64_t cols) {
  Tensor x = f64(x0);
  x = x + p.at(pre + "gamma1") * xca(ln(x, p, pre + "norm1"), p, pre + "attn.", heads);
  x = x + p.at(pre + "gamma3") * lpi(ln(x, p, pre + "norm3"), p, pre + "local_mp.", rows, cols);
  x = x + p.at(pre + "gamma2") * mlp(ln(x, p, pre + "norm2"), p, pre + "mlp.");
  return x;
}

Tensor class_attention_block(const Tensor& x0, const Params& p, const std::string& pre,
                             int64_t heads, bool tokens_norm, Tensor* attention) {
  const Tensor x = f64(x0);
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), d = C / heads;
  const Tensor u = ln(x, p, pre + "norm1");
  const Tensor qkv = naive::linear(u, p.at(pre + "attn.qkv.weight"), p.at(pre + "attn.qkv.bias"));
  auto Q = qkv.accessor<double, 3>();
  Tensor cls = torch::zeros({B, C}, torch::kDouble);
  if (attention) *attention = torch::zeros({B, heads, T}, torch::kDouble);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> a(T);
      double mx = -1e300;
      for (int64_t n = 0; n < T; ++n) {
        double s = 0;
        for (int64_t j = 0; j < d; ++j) s += Q[b][0][h * d + j] * Q[b][n][C + h * d + j];
        a[n] = s / std::sqrt(static_cast<double>(d));
        mx = std::max(mx, a[n]);
      }
      double sum = 0;
      for (int64_t n = 0; n < T; ++n) sum += (a[n] = std::exp(a[n] - mx));
      for (int64_t n = 0; n < T; ++n) {
        a[n] /= sum;
        if (attention) (*attention)[b][h][n] = a[n];
      }
      for (int64_t j = 0; j < d; ++j) {
        double s = 0;
        for (int64_t n = 0; n < T; ++n) s += a[n] * Q[b][n][2 * C + h * d + j];
        cls[b][h * d + j] = s;
      }
    }
  const Tensor y0 =
      naive::linear(cls, p.at(pre + "attn.proj.weight"), p.at(pre + "attn.proj.bias"));
  const Tensor g1 = p.at(pre + "gamma1"), g2 = p.at(pre + "gamma2");
  Tensor out = x.clone();
  // attention output is [y0; u_1..u_N]: the patch rows get gamma1 * norm1(x_n) added.
  out.select(1, 0).copy_(x.select(1, 0) + g1 * y0);
  for (int64_t n = 1; n < T; ++n) out.select(1, n).copy_(x.select(1, n) + g1 * u.select(1, n));
  if (tokens_norm) {
    out = ln(out, p, pre + "norm2");
  } else {
    out.select(1, 0).copy_(ln(out.select(1, 0), p, pre + "norm2"));
  }
  Tensor result = out.clone();
  const Tensor z0 = out.select(1, 0);
  result.select(1, 0).copy_(z0 + g2 * mlp(z0, p, pre + "mlp."));
  for (int64_t n = 1; n < T; ++n) result.select(1, n).copy_(out.select(1, n) + out.select(1, n));
  return result;
}

Tensor fourier_features(int64_t rows, int64_t cols) {
  Tensor f = torch::zeros({rows * cols, 64}, torch::kDouble);
  auto F = f.accessor<double, 2>();
  const double two_pi = 2.0 * std::acos(-1.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double y = (r + 1) / (rows + 1e-6) * two_pi;
      const double x = (c + 1) / (cols + 1e-6) * two_pi;
      for (int64_t j = 0; j < 16; ++j) {
        const double t = std::pow(10000.0, 2.0 * j / 32.0);
        F[r * cols + c][2 * j] = std::sin(y / t);
        F[r * cols + c][2 * j + 1] = std::cos(y / t);
        F[r * cols + c][32 + 2 * j] = std::sin(x / t);
        F[r * cols + c][32 + 2 * j + 1] = std::cos(x / t);
      }
    }
  return f;
}

Tensor positional_encoding(const Params& p, const std::string& pre, int64_t rows, int64_t cols) {
  const Tensor w = p.at(pre + "token_projection.weight");
  return naive::linear(fourier_features(rows, cols), w.reshape({w.size(0), 64}),
                       p.at(pre + "token_projection.bias"))
      .unsqueeze(0);
}

std::pair<Tensor, std::pair<int64_t, int64_t>> conv_patch_embed(const Tensor& images,
                                                                const Params& p,
                                                                const std::string& pre,
                                                                int64_t units) {
  Tensor x = f64(images);
  for (int64_t u = 0; u < units; ++u) {
    const std::string unit = pre + std::to_string(2 * u) + ".";
    x = naive::conv2d(x, p.at(unit + "0.weight"), Tensor(), 2, 1, 1);
    x = bn(x, p, unit + "1");
    if (u + 1 < units) x = naive::gelu(x);
  }
  return {to_tokens(x), {x.size(2), x.size(3)}};
}

Tensor xcit(const Tensor& images, const Params& p, int64_t patch, int64_t depth, int64_t heads,
            bool tokens_norm, int64_t cls_layers) {
  auto [x, grid] = conv_patch_embed(images, p, "patch_embed.proj.",
                                    patch == 16  ? 4
                                    : patch == 8 ? 3
                                                 : 2);
  const auto [rows, cols] = grid;
  x = x + positional_encoding(p, "pos_embeder.", rows, cols);
  for (int64_t i = 0; i < depth; ++i)
    x = xca_block(x, p, "blocks." + std::to_string(i) + ".", heads, rows, cols);
  const int64_t B = x.size(0), C = x.size(2);
  x = torch::cat({p.at("cls_token").expand({B, 1, C}), x}, 1);
  for (int64_t j = 0; j < cls_layers; ++j)
    x = class_attention_block(x, p, "cls_attn_blocks." + std::to_string(j) + ".", heads,
                              tokens_norm);
  return naive::layer_norm(x, p.at("norm.weight"), p.at("norm.bias"), 1e-6).select(1, 0);
}

}  // namespace xdino::testing::naive
