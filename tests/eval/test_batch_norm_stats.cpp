// eval/batch_norm_stats.h: BatchNorm running statistics of the data (update_bn), against the
// statistics of each BatchNorm's input computed another way: by hand in float64 from the
// images, through the preceding layers (train-mode BatchNorm being batch normalisation), and
// for XCiT's first BatchNorm from its convolution's output. Also what it must leave alone
// (parameters, momenta, modes, the RNG), a model without BatchNorm, and a BatchNorm run twice.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "eval/batch_norm_stats.h"
#include "models/batch_norm.h"
#include "models/registry.h"

using namespace xdino;
namespace F = torch::nn::functional;

namespace {

// What every test backbone here answers besides its feature.
class TestBackbone : public models::Backbone {
 public:
  const std::string& arch() const override { return arch_; }
  int64_t embed_dim() const override { return 4; }
  int64_t patch_size() const override { return 1; }
  int64_t num_heads() const override { return 1; }
  int64_t num_blocks() const override { return 0; }
  std::pair<int64_t, int64_t> token_grid(int64_t h, int64_t w) const override { return {h, w}; }
  double flops(int64_t, int64_t) const override { return 0; }

 private:
  std::string arch_ = "test";
};

// The first BatchNorm sees the image itself: image -> BN2d (ours, momentum 0.3) -> dropout ->
// 1x1 conv -> BN2d (LibTorch's) -> mean over pixels -> BN1d (ours) -> feature.
class ThreeNorms : public TestBackbone {
 public:
  ThreeNorms() {
    bn_image = register_module("bn_image", models::BatchNorm(3, 1e-5, 0.3));
    dropout = register_module("dropout", torch::nn::Dropout(0.5));
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 1)));
    bn_conv = register_module("bn_conv", torch::nn::BatchNorm2d(4));
    bn_feature = register_module("bn_feature", models::BatchNorm(4));
    torch::NoGradGuard no_grad;
    // Weights and biases that are not the identity, so each stage changes the next one's input.
    bn_image->weight.copy_(torch::tensor({1.5, 0.5, 2.0}));
    bn_image->bias.copy_(torch::tensor({0.1, -0.2, 0.3}));
    bn_conv->weight.copy_(torch::tensor({0.7, 1.3, 1.0, 2.0}));
    bn_conv->bias.copy_(torch::tensor({0.0, 0.5, -0.5, 1.0}));
  }
  models::Probe probe(torch::Tensor x, const models::ProbeRequest&) override {
    x = conv->forward(dropout->forward(bn_image->forward(x)));
    models::Probe p;
    p.feature = bn_feature->forward(bn_conv->forward(x).mean({2, 3}));
    return p;
  }

  models::BatchNorm bn_image{nullptr}, bn_feature{nullptr};
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn_conv{nullptr};
};

class NoNorm : public TestBackbone {
 public:
  NoNorm() { conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 1))); }
  models::Probe probe(torch::Tensor x, const models::ProbeRequest&) override {
    models::Probe p;
    p.feature = conv->forward(x).mean({2, 3});
    return p;
  }
  torch::nn::Conv2d conv{nullptr};
};

class NormTwice : public TestBackbone {
 public:
  NormTwice() { bn = register_module("bn", models::BatchNorm(3, 1e-5, 0.3)); }
  models::Probe probe(torch::Tensor x, const models::ProbeRequest&) override {
    models::Probe p;
    p.feature = bn->forward(bn->forward(x)).mean({2, 3});
    return p;
  }
  models::BatchNorm bn{nullptr};
};

// Batches of different sizes (the average is over batches, not images: update_bn's).
std::vector<torch::Tensor> batches() {
  torch::manual_seed(7);
  return {torch::randn({4, 3, 5, 5}) * 2 + 1, torch::randn({6, 3, 5, 5}) - 3,
          torch::rand({5, 3, 5, 5}) * 4};
}

eval::ImageBatches batches_of(const std::vector<torch::Tensor>& list) {
  auto next = std::make_shared<size_t>(0);
  return [list, next]() { return *next < list.size() ? list[(*next)++] : torch::Tensor(); };
}

