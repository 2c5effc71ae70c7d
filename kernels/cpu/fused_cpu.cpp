// Built without the shared precompiled header and with -fno-math-errno (kernels/CMakeLists.txt)
// so that GCC vectorises the loops, including sqrt; target_clones adds an AVX2 version picked
// at load time. No FMA is enabled, so every operation rounds exactly as the scalar code says.
#include "kernels/cpu/fused_cpu.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <initializer_list>

namespace xdino::kernels {
namespace {

constexpr int64_t kGrain = 1 << 15;

__attribute__((target_clones("avx2", "default"))) void adamw_kernel(
    float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
    int64_t n, float decay, float b1, float one_minus_b1, float b2, float one_minus_b2,
    float bc2_sqrt, float neg_step, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * b1 + one_minus_b1 * gi;
    const float vi = v[i] * b2 + one_minus_b2 * gi * gi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay + neg_step * mi / denom;  // addcdiv: self + value * t1 / t2
  }
}

__attribute__((target_clones("avx2", "default"))) void ema_kernel(float* __restrict t,
                                                                  const float* __restrict s,
                                                                  int64_t n, float m,
                                                                  float one_minus_m) {
  for (int64_t i = 0; i < n; ++i) t[i] = t[i] * m + one_minus_m * s[i];
}

bool fusable(std::initializer_list<const at::Tensor*> ts) {
  const int64_t n = (*ts.begin())->numel();
  for (const at::Tensor* t : ts)
    if (!t->defined() || !t->device().is_cpu() || t->scalar_type() != at::kFloat ||
        !t->is_contiguous() || t->numel() != n)
      return false;
  return true;
}

}  // namespace

bool fused_cpu_applies(at::ArrayRef<at::Tensor> tensors) {
  for (const at::Tensor& t : tensors)
    if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != at::kFloat || !t.is_contiguous())
      return false;
  return true;
}

bool fused_adamw(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v,
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
    adamw_kernel(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, decay, b1,
                 one_minus_b1, b2, one_minus_b2, bc2_sqrt, neg_step, eps);
  });
  return true;
}

bool fused_ema(at::Tensor& t, const at::Tensor& s, double momentum) {
  if (!fusable({&t, &s})) return false;
  const float m = static_cast<float>(momentum), one_minus_m = static_cast<float>(1.0 - momentum);
  float* tp = t.data_ptr<float>();
  const float* sp = s.data_ptr<float>();
  at::parallel_for(0, t.numel(), kGrain, [&](int64_t begin, int64_t end) {
    ema_kernel(tp + begin, sp + begin, end - begin, m, one_minus_m);
  });
  return true;
}

}  // namespace xdino::kernels
