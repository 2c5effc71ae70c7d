// Models for images that are not 3-channel RGB (issue 44): every family built with in_chans 1
// or 4, and 3-channel weights adapted as timm's adapt_input_conv does. The truths are
// independent of the code under test: a sum over channels is what a convolution does to a gray
// image replicated three times, so the adapted 1-channel model must give the RGB model's
// features on that image; the repeat/scale kernel is written out channel by channel.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tests/support/pth_testing.h"

using xdino::models::Backbone;
using xdino::models::BackboneOptions;
using xdino::models::create_backbone;
using xdino::models::PretrainedWeights;
using xdino::testing::error_of;

namespace {

// One small member of each family, and an input size it takes.
struct Family {
  std::string arch;
  int64_t image;
};
const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"xcit_nano_4_p4", 28}, {"xvit_tiny", 32}, {"vit_tiny", 32}, {"resnet18", 32}, {"pixels", 8}};
  return f;
}

std::shared_ptr<Backbone> build(const std::string& arch, int64_t in_chans, int64_t img_size = 32) {
  BackboneOptions o;
  o.in_chans = in_chans;
  o.img_size = img_size;
  auto model = create_backbone(arch, o);
  model->to(torch::kFloat64);
  model->eval();
  return model;
}

PretrainedWeights weights_of(const Backbone& model) {
  return {xdino::models::to_ivalue(xdino::models::state_dict(model)).toGenericDict(), "'rgb.pth'"};
}

// The message of the UsageError fn throws (a usage error is one line without a source location).
template <typename Fn>
std::string usage_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const xdino::UsageError& e) {
    return e.what();
  }
  return "(no xdino::UsageError was thrown)";
}

torch::Tensor param(const Backbone& model, const std::string& key) {
  return xdino::models::state_dict(model)[key];
}

}  // namespace

TEST(InChans, EveryFamilyTakesAnyChannelCount) {
  for (const Family& f : families()) {
    for (int64_t c : {1, 3, 4}) {
      SCOPED_TRACE(f.arch + " in_chans " + std::to_string(c));
      torch::manual_seed(0);
      const auto model = build(f.arch, c, f.arch == "pixels" ? f.image : 32);
      EXPECT_EQ(model->in_chans(), c);
      EXPECT_EQ(model->input_conv_weight(), xdino::models::input_conv_weight_of(f.arch));
      if (!model->input_conv_weight().empty()) {
        EXPECT_EQ(param(*model, model->input_conv_weight()).size(1), c);
      }
      const torch::Tensor x = torch::randn({2, c, f.image, f.image}, torch::kFloat64);
      torch::NoGradGuard no_grad;
      EXPECT_EQ(model->forward(x).sizes(), (std::vector<int64_t>{2, model->embed_dim()}));
      if (f.arch == "pixels") {
        EXPECT_EQ(model->embed_dim(), c * f.image * f.image);
      }
      // Images of another channel count are refused, not broadcast.
      const torch::Tensor wrong = torch::randn({2, c + 1, f.image, f.image}, torch::kFloat64);
      EXPECT_THROW(model->forward(wrong), xdino::Error);
    }
  }
  // The input conv's FLOPs count its channels: 1 channel costs less than 3 in every family
  // that has one.
  for (const std::string arch : {"xcit_nano_4_p4", "xvit_tiny", "vit_tiny", "resnet18"})
    EXPECT_LT(build(arch, 1)->flops(224, 224), build(arch, 3)->flops(224, 224)) << arch;
  EXPECT_EQ(xdino::models::input_conv_weight_of("pixels"), "");
  BackboneOptions none;
  none.in_chans = 0;
  EXPECT_EQ(usage_error_of([&] { create_backbone("resnet18", none); }),
            "--in_chans must be at least 1, got 0");
}

