// iBOT's mask token in the backbones (models/backbone.h, "Masked patches"):
//  - the parameter exists only once asked for, under dinov2's name, (1, C) zeros;
//  - an empty mask changes nothing, bit for bit; a mask makes the output depend on the token
//    (and only then), with a gradient that reaches it;
//  - ViT: a masked patch's pixels no longer matter (each patch is embedded alone; XCiT's
//    convolutional stem mixes neighbouring pixels into every embedding, so there it is the
//    embedding that the token replaces, and the pixels still reach the neighbours);
//  - final_patch_tokens: (B, N, C) rows of the final norm (ViT: patch_tokens itself);
//  - ResNets have no patch tokens: add_mask_token refuses in one line;
//  - weights saved with a mask token load into a backbone without one (the evaluations).
#include <gtest/gtest.h>

#include "core/check.h"
#include "core/pth.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tests/support/files.h"

using namespace xdino::models;
using torch::Tensor;

namespace {

std::shared_ptr<Backbone> small(const std::string& arch) {
  torch::manual_seed(0);
  BackboneOptions o;
  o.img_size = 32;
  auto b = create_backbone(arch, o);
  b->eval();
  return b;
}

Tensor mask_for(const Backbone& b, int64_t images, int64_t side) {
  const auto [rows, cols] = b.token_grid(side, side);
  Tensor m = torch::zeros({images, rows * cols}, torch::kBool);
  m.index_put_({0, torch::indexing::Slice(0, 3)}, true);
  m.index_put_({images - 1, rows * cols - 1}, true);
  return m;
}

Probe masked_probe(Backbone& b, const Tensor& x, const Tensor& mask) {
  ProbeRequest r;
  r.token_mask = mask;
  r.final_patch_tokens = true;
  return b.probe(x, r);
}

TEST(TokenMask, TheParameterExistsOnlyWhenAskedFor) {
  for (const char* arch : {"xcit_nano_12_p16", "vit_tiny", "xvit_tiny"}) {
    auto b = small(arch);
    EXPECT_FALSE(state_dict(*b).contains("mask_token")) << arch;
    EXPECT_TRUE(b->supports_token_mask()) << arch;
    b->add_mask_token();
    const StateDict s = state_dict(*b);
    ASSERT_TRUE(s.contains("mask_token")) << arch;
    EXPECT_EQ(s["mask_token"].sizes(), (std::vector<int64_t>{1, b->embed_dim()}));
    EXPECT_EQ(s["mask_token"].abs().max().item<float>(), 0.0f);
  }
}

// The patch rows of the last layer: the class token alone moves by 1e-6 on a freshly
// initialised X-ViT (its layer scales start at 1e-5), so the rows the token enters are compared.
TEST(TokenMask, OnlyAMaskMakesTheOutputDependOnTheToken) {
  for (const char* arch : {"xcit_nano_12_p16", "vit_tiny", "xvit_tiny"}) {
    auto b = small(arch);
    b->add_mask_token();
    torch::NoGradGuard no_grad;
    const Tensor x = torch::randn({2, 3, 32, 32});
    const auto [rows, cols] = b->token_grid(32, 32);
    const Probe none = masked_probe(*b, x, Tensor());
    const Probe empty = masked_probe(*b, x, torch::zeros({2, rows * cols}, torch::kBool));
    EXPECT_TRUE(torch::equal(empty.feature, none.feature)) << arch;
    EXPECT_TRUE(torch::equal(empty.final_patch_tokens, none.final_patch_tokens)) << arch;
    EXPECT_TRUE(torch::equal(none.feature, b->forward(x))) << arch;
    const Tensor mask = mask_for(*b, 2, 32);
    const Tensor with_zeros = masked_probe(*b, x, mask).final_patch_tokens;
    EXPECT_GT((with_zeros - none.final_patch_tokens).abs().max().item<float>(), 1e-2)
        << arch << ": masking changed nothing";
    // The token is a parameter like any other: another value, another output; none without a
    // mask. (Not a constant: a LayerNorm-only stream cannot see c * (1, ..., 1) added.)
    for (auto& p : b->named_parameters())
      if (p.key() == "mask_token") p.value().normal_(0, 1);
    EXPECT_GT((masked_probe(*b, x, mask).final_patch_tokens - with_zeros).abs().max().item<float>(),
              1e-2)
        << arch;
    EXPECT_TRUE(
        torch::equal(masked_probe(*b, x, Tensor()).final_patch_tokens, none.final_patch_tokens))
        << arch;
  }
}

TEST(TokenMask, TheGradientReachesTheToken) {
  for (const char* arch : {"xcit_nano_12_p16", "vit_tiny"}) {
    auto b = small(arch);
    b->add_mask_token();
    const Tensor x = torch::randn({2, 3, 32, 32});
    const Probe p = masked_probe(*b, x, mask_for(*b, 2, 32));
    (p.feature.square().sum() + p.final_patch_tokens.square().sum()).backward();
    for (auto& t : b->named_parameters()) {
      if (t.key() == "mask_token") {
        EXPECT_GT(t.value().grad().abs().max().item<float>(), 0.0f) << arch;
      }
    }
  }
}

TEST(TokenMask, AViTForgetsTheMaskedPatchesPixels) {
  auto b = small("vit_tiny");
  b->add_mask_token();
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({2, 3, 32, 32});
  Tensor y = x.clone();
  // Patch 0 of image 0 (16 x 16 pixels at the top left) is masked by mask_for.
  y.index_put_(
      {0, torch::indexing::Slice(), torch::indexing::Slice(0, 16), torch::indexing::Slice(0, 16)},
      torch::randn({3, 16, 16}));
  const Tensor mask = mask_for(*b, 2, 32);
  const Probe a = masked_probe(*b, x, mask), c = masked_probe(*b, y, mask);
  EXPECT_TRUE(torch::allclose(a.feature, c.feature, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(a.final_patch_tokens, c.final_patch_tokens, 1e-5, 1e-6));
}

TEST(TokenMask, FinalPatchTokensAreTheFinalNormsRows) {
  for (const char* arch : {"xcit_nano_12_p16", "vit_tiny"}) {
    auto b = small(arch);
    torch::NoGradGuard no_grad;
    const Tensor x = torch::randn({2, 3, 32, 32});
    ProbeRequest r;
    r.final_patch_tokens = true;
    r.patch_tokens = true;
    const Probe p = b->probe(x, r);
    const auto [rows, cols] = b->token_grid(32, 32);
    ASSERT_EQ(p.final_patch_tokens.sizes(), (std::vector<int64_t>{2, rows * cols, b->embed_dim()}));
    EXPECT_TRUE(torch::equal(p.feature, b->forward(x))) << arch;
    // The final LayerNorm at its initial affine (1, 0): every row has mean 0 and variance 1.
    EXPECT_LT(p.final_patch_tokens.mean(-1).abs().max().item<float>(), 1e-5) << arch;
    EXPECT_LT((p.final_patch_tokens.var(-1, false) - 1).abs().max().item<float>(), 1e-3) << arch;
    if (std::string(arch) == "vit_tiny") {
      EXPECT_TRUE(torch::equal(p.final_patch_tokens, p.patch_tokens));
    }
  }
}

TEST(TokenMask, AResNetHasNoPatchesToMask) {
  auto b = small("resnet18");
  EXPECT_FALSE(b->supports_token_mask());
  try {
    b->add_mask_token();
    ADD_FAILURE() << "a ResNet took a mask token";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet18 has no patch tokens"), std::string::npos)
        << e.what();
  }
}

TEST(TokenMask, WeightsWithATokenLoadIntoABackboneWithout) {
  auto trained = small("xcit_nano_12_p16");
  trained->add_mask_token();
  const auto file = xdino::testing::fresh_dir("token_mask") / "trained.pth";
  xdino::save_pth(file, to_ivalue(state_dict(*trained)));
  auto evaluated = small("xcit_nano_12_p16");
  const LoadReport report = load_pretrained(*evaluated, file, "teacher", /*strict=*/true);
  EXPECT_EQ(report.ignored, std::vector<std::string>{"mask_token"});
  EXPECT_TRUE(
      torch::equal(state_dict(*evaluated)["norm.weight"], state_dict(*trained)["norm.weight"]));
}

}  // namespace
