// DINOHead and MultiCropWrapper against the official layout (docs/dino.md, "Networks") and a
// float64 re-computation of the head.
#include <gtest/gtest.h>

#include <cmath>

#include "ssl/head.h"
#include "tests/support/grad_check.h"
#include "tests/support/tiny_backbone.h"

using namespace xdino::ssl;

namespace {

DINOHeadOptions small_head(bool norm_last_layer = true, bool use_bn = false) {
  DINOHeadOptions o;
  o.in_dim = 6;
  o.out_dim = 11;
  o.hidden_dim = 16;
  o.bottleneck_dim = 5;
  o.norm_last_layer = norm_last_layer;
  o.use_bn = use_bn;
  return o;
}

}  // namespace

TEST(DINOHead, OfficialParameterNamesAndShapes) {
  DINOHead head(small_head());
  const auto p = head->named_parameters();
  std::vector<std::string> names;
  for (const auto& item : p) names.push_back(item.key());
  const std::vector<std::string> expect = {
      "mlp.0.weight", "mlp.0.bias", "mlp.2.weight",        "mlp.2.bias",
      "mlp.4.weight", "mlp.4.bias", "last_layer.weight_g", "last_layer.weight_v"};
  EXPECT_EQ(names, expect);
  EXPECT_EQ(p["last_layer.weight_g"].sizes(), torch::IntArrayRef({11, 1}));
  EXPECT_EQ(p["last_layer.weight_v"].sizes(), torch::IntArrayRef({11, 5}));
  EXPECT_EQ(p["mlp.0.weight"].sizes(), torch::IntArrayRef({16, 6}));
  EXPECT_EQ(p["mlp.4.weight"].sizes(), torch::IntArrayRef({5, 16}));

  DINOHead bn(small_head(true, true));
  const auto q = bn->named_parameters();
  for (const char* key :
       {"mlp.0.weight", "mlp.1.weight", "mlp.3.weight", "mlp.4.bias", "mlp.6.weight", "mlp.6.bias"})
    EXPECT_TRUE(q.contains(key)) << key;
  EXPECT_TRUE(bn->named_buffers().contains("mlp.1.running_mean"));
}

TEST(DINOHead, NormLastLayerFreezesG) {
  DINOHead fixed(small_head(true)), free(small_head(false));
  EXPECT_FALSE(fixed->last_layer->weight_g.requires_grad());
  EXPECT_TRUE(free->last_layer->weight_g.requires_grad());
  EXPECT_TRUE(torch::all(fixed->last_layer->weight_g == 1).item<bool>());
  EXPECT_TRUE(torch::all(free->last_layer->weight_g == 1).item<bool>());
}

TEST(DINOHead, InitFollowsTheOfficialHead) {
  torch::manual_seed(0);
  DINOHeadOptions o;  // real sizes: enough samples for the statistics
  o.in_dim = 64;
  o.out_dim = 4096;
  DINOHead head(o);
  const auto w = head->named_parameters()["mlp.2.weight"];  // 2048 x 2048
  EXPECT_NEAR(w.std().item<double>(), 0.02, 2e-4);
  EXPECT_LE(w.abs().max().item<double>(), 2.0);
  EXPECT_EQ(head->named_parameters()["mlp.0.bias"].abs().max().item<double>(), 0.0);
  // weight_v keeps PyTorch's Linear init U(-1/sqrt(256), 1/sqrt(256)).
  const auto v = head->last_layer->weight_v;
  EXPECT_LE(v.abs().max().item<double>(), 1.0 / 16);
  EXPECT_GT(v.abs().max().item<double>(), 0.99 / 16);
  EXPECT_NEAR(v.std().item<double>(), 1.0 / 16 / std::sqrt(3.0), 2e-4);
}

TEST(DINOHead, ForwardIsCosineAgainstFloat64) {
  torch::manual_seed(1);
  DINOHead head(small_head(false));
  {
    torch::NoGradGuard no_grad;
    head->last_layer->weight_g.mul_(torch::rand({11, 1}) + 0.5);  // g != 1 exercised too
  }
  const auto x = torch::randn({4, 6});
  const auto out = head->forward(x).to(torch::kDouble);

  // Independent float64 computation: Linear -> exact GELU -> ... -> L2 normalise -> g v/|v|.
  const auto p = head->named_parameters();
  auto lin = [&](const torch::Tensor& h, const std::string& k) {
    return h.matmul(p[k + ".weight"].to(torch::kDouble).t()) + p[k + ".bias"].to(torch::kDouble);
  };
  auto gelu = [](const torch::Tensor& h) { return 0.5 * h * (1 + torch::erf(h / std::sqrt(2.0))); };
  auto z = lin(gelu(lin(gelu(lin(x.to(torch::kDouble), "mlp.0")), "mlp.2")), "mlp.4");
  z = z / z.norm(2, 1, true);
  const auto v = p["last_layer.weight_v"].to(torch::kDouble);
  const auto g = p["last_layer.weight_g"].to(torch::kDouble);
  const auto cos = z.matmul((v / v.norm(2, 1, true)).t());
  EXPECT_TRUE(torch::allclose(out, cos * g.t(), 1e-5, 1e-6));

  DINOHead unit(small_head(true));
  const auto c = unit->forward(x);
  EXPECT_LE(c.abs().max().item<double>(), 1.0 + 1e-6);
  const auto rows = unit->last_layer->weight().norm(2, 1);
  EXPECT_TRUE(torch::allclose(rows, torch::ones_like(rows), 1e-6, 1e-6));
}