// Per-channel statistics over all dims but 1 of each input, in float64: the expected running
// statistics (mean of the batch means, mean of the unbiased batch variances), and each input
// batch-normalised as a train-mode BatchNorm does (biased variance), scaled and shifted.
struct Expected {
  torch::Tensor mean, var;
  std::vector<torch::Tensor> normalised;
};
Expected by_hand(const std::vector<torch::Tensor>& inputs, const torch::Tensor& weight,
                 const torch::Tensor& bias) {
  Expected e;
  std::vector<torch::Tensor> means, vars;
  for (const torch::Tensor& in : inputs) {
    const torch::Tensor x = in.to(torch::kDouble).transpose(0, 1).reshape({in.size(1), -1});
    const torch::Tensor m = x.mean(1), v = x.var(1, /*unbiased=*/true);
    means.push_back(m);
    vars.push_back(v);
    std::vector<int64_t> shape(in.dim(), 1);
    shape[1] = in.size(1);
    const torch::Tensor biased = x.var(1, /*unbiased=*/false);
    e.normalised.push_back((in.to(torch::kDouble) - m.view(shape)) /
                               (biased.view(shape) + 1e-5).sqrt() *
                               weight.to(torch::kDouble).view(shape) +
                           bias.to(torch::kDouble).view(shape));
  }
  e.mean = torch::stack(means).mean(0);
  e.var = torch::stack(vars).mean(0);
  return e;
}

void expect_tensor_close(const torch::Tensor& got, const torch::Tensor& want,
                         const std::string& what) {
  EXPECT_TRUE(torch::allclose(got.to(torch::kDouble), want, 1e-4, 1e-5))
      << what << ": got " << got << " want " << want;
}

}  // namespace

TEST(BatchNormStats, EveryRunningStatisticIsTheAverageOfItsInputsBatchStatistics) {
  ThreeNorms model;
  const std::vector<torch::Tensor> images = batches();
  ASSERT_TRUE(eval::recalibrate_batch_norm(model, batches_of(images), *local_communicator()));

  // Each BatchNorm's inputs, computed by hand from the images through the layers before it.
  const Expected image = by_hand(images, model.bn_image->weight, model.bn_image->bias);
  expect_tensor_close(model.bn_image->running_mean, image.mean, "bn_image mean");
  expect_tensor_close(model.bn_image->running_var, image.var, "bn_image var");
  std::vector<torch::Tensor> conv_out;
  for (const torch::Tensor& z : image.normalised)  // dropout off: the identity
    conv_out.push_back(F::conv2d(z, model.conv->weight.to(torch::kDouble),
                                 F::Conv2dFuncOptions().bias(model.conv->bias.to(torch::kDouble))));
  const Expected conv = by_hand(conv_out, model.bn_conv->weight, model.bn_conv->bias);
  expect_tensor_close(model.bn_conv->running_mean, conv.mean, "bn_conv mean");
  expect_tensor_close(model.bn_conv->running_var, conv.var, "bn_conv var");
  std::vector<torch::Tensor> pooled;
  for (const torch::Tensor& z : conv.normalised) pooled.push_back(z.mean({2, 3}));
  const Expected feature = by_hand(pooled, model.bn_feature->weight, model.bn_feature->bias);
  expect_tensor_close(model.bn_feature->running_mean, feature.mean, "bn_feature mean");
  expect_tensor_close(model.bn_feature->running_var, feature.var, "bn_feature var");

  // Independent of what the statistics were before (they are reset, not blended).
  ThreeNorms again;
  {
    torch::NoGradGuard no_grad;
    again.conv->weight.copy_(model.conv->weight);
    again.conv->bias.copy_(model.conv->bias);
    again.bn_image->running_mean.fill_(100);
    again.bn_conv->running_var.fill_(0.001);
    again.bn_feature->num_batches_tracked.fill_(55);
  }
  ASSERT_TRUE(eval::recalibrate_batch_norm(again, batches_of(images), *local_communicator()));
  expect_tensor_close(again.bn_image->running_mean, image.mean, "reset bn_image mean");
  expect_tensor_close(again.bn_conv->running_var, conv.var, "reset bn_conv var");
  expect_tensor_close(again.bn_feature->running_mean, feature.mean, "reset bn_feature mean");
  EXPECT_EQ(again.bn_feature->num_batches_tracked.item<int64_t>(), 3);
}

