#include "models/init.h"

#include <cmath>

#include "core/check.h"

namespace xdino::models {

torch::Tensor& trunc_normal_(torch::Tensor& t, double mean, double std, double a, double b) {
  XDINO_CHECK(std > 0 && a < b, "trunc_normal_ needs std > 0 and a < b, got std=", std, " a=", a,
              " b=", b);
  torch::NoGradGuard no_grad;
  // Inverse-CDF sampling: uniform on [cdf(a), cdf(b)], mapped back through erfinv.
  const auto cdf = [](double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); };
  const double lo = cdf((a - mean) / std);
  const double hi = cdf((b - mean) / std);
  if (lo < 1e-15 && hi > 1.0 - 1e-15) {
    // Bounds beyond ~8 std (the usual std 0.02 with bounds +-2 is 100 std): the truncation
    // changes the distribution by less than double precision, and normal_ is ~10x faster.
    t.normal_(mean, std).clamp_(a, b);
    return t;
  }
  // Sampled in float64 so that the tails stay exact for any tensor dtype.
  auto u = torch::empty(t.sizes(), torch::TensorOptions().dtype(torch::kDouble));
  u.uniform_(2.0 * lo - 1.0, 2.0 * hi - 1.0);
  u.erfinv_().mul_(std * std::sqrt(2.0)).add_(mean).clamp_(a, b);
  t.copy_(u);
  return t;
}

void init_linear_and_layernorm(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  module.apply([](torch::nn::Module& m) {
    if (auto* linear = m.as<torch::nn::Linear>()) {
      trunc_normal_(linear->weight, 0.0, 0.02, -2.0, 2.0);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* norm = m.as<torch::nn::LayerNorm>()) {
      if (norm->weight.defined()) norm->weight.fill_(1.0);
      if (norm->bias.defined()) norm->bias.zero_();
    }
  });
}

}  // namespace xdino::models