namespace {

// Records the batch size and width of each call; returns a per-row feature that identifies
// the input row (its mean value), so row order can be checked.
class RecordingBackbone : public xdino::testing::TinyBackbone {
 public:
  torch::Tensor forward(torch::Tensor x) override {
    calls.emplace_back(x.size(0), x.size(-1));
    return x.mean({1, 2, 3}).unsqueeze(1).expand({x.size(0), embed_dim()}).contiguous();
  }
  std::vector<std::pair<int64_t, int64_t>> calls;
};

}  // namespace

TEST(MultiCropWrapper, OneBackbonePassPerConsecutiveWidthGroup) {
  auto backbone = std::make_shared<RecordingBackbone>();
  DINOHeadOptions o = small_head();
  o.in_dim = backbone->embed_dim();
  DINOHead head(o);
  MultiCropWrapper wrapper(backbone, head);
  const int64_t B = 3;
  std::vector<torch::Tensor> crops;
  for (int64_t c = 0; c < 5; ++c)
    crops.push_back(torch::full({B, 3, c < 2 ? 16 : 8, c < 2 ? 16 : 8}, 0.0) +
                    torch::arange(B).view({B, 1, 1, 1}) + 10.0 * static_cast<double>(c));
  const auto out = wrapper->forward(crops);
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({5 * B, 11}));
  ASSERT_EQ(backbone->calls.size(), 2u);
  EXPECT_EQ(backbone->calls[0], std::make_pair(2 * B, int64_t{16}));
  EXPECT_EQ(backbone->calls[1], std::make_pair(3 * B, int64_t{8}));
  // Rows are crop-major: row c*B + b comes from crop c, sample b.
  std::vector<torch::Tensor> feats;
  for (int64_t c = 0; c < 5; ++c)
    feats.push_back(crops[c].mean({1, 2, 3}).unsqueeze(1).expand({B, 8}));
  EXPECT_TRUE(torch::allclose(out, head->forward(torch::cat(feats)), 1e-6, 1e-6));

  backbone->calls.clear();
  wrapper->forward({crops[0], crops[2], crops[1]});  // widths 16, 8, 16: not merged
  EXPECT_EQ(backbone->calls.size(), 3u);
}

TEST(MultiCropWrapper, RegistersBackboneAndHeadNames) {
  auto backbone = std::make_shared<xdino::testing::TinyBackbone>();
  DINOHeadOptions o = small_head();
  o.in_dim = 8;
  MultiCropWrapper wrapper(backbone, DINOHead(o));
  const auto p = wrapper->named_parameters();
  EXPECT_TRUE(p.contains("backbone.cls_token"));
  EXPECT_TRUE(p.contains("head.mlp.0.weight"));
  EXPECT_TRUE(p.contains("head.last_layer.weight_v"));
  EXPECT_TRUE(has_batchnorms(*wrapper));
  EXPECT_FALSE(has_batchnorms(*DINOHead(o)));
}

TEST(WeightNormLinear, GradientsMatchFiniteDifferences) {
  // DINO's last layer with a trainable weight_g (norm_last_layer false): both weight_g and
  // weight_v get gradients through W = g * v / |v|.
  torch::manual_seed(21);
  WeightNormLinear layer(6, 5);
  layer->to(torch::kDouble);
  {
    torch::NoGradGuard no_grad;
    layer->weight_g.uniform_(0.5, 1.5);
  }
  layer->weight_g.requires_grad_(true);
  const torch::Tensor x = torch::randn({3, 6}, torch::kDouble).requires_grad_(true);
  const torch::Tensor r = torch::randn({3, 5}, torch::kDouble);
  xdino::testing::NamedTensors checked = {
      {"weight_g", layer->weight_g}, {"weight_v", layer->weight_v}, {"input", x}};
  xdino::testing::expect_gradients_match([&] { return (layer(x) * r).sum(); }, checked);
}
