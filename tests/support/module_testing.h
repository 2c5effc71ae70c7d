// Small helpers for tests of layers against naive references (tests/support/naive_*.h).
//
// Contract: expect_close(got, want, tol, what) fails (GoogleTest) unless the shapes agree and
// max |got - want| <= tol * max(1, max |want|), both compared in float64. prepared(m, dtype,
// seed) converts a module holder to `dtype`, fills it with naive::randomize(seed) values and
// puts it in eval mode, returning it.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "tests/support/naive_nn.h"
#include "tests/support/naive_xcit.h"

namespace xdino::testing {

inline void expect_close(const torch::Tensor& got, const torch::Tensor& want, double tol,
                         const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double scale = std::max(1.0, naive::f64(want).abs().max().item<double>());
  EXPECT_LE(naive::max_abs_diff(got, want), tol * scale) << what;
}

template <typename M>
M prepared(M m, torch::Dtype dtype, uint64_t seed) {
  m->to(dtype);
  naive::randomize(*m, seed);
  m->eval();
  return m;
}

}  // namespace xdino::testing
