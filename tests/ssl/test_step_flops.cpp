// The step's FLOP count (ssl/step_flops.h) against the count done by hand, layer by layer, in
// docs/flops.md for XCiT-S12/16 at DINO's defaults (batch 64, 2 x 224 + 8 x 96 crops, out_dim
// 65536): 4.853 GMAC per 224-pixel crop, 0.894 per 96-pixel crop (matrix products and
// convolutions only), 22.28 M for the head, 7.80 TFLOP per step. Our count reads each module's
// own numbers (Backbone::flops, fvcore's convention, which also counts a few small products
// the hand count leaves out), so the two agree to a stated 1%, not to the digit.
#include <gtest/gtest.h>

#include "core/check.h"
#include "models/registry.h"
#include "ssl/step_flops.h"

using xdino::ssl::DINOHeadOptions;

TEST(StepFlops, HeadCountsEveryLinearLayer) {
  DINOHeadOptions h;  // 384 -> 2048 -> 2048 -> 256, then 256 -> 65536
  h.in_dim = 384;
  h.out_dim = 65536;
  EXPECT_EQ(xdino::ssl::head_macs(h), 384.0 * 2048 + 2048.0 * 2048 + 2048.0 * 256 + 256.0 * 65536);
  EXPECT_EQ(xdino::ssl::head_macs(h), 22282240.0);
  h.nlayers = 1;  // one Linear straight to the bottleneck
  EXPECT_EQ(xdino::ssl::head_macs(h), 384.0 * 256 + 256.0 * 65536);
  h.nlayers = 4;  // two hidden-to-hidden layers
  EXPECT_EQ(xdino::ssl::head_macs(h),
            384.0 * 2048 + 2 * 2048.0 * 2048 + 2048.0 * 256 + 256.0 * 65536);
  h.nlayers = 0;
  EXPECT_THROW(xdino::ssl::head_macs(h), xdino::UsageError);
}

TEST(StepFlops, XcitSmallStepMatchesTheHandCount) {
  const auto backbone = xdino::models::create_backbone("xcit_small_12_p16");
  // docs/flops.md, per crop (multiply-adds of products and convolutions).
  EXPECT_NEAR(backbone->flops(224, 224) / 4.853e9, 1.0, 0.01);
  EXPECT_NEAR(backbone->flops(96, 96) / 0.894e9, 1.0, 0.01);

  DINOHeadOptions head;
  head.in_dim = backbone->embed_dim();
  head.out_dim = 65536;
  const xdino::CropSizes crops;  // main_dino.py's: 2 x 224, 8 x 96
  const auto f = xdino::ssl::dino_step_flops(*backbone, head, crops, 64);
  EXPECT_NEAR(f.total() / 7.80e12, 1.0, 0.01);
  EXPECT_NEAR(f.per_image() / 121.9e9, 1.0, 0.01);
  // The parts, each against its own definition.
  EXPECT_DOUBLE_EQ(f.student_backward, 2 * f.student_forward);
  const double global = 2.0 * (backbone->flops(224, 224) + xdino::ssl::head_macs(head));
  EXPECT_DOUBLE_EQ(f.teacher_forward, 64 * 2 * global);
  EXPECT_GT(f.student_forward, f.teacher_forward);  // the 8 local crops

  // Twice the batch, twice the work; a head of another width is refused.
  EXPECT_DOUBLE_EQ(xdino::ssl::dino_step_flops(*backbone, head, crops, 128).total(), 2 * f.total());
  head.in_dim = 192;
  EXPECT_THROW(xdino::ssl::dino_step_flops(*backbone, head, crops, 64), xdino::UsageError);
}