// A gray image g through the summed kernel is g through each RGB kernel, added: exactly what
// the RGB model computes on (g, g, g).
TEST(InChans, SummedRgbWeightsGiveTheRgbFeaturesOfTheReplicatedGrayImage) {
  for (const Family& f : families()) {
    if (f.arch == "pixels") continue;
    SCOPED_TRACE(f.arch);
    torch::manual_seed(1);
    const auto rgb = build(f.arch, 3);
    // BatchNorm statistics other than 0/1, so that the stem's BN is part of the check.
    for (auto& b : rgb->named_buffers())
      if (b.key().find("running_mean") != std::string::npos) b.value().normal_(0, 0.1);
    const auto gray = build(f.arch, 1);
    const auto report = xdino::models::load_pretrained(*gray, weights_of(*rgb));
    EXPECT_TRUE(report.missing.empty() && report.unexpected.empty()) << report.summary();
    const torch::Tensor g = torch::rand({2, 1, f.image, f.image}, torch::kFloat64);
    torch::NoGradGuard no_grad;
    const torch::Tensor expected = rgb->forward(g.expand({2, 3, f.image, f.image}).contiguous());
    const torch::Tensor got = gray->forward(g);
    EXPECT_TRUE(torch::allclose(got, expected, 1e-9, 1e-9))
        << (got - expected).abs().max().item<double>();
    // Not a test that passes whatever was loaded: the gray model's own random weights differ.
    const auto fresh = build(f.arch, 1);
    EXPECT_FALSE(torch::allclose(fresh->forward(g), expected, 1e-3, 1e-3));
  }
}

// Channel c of the adapted kernel is RGB channel c mod 3, times 3 / C: written out one channel
// at a time.
TEST(InChans, MoreChannelsRepeatTheRgbKernelScaledByThreeOverC) {
  torch::manual_seed(2);
  const torch::Tensor w = torch::randn({5, 3, 3, 3});
  for (int64_t c : {2, 4, 6, 7}) {
    SCOPED_TRACE(c);
    const torch::Tensor got = xdino::models::adapt_input_conv(w, c);
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{5, c, 3, 3}));
    ASSERT_EQ(got.scalar_type(), torch::kFloat);
    for (int64_t i = 0; i < c; ++i) {
      const torch::Tensor expected = w.select(1, i % 3) * (3.0f / static_cast<float>(c));
      EXPECT_TRUE(torch::allclose(got.select(1, i), expected, 1e-6, 1e-7)) << "channel " << i;
    }
  }
  const torch::Tensor one = xdino::models::adapt_input_conv(w.to(torch::kHalf), 1);
  EXPECT_EQ(one.scalar_type(), torch::kHalf);  // back in the stored dtype, as timm
  EXPECT_TRUE(torch::allclose(one.to(torch::kFloat),
                              w.to(torch::kHalf).to(torch::kFloat).sum(1, true), 1e-2, 1e-2));
  EXPECT_EQ(usage_error_of([&] { xdino::models::adapt_input_conv(w.narrow(1, 0, 2), 1); }),
            "adapt_input_conv takes an (out, 3, k, k) RGB conv weight, got [5, 2, 3, 3]");
}

// Through load_pretrained: the 4- and 6-channel models hold that kernel; the 6-channel one on
// an RGB image repeated twice gives the RGB features (3/6 of each kernel, twice).
TEST(InChans, LoadPretrainedAdaptsOnlyTheInputConv) {
  torch::manual_seed(3);
  const auto rgb = build("vit_tiny", 3);
  const torch::Tensor w = param(*rgb, "patch_embed.proj.weight");
  for (int64_t c : {4, 6}) {
    const auto model = build("vit_tiny", c);
    xdino::models::load_pretrained(*model, weights_of(*rgb));
    const torch::Tensor got = param(*model, "patch_embed.proj.weight");
    for (int64_t i = 0; i < c; ++i)
      EXPECT_TRUE(torch::allclose(got.select(1, i), w.select(1, i % 3) * (3.0 / c), 1e-12, 1e-12))
          << c << " channels, channel " << i;
    // Everything else is the RGB model's, untouched.
    EXPECT_TRUE(torch::equal(param(*model, "blocks.0.attn.qkv.weight"),
                             param(*rgb, "blocks.0.attn.qkv.weight")));
    EXPECT_TRUE(
        torch::equal(param(*model, "patch_embed.proj.bias"), param(*rgb, "patch_embed.proj.bias")));
  }
  const auto six = build("vit_tiny", 6);
  xdino::models::load_pretrained(*six, weights_of(*rgb));
  const torch::Tensor x = torch::randn({2, 3, 32, 32}, torch::kFloat64);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(six->forward(torch::cat({x, x}, 1)), rgb->forward(x), 1e-9, 1e-9));
}

