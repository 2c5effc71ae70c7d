// Schedules against the closed-form formulas of utils.cosine_scheduler (docs/dino.md).
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "train/schedules.h"

using xdino::train::cosine_schedule;

TEST(Schedules, WarmupIsInclusiveLinspace) {
  // 2 warmup epochs x 5 iterations: linspace(0, base, 10); the 10th value is exactly base.
  const auto s = cosine_schedule(0.002, 1e-6, 10, 5, 2);
  ASSERT_EQ(s.size(), 50u);
  EXPECT_DOUBLE_EQ(s[0], 0.0);
  EXPECT_DOUBLE_EQ(s[9], 0.002);
  EXPECT_NEAR(s[4], 4 * 0.002 / 9, 1e-15);
}

TEST(Schedules, CosinePartMatchesFormula) {
  const double base = 0.002, final = 1e-6, pi = std::acos(-1.0);
  const auto s = cosine_schedule(base, final, 10, 5, 2);
  const int L = 40;  // 50 iterations - 10 warmup
  for (int i : {0, 1, 17, 39}) {
    const double expect = final + 0.5 * (base - final) * (1 + std::cos(pi * i / L));
    EXPECT_NEAR(s[10 + i], expect, 1e-18) << "i=" << i;
  }
  EXPECT_DOUBLE_EQ(s[10], base);
  EXPECT_GT(s.back(), final) << "denominator L, not L-1: never reaches final";
}

TEST(Schedules, WeightDecayAndMomentumHaveNoWarmup) {
  const auto wd = cosine_schedule(0.04, 0.4, 3, 4);
  EXPECT_DOUBLE_EQ(wd[0], 0.04);
  EXPECT_LT(wd.back(), 0.4);
  EXPECT_NEAR(wd.back(), 0.4 - 0.5 * 0.36 * (1 - std::cos(std::acos(-1.0) / 12)), 1e-15);
  const auto m = cosine_schedule(0.996, 1.0, 3, 4);
  for (size_t i = 1; i < m.size(); ++i) EXPECT_GT(m[i], m[i - 1]);
}

TEST(Schedules, BadArgumentsAreUsageErrors) {
  EXPECT_THROW(cosine_schedule(1, 0, 5, 10, 6), xdino::UsageError);
}
