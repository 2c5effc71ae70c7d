// torchvision's ResNets (models/resnet.h) against tests/data/resnet/resnet_golden.pth, which
// tests/data/resnet/make_golden.py wrote with Debian's python3-torchvision: state_dict keys and
// shapes, parameter counts and FLOPs of all ten names, resnet18/resnet50/resnext50_32x4d
// features on the same weights and images (eval and train mode; grouped 3x3 convs in
// ResNeXt), and the two official DINO ResNet-50 checkpoint
// layouts (backbone-only; full checkpoint with module.backbone.* keys) through load_pretrained.
// The weights are not stored: both sides fill them from one integer hash (fill_weights).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>

#include "core/check.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "models/batch_norm.h"
#include "models/info.h"
#include "models/registry.h"
#include "models/resnet.h"
#include "models/weights.h"
#include "tests/support/cpu_bfloat16.h"
#include "tests/support/files.h"

using namespace xdino::models;
using torch::Tensor;

namespace {

const xdino::IDict& resnet_goldens() {
  static const xdino::IDict g = xdino::as_dict(
      xdino::load_pth(xdino::testing::fixture("resnet/resnet_golden.pth")), "resnet golden");
  return g;
}

const c10::IValue& resnet_golden(const std::string& key) {
  return xdino::get(resnet_goldens(), key, "resnet golden");
}

// make_golden.py's fill_weights, exactly: the same float64 values, rounded once to float32.
void fill_weights(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  int64_t k = 0;
  for (auto& item : state_dict(model)) {
    Tensor t = item.value();
    const std::string& name = item.key();
    const int64_t index = k++;
    if (!t.is_floating_point()) continue;
    const Tensor i = torch::arange(t.numel(), torch::kLong);
    const Tensor u = (i * int64_t{2654435761} + (index + 1) * 40503)
                             .remainder(int64_t{1} << 32)
                             .to(torch::kDouble) /
                         4294967296.0 -
                     0.5;
    const auto ends = [&](const std::string& s) {
      return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    Tensor v;
    if (t.dim() == 4)
      v = u * std::sqrt(24.0 / static_cast<double>(t[0].numel()));
    else if (ends("running_var"))
      v = 1 + 0.5 * u;
    else if (ends("weight"))
      v = 1 + 0.25 * u;
    else
      v = 0.1 * u;
    t.copy_(v.view(t.sizes()).to(t.dtype()));
  }
}

std::string keys_text(const torch::nn::Module& model) {
  std::ostringstream os;
  bool first = true;
  for (const auto& item : state_dict(model)) {
    os << (first ? "" : "\n") << item.key() << " ";
    first = false;
    const auto sizes = item.value().sizes();
    for (size_t d = 0; d < sizes.size(); ++d) os << (d ? "x" : "") << sizes[d];
  }
  return os.str();
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace

TEST(ResNet, KeysParametersAndFlopsAreTorchvisions) {
  for (const ResNetConfig& c : resnet_variants()) {
    SCOPED_TRACE(c.name);
    auto model = create_backbone(c.name);
    EXPECT_EQ(model->num_parameters(), resnet_golden(c.name + ".params").toInt());
    EXPECT_EQ(static_cast<int64_t>(state_dict(*model).size()),
              resnet_golden(c.name + ".num_keys").toInt());
    EXPECT_EQ(model->flops(224, 224),
              static_cast<double>(resnet_golden(c.name + ".flops224").toInt()));
    if (const auto* keys = xdino::find(resnet_goldens(), c.name + ".keys")) {
      EXPECT_EQ(keys_text(*model), keys->toStringRef());
    }
    // With a classifier, the fc that DINO replaces by an identity is back: torchvision's count.
    const int64_t fc = model->embed_dim() * 1000 + 1000;
    EXPECT_EQ(model->num_parameters() + fc, resnet_golden(c.name + ".params_fc").toInt());
  }
  BackboneOptions with_fc;
  with_fc.num_classes = 1000;
  EXPECT_EQ(create_backbone("resnet18", with_fc)->num_parameters(),
            resnet_golden("resnet18.params_fc").toInt());
  // The numbers `dino info --arch resnet50` prints.
  InfoOptions o;
  o.arch = "resnet50";
  const ModelInfo info = describe(o);
  EXPECT_EQ(info.parameters, 23508032);
  EXPECT_NEAR(info.flops / 1e9, 4.11, 0.005);
  EXPECT_EQ(info.embed_dim, 2048);
  EXPECT_EQ(info.grid_rows, 7);
  EXPECT_EQ(paper_name("resnet50", 16), "ResNet-50");
  EXPECT_EQ(patch_size_of("resnet50", 16), 32);
}

TEST(ResNet, FeaturesMatchTorchvisionOnTheSameWeights) {
  const Tensor images = resnet_golden("images").toTensor();
  for (const std::string arch : {"resnet18", "resnet50", "resnext50_32x4d"}) {
    SCOPED_TRACE(arch);
    auto model = create_backbone(arch);
    fill_weights(*model);
    model->eval();
    torch::NoGradGuard no_grad;
    const Tensor expected = resnet_golden(arch + ".eval").toTensor();
    const Tensor feature = model->forward(images);
    ASSERT_EQ(feature.sizes(), expected.sizes());
    const double diff = max_abs_difference(feature, expected);
    std::printf("%s eval: max |ours - torchvision| = %.3g (max |feature| %.3g)\n", arch.c_str(),
                diff, expected.abs().max().item<double>());
    EXPECT_LT(diff, 1e-5);
    EXPECT_TRUE(torch::equal(model->linear_features(images, 4, true), feature));
    if (arch == "resnet18") {  // batch statistics and the running-statistics update
      model->train();
      const double train_diff =
          max_abs_difference(model->forward(images), resnet_golden(arch + ".train").toTensor());
      std::printf("%s train: max |ours - torchvision| = %.3g\n", arch.c_str(), train_diff);
      // Normalising by the statistics of a small batch amplifies the rounding of the
      // convolutions before it: below 1e-5 with LibTorch 1.13 and 2.15, 5.2e-5 with the CPU
      // kernels of LibTorch 2.11's CUDA wheel (an H200 machine, 2026-11-26), whose eval-mode
      // features still agree within 1.1e-6.
      EXPECT_LT(train_diff, 1e-4);
      const auto sd = state_dict(*model);
      EXPECT_LT(max_abs_difference(sd["bn1.running_mean"],
                                   resnet_golden(arch + ".running_mean").toTensor()),
                1e-6);
      EXPECT_LT(max_abs_difference(sd["layer4.1.bn2.running_var"],
                                   resnet_golden(arch + ".running_var").toTensor()),
                1e-6);
    }
  }
}

TEST(ResNet, OfficialDinoCheckpointLayoutsLoad) {
  // Entry k of the file (state_dict order) holds the constant k + 1 (make_golden.py).
  const auto expect_constants = [](const torch::nn::Module& model) {
    int64_t k = 0;
    for (const auto& item : state_dict(model)) {
      const double expected = static_cast<double>(++k);
      EXPECT_EQ(item.value().min().item<double>(), expected) << item.key();
      EXPECT_EQ(item.value().max().item<double>(), expected) << item.key();
    }
  };
  {
    auto model = create_backbone("resnet50");
    const LoadReport r =
        load_pretrained(*model, xdino::testing::fixture("resnet/dino_resnet50_backbone.pth"),
                        "teacher", /*strict=*/true);
    EXPECT_EQ(r.loaded, resnet_golden("resnet50.num_keys").toInt());
    expect_constants(*model);
  }
  for (const char* key : {"teacher", "student"}) {
    SCOPED_TRACE(key);
    auto model = create_backbone("resnet50");
    const LoadReport r = load_pretrained(
        *model, xdino::testing::fixture("resnet/dino_resnet50_full_checkpoint.pth"), key,
        /*strict=*/true);
    EXPECT_EQ(r.loaded, resnet_golden("resnet50.num_keys").toInt());
    EXPECT_EQ(r.ignored.size(), 8u);  // the DINO head
    expect_constants(*model);
  }
}

TEST(ResNet, ShowsOnlyItsFeatureAndSynchronisesEveryBatchNorm) {
  auto model = create_backbone("resnet18");
  const Capabilities caps = model->capabilities();
  EXPECT_EQ(caps.class_attention_layers, 0);
  EXPECT_FALSE(caps.qk_norms);
  const Tensor x = torch::randn({1, 3, 40, 33});
  EXPECT_THROW(model->patch_tokens(x), xdino::UsageError);
  EXPECT_THROW(model->cls_attention(x), xdino::UsageError);
  EXPECT_THROW(model->block_outputs(x, {-1}), xdino::UsageError);
  EXPECT_EQ(model->token_grid(40, 33), std::make_pair(int64_t{2}, int64_t{2}));
  EXPECT_EQ(model->forward(torch::randn({2, 3, 9, 7})).sizes(), (std::vector<int64_t>{2, 512}));
  int64_t count = 0;  // what main_dino.py's convert_sync_batchnorm converts
  for (const auto& module : model->modules())
    count += dynamic_cast<BatchNormImpl*>(module.get()) ? 1 : 0;
  EXPECT_EQ(count, 1 + 8 * 2 + 3);
}

TEST(ResNet, TorchvisionInitialisation) {
  torch::manual_seed(44);
  auto model = create_backbone("resnet50");
  for (const auto& item : state_dict(*model)) {
    const Tensor& t = item.value();
    if (t.dim() == 4) {  // kaiming normal, fan_out, ReLU gain: std sqrt(2 / (out * k * k))
      const double expected =
          std::sqrt(2.0 / static_cast<double>(t.size(0) * t.size(2) * t.size(3)));
      if (t.numel() >= 16384) {
        EXPECT_NEAR(t.std().item<double>() / expected, 1.0, 0.05) << item.key();
      }
    } else if (item.key().find("weight") != std::string::npos ||
               item.key().find("running_var") != std::string::npos) {
      EXPECT_TRUE(torch::equal(t, torch::ones_like(t))) << item.key();
    } else if (t.is_floating_point()) {
      EXPECT_TRUE(torch::equal(t, torch::zeros_like(t))) << item.key();
    }
  }
}

TEST(ResNet, Float64AndBfloat16Run) {
  torch::manual_seed(45);
  auto model = create_backbone("resnet18");
  model->eval();
  torch::NoGradGuard no_grad;
  const Tensor x = torch::randn({2, 3, 32, 32});
  const Tensor f32 = model->forward(x);
  model->to(torch::kDouble);
  EXPECT_LT(max_abs_difference(model->forward(x.to(torch::kDouble)), f32), 1e-4);
  if (!xdino::testing::cpu_bfloat16_runs())
    return;  // .ci/run's AVX2 emulation: its phase 1 runs it
  model->to(torch::kBFloat16);
  const Tensor bf16 = model->forward(x.to(torch::kBFloat16));
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  EXPECT_LT(max_abs_difference(bf16, f32), 0.1 * f32.abs().max().item<double>());
}