TEST(BatchNormStats, LeavesParametersMomentaModesAndTheRngAlone) {
  ThreeNorms model;
  model.train();
  model.bn_conv->eval();  // a mixed state, to be given back as it was
  std::vector<torch::Tensor> params;
  for (const auto& p : model.parameters()) params.push_back(p.clone());
  const std::vector<torch::Tensor> images = batches();
  torch::manual_seed(123);
  ASSERT_TRUE(eval::recalibrate_batch_norm(model, batches_of(images), *local_communicator()));
  const torch::Tensor drawn = torch::rand({4});
  torch::manual_seed(123);
  EXPECT_TRUE(drawn.equal(torch::rand({4}))) << "dropout ran (train mode) and drew numbers";
  size_t i = 0;
  for (const auto& p : model.parameters()) EXPECT_TRUE(p.equal(params[i++]));
  EXPECT_EQ(model.bn_image->momentum, 0.3);
  EXPECT_EQ(model.bn_feature->momentum, 0.1);
  ASSERT_TRUE(model.bn_conv->options.momentum().has_value());
  EXPECT_EQ(*model.bn_conv->options.momentum(), 0.1);
  EXPECT_TRUE(model.is_training());
  EXPECT_TRUE(model.bn_image->is_training());
  EXPECT_TRUE(model.dropout->is_training());
  EXPECT_FALSE(model.bn_conv->is_training());

  model.eval();
  ASSERT_TRUE(eval::recalibrate_batch_norm(model, batches_of(images), *local_communicator()));
  EXPECT_FALSE(model.is_training());
  for (const auto& m : model.modules(/*include_self=*/false)) EXPECT_FALSE(m->is_training());
  // Recalibrated in eval mode or not, the same statistics.
  ThreeNorms fresh;
  {
    torch::NoGradGuard no_grad;
    fresh.conv->weight.copy_(model.conv->weight);
    fresh.conv->bias.copy_(model.conv->bias);
  }
  fresh.train();
  ASSERT_TRUE(eval::recalibrate_batch_norm(fresh, batches_of(images), *local_communicator()));
  EXPECT_TRUE(fresh.bn_feature->running_var.equal(model.bn_feature->running_var));
}

TEST(BatchNormStats, AModelWithoutBatchNormIsLeftAsItIs) {
  NoNorm model;
  EXPECT_FALSE(eval::has_batch_norm(model));
  EXPECT_TRUE(eval::has_batch_norm(ThreeNorms()));
  const torch::Tensor weight = model.conv->weight.clone();
  bool called = false;
  EXPECT_FALSE(eval::recalibrate_batch_norm(
      model,
      [&] {
        called = true;
        return torch::Tensor();
      },
      *local_communicator()));
  EXPECT_FALSE(called) << "no BatchNorm: no image needs reading";
  EXPECT_TRUE(model.conv->weight.equal(weight));
  for (const char* arch : {"vit_tiny", "pixels"})
    EXPECT_FALSE(eval::has_batch_norm(*models::create_backbone(arch))) << arch;
  for (const char* arch : {"xcit_nano_4_p4", "resnet18"})
    EXPECT_TRUE(eval::has_batch_norm(*models::create_backbone(arch))) << arch;
}

TEST(BatchNormStats, ABatchNormRunTwiceInAForwardIsRefused) {
  NormTwice model;
  try {
    eval::recalibrate_batch_norm(model, batches_of(batches()), *local_communicator());
    FAIL() << "a BatchNorm run twice must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'bn' ran 2 times"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.bn->momentum, 0.3) << "momentum restored after the failure";
  EXPECT_THROW(eval::recalibrate_batch_norm(
                   model, [] { return torch::Tensor(); }, *local_communicator()),
               Error);  // no batch at all
}

TEST(BatchNormStats, XCiTsFirstBatchNormGetsTheStatisticsOfItsConvolution) {
  torch::manual_seed(3);
  auto model = models::create_backbone("xcit_nano_4_p4");
  model->eval();
  torch::nn::Module* conv = nullptr;
  models::BatchNormImpl* bn = nullptr;
  for (const auto& item : model->named_modules()) {
    if (item.key() == "patch_embed.proj.0.0") conv = item.value().get();
    if (item.key() == "patch_embed.proj.0.1")
      bn = dynamic_cast<models::BatchNormImpl*>(item.value().get());
  }
  ASSERT_TRUE(conv && bn) << "XCiT's first conv3x3 unit is patch_embed.proj.0 = [conv, BN]";
  std::vector<torch::Tensor> images;
  for (int b = 0; b < 3; ++b) images.push_back(torch::randn({8, 3, 28, 28}) * (b + 1));
  ASSERT_TRUE(eval::recalibrate_batch_norm(*model, batches_of(images), *local_communicator()));
  std::vector<torch::Tensor> conv_out;
  {
    torch::NoGradGuard no_grad;
    auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(conv);
    ASSERT_NE(c, nullptr);
    for (const torch::Tensor& x : images) conv_out.push_back(c->forward(x));
  }
  const Expected want = by_hand(conv_out, bn->weight, bn->bias);
  expect_tensor_close(bn->running_mean, want.mean, "XCiT patch_embed.proj.0.1 mean");
  expect_tensor_close(bn->running_var, want.var, "XCiT patch_embed.proj.0.1 var");
  EXPECT_FALSE(model->is_training());
  // Not the initial statistics any more, and the features changed with them.
  EXPECT_FALSE(torch::allclose(bn->running_var, torch::ones_like(bn->running_var)));
}
