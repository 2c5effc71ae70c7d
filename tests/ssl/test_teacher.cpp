// Teacher initialisation (parameters AND buffers) and the EMA over parameters only
// (docs/dino.md, "Networks"), against float64 arithmetic.
#include <gtest/gtest.h>

#include "core/check.h"
#include "ssl/head.h"
#include "ssl/teacher.h"
#include "tests/support/tiny_backbone.h"

using namespace xdino::ssl;

using xdino::testing::tiny_wrapper;

TEST(Teacher, InitCopiesParametersAndBuffersAndFreezes) {
  torch::manual_seed(0);
  auto student = tiny_wrapper(false);
  auto teacher = tiny_wrapper(true);
  student->train();
  student->forward({torch::randn({4, 3, 8, 8})});  // moves the BN running stats off 0/1
  init_teacher(*student, *teacher);
  const auto sp = student->named_parameters();
  for (const auto& item : teacher->named_parameters()) {
    EXPECT_TRUE(torch::equal(item.value(), sp[item.key()])) << item.key();
    EXPECT_FALSE(item.value().requires_grad()) << item.key();
  }
  const auto sb = student->named_buffers();
  ASSERT_TRUE(sb.contains("backbone.patch_embed.1.running_mean"));
  EXPECT_NE(sb["backbone.patch_embed.1.running_mean"].abs().sum().item<double>(), 0.0);
  for (const auto& item : teacher->named_buffers())
    EXPECT_TRUE(torch::equal(item.value(), sb[item.key()])) << item.key();
  // The student keeps its gradients.
  EXPECT_TRUE(student->named_parameters()["head.last_layer.weight_g"].requires_grad());
}

TEST(Teacher, EmaUpdatesParametersOnlyWithTheGivenMomentum) {
  torch::manual_seed(1);
  auto student = tiny_wrapper(true);
  auto teacher = tiny_wrapper(true);
  init_teacher(*student, *teacher);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : student->parameters())
      if (p.requires_grad()) p.add_(torch::randn_like(p));  // weight_g stays 1 (fixed)
    for (auto& b : student->buffers())
      if (b.is_floating_point()) b.add_(1.0);
  }
  std::map<std::string, torch::Tensor> before;
  for (const auto& item : teacher->named_parameters()) before[item.key()] = item.value().clone();
  std::map<std::string, torch::Tensor> buffers_before;
  for (const auto& item : teacher->named_buffers())
    buffers_before[item.key()] = item.value().clone();

  const double m = 0.9964;
  ema_update(*student, *teacher, m);
  const auto sp = student->named_parameters();
  for (const auto& item : teacher->named_parameters()) {
    const auto expect =
        m * before[item.key()].to(torch::kDouble) + (1 - m) * sp[item.key()].to(torch::kDouble);
    EXPECT_TRUE(torch::allclose(item.value().to(torch::kDouble), expect, 1e-6, 1e-7)) << item.key();
  }
  // weight_g (requires_grad false) follows the EMA and stays 1: 1*m + 1*(1-m).
  const auto g = teacher->named_parameters()["head.last_layer.weight_g"];
  EXPECT_TRUE(torch::allclose(g, torch::ones_like(g), 0, 1e-6));
  for (const auto& item : teacher->named_buffers())
    EXPECT_TRUE(torch::equal(item.value(), buffers_before[item.key()])) << item.key();
}

TEST(Teacher, MismatchedModelsAreErrors) {
  auto student = tiny_wrapper(true);
  auto other = tiny_wrapper(true, /*out_dim=*/9);
  EXPECT_THROW(init_teacher(*student, *other), xdino::Error);
}
