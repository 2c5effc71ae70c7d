// models::token_norm, XCA's per-channel token norm (models/xcit_layers.h): its value against
// F.normalize's max(|t|_2, 1e-12), its gradient against central finite differences in float64,
// the all-zero vector's gradient (0, as F.normalize's), and that its backward does not depend
// on a wider copy of a half-precision input.
#include <gtest/gtest.h>

#include "models/xcit_layers.h"
#include "tests/support/grad_check.h"

using torch::Tensor;
using xdino::models::token_norm;

TEST(TokenNorm, EqualsTheClampedEuclideanNorm) {
  torch::manual_seed(0);
  const Tensor t = torch::randn({2, 3, 4, 7}, torch::kDouble);
  const Tensor expected = t.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
  EXPECT_TRUE(torch::allclose(token_norm(t, torch::kDouble), expected, 1e-14, 0));
  const Tensor zero = torch::zeros({1, 5}, torch::kDouble);
  EXPECT_EQ(token_norm(zero, torch::kDouble).item<double>(), 1e-12);
}

TEST(TokenNorm, GradientMatchesFiniteDifferences) {
  torch::manual_seed(1);
  const Tensor t = torch::randn({2, 3, 5}, torch::kDouble).requires_grad_(true);
  const Tensor w = torch::randn({2, 3, 1}, torch::kDouble);  // a weighted sum of the norms
  xdino::testing::GradCheckOptions o;
  o.entries_per_tensor = 30;  // every entry
  o.tolerance = 1e-7;
  xdino::testing::expect_gradients_match([&] { return (token_norm(t, torch::kDouble) * w).sum(); },
                                         {{"t", t}}, o);
}

TEST(TokenNorm, AllZeroVectorHasGradientZero) {
  Tensor t = torch::zeros({1, 2, 4}, torch::kDouble);
  t.index_put_({0, 1}, torch::tensor({1.0, -2.0, 0.5, 3.0}, torch::kDouble));
  t.requires_grad_(true);
  token_norm(t, torch::kDouble).sum().backward();
  EXPECT_TRUE(torch::equal(t.grad()[0][0], torch::zeros({4}, torch::kDouble)));
  EXPECT_TRUE(t.grad().isfinite().all().item<bool>());
  EXPECT_TRUE(torch::allclose(t.grad()[0][1], t.detach()[0][1] / t.detach()[0][1].norm()));
}

TEST(TokenNorm, HalfInputAccumulatesInFloatAndGetsAGradientOfItsOwnDtype) {
  torch::manual_seed(2);
  const Tensor ref = torch::randn({3, 64}) * 40;  // squares beyond bfloat16's 8-bit mantissa
  Tensor t = ref.to(torch::kBFloat16).requires_grad_(true);
  const Tensor n = token_norm(t, torch::kFloat);
  EXPECT_EQ(n.scalar_type(), torch::kFloat);
  const Tensor exact = t.detach().to(torch::kDouble).norm(2, {-1}, true);
  EXPECT_TRUE(torch::allclose(n.to(torch::kDouble), exact, 1e-6, 0));
  n.sum().backward();
  EXPECT_EQ(t.grad().scalar_type(), torch::kBFloat16);
  const Tensor expected = t.detach().to(torch::kFloat) / n.detach();
  EXPECT_TRUE(torch::allclose(t.grad().to(torch::kFloat), expected, 1e-2, 1e-3));
}