TEST(InChans, OtherMismatchesStillFail) {
  torch::manual_seed(4);
  const auto rgb = build("xcit_nano_4_p4", 3);
  // Another tensor of the wrong shape next to an adaptable input conv: the load fails on it.
  auto state = xdino::models::state_dict(*rgb);
  state["norm.weight"] = torch::ones({7}, torch::kFloat64);
  const PretrainedWeights bad{xdino::models::to_ivalue(state).toGenericDict(), "'bad.pth'"};
  const auto gray = build("xcit_nano_4_p4", 1);
  const std::string message = error_of([&] { xdino::models::load_pretrained(*gray, bad); });
  EXPECT_NE(message.find("'bad.pth': checkpoint key 'norm.weight' has shape [7]"),
            std::string::npos)
      << message;
  // An input conv of another width is a shape mismatch, not a channel count: the ordinary
  // error on that key, no adaptation and no --in_chans advice.
  auto wide = xdino::models::state_dict(*rgb);
  wide["patch_embed.proj.0.0.weight"] = torch::zeros({96, 3, 3, 3}, torch::kFloat64);
  const PretrainedWeights other_width{xdino::models::to_ivalue(wide).toGenericDict(), "'w.pth'"};
  const std::string other = error_of([&] { xdino::models::load_pretrained(*gray, other_width); });
  EXPECT_NE(other.find("'w.pth': checkpoint key 'patch_embed.proj.0.0.weight' has shape "
                       "[96, 3, 3, 3] but the model expects [64, 1, 3, 3]"),
            std::string::npos)
      << other;
}

TEST(InChans, NonRgbWeightsIntoAnotherCountAreRefusedInOneLine) {
  torch::manual_seed(5);
  const auto gray = build("resnet18", 1);
  const PretrainedWeights one{weights_of(*gray).weights, "'gray.pth'"};
  const auto rgb = build("resnet18", 3);
  const torch::Tensor before = param(*rgb, "conv1.weight").clone();
  EXPECT_EQ(usage_error_of([&] { xdino::models::load_pretrained(*rgb, one); }),
            "'gray.pth': the input convolution 'conv1.weight' reads 1-channel images but the "
            "model was built for 3; build it with --in_chans 1 (only 3-channel weights are "
            "adapted to another count)");
  EXPECT_TRUE(torch::equal(param(*rgb, "conv1.weight"), before));
  const auto four = build("resnet18", 4);
  EXPECT_NE(usage_error_of([&] { xdino::models::load_pretrained(*four, one); })
                .find("reads 1-channel images but the model was built for 4; build it with "
                      "--in_chans 1"),
            std::string::npos);
}

// create_backbone_for: a count not given comes from the stored input conv, as the position
// grid comes from the stored pos_embed.
TEST(InChans, CreateBackboneForTakesTheCountFromTheWeights) {
  torch::manual_seed(6);
  for (const std::string arch : {"vit_tiny", "xcit_nano_4_p4", "resnet18"}) {
    SCOPED_TRACE(arch);
    const auto gray = build(arch, 1);
    const PretrainedWeights w = weights_of(*gray);
    BackboneOptions o;
    o.in_chans = xdino::models::kInChansFromWeights;
    const auto model = xdino::models::create_backbone_for(arch, o, w);
    EXPECT_EQ(model->in_chans(), 1);
    const auto report = xdino::models::load_pretrained(*model, w);
    EXPECT_TRUE(report.missing.empty());
    o.in_chans = 3;  // asked for explicitly: kept, and then refused by the load
    const auto three = xdino::models::create_backbone_for(arch, o, w);
    EXPECT_EQ(three->in_chans(), 3);
    EXPECT_THROW(xdino::models::load_pretrained(*three, w), xdino::UsageError);
  }
  BackboneOptions o;
  o.in_chans = xdino::models::kInChansFromWeights;
  const PretrainedWeights empty{
      c10::impl::GenericDict(c10::StringType::get(), c10::TensorType::get()), "'empty.pth'"};
  EXPECT_EQ(xdino::models::create_backbone_for("vit_tiny", o, empty)->in_chans(), 3);
}
