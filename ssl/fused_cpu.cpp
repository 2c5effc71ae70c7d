#include "ssl/fused_cpu.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <initializer_list>

namespace xdino::ssl {
namespace {

constexpr int64_t kGrain = 1 << 15;

bool fusable(std::initializer_list<const torch::Tensor*> ts) {
  const int64_t n = (*ts.begin())->numel();
  for (const torch::Tensor* t : ts)
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != torch::kFloat ||
        !t->is_contiguous() || t->numel() != n)
      return false;
  return true;
}

}  // namespace

bool fused_adamw(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v,
                 const AdamWStep& s) {
  if (!fusable({&p, &g, &m, &v})) return false;
  const float decay = static_cast<float>(1.0 - s.lr * s.weight_decay);
  const float b1 = static_cast<float>(s.beta1), one_minus_b1 = static_cast<float>(1.0 - s.beta1);
  const float b2 = static_cast<float>(s.beta2), one_minus_b2 = static_cast<float>(1.0 - s.beta2);
  const double t = static_cast<double>(s.step);
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(s.beta2, t)));
  const float neg_step = static_cast<float>(-(s.lr / (1.0 - std::pow(s.beta1, t))));
  const float eps = static_cast<float>(s.eps);
  float* pp = p.data_ptr<float>();
  const float* gp = g.data_ptr<float>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  at::parallel_for(0, p.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float gi = gp[i];
      const float mi = mp[i] * b1 + one_minus_b1 * gi;
      const float vi = vp[i] * b2 + one_minus_b2 * gi * gi;
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      mp[i] = mi;
      vp[i] = vi;
      pp[i] = pp[i] * decay + neg_step * mi / denom;  // addcdiv: self + value * t1 / t2
    }
  });
  return true;
}

bool fused_ema(torch::Tensor& t, const torch::Tensor& s, double momentum) {
  if (!fusable({&t, &s})) return false;
  const float m = static_cast<float>(momentum), one_minus_m = static_cast<float>(1.0 - momentum);
  float* tp = t.data_ptr<float>();
  const float* sp = s.data_ptr<float>();
  at::parallel_for(0, t.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) tp[i] = tp[i] * m + one_minus_m * sp[i];
  });
  return true;
}

}  // namespace xdino::ssl
