// Parameter groups, optimiser updates against closed forms in float64, torch's state_dict
// layout, per-parameter clipping and last-layer freezing (docs/dino.md, "Schedules and optimiser").
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "ssl/head.h"
#include "ssl/student_update.h"
#include "tests/support/tiny_backbone.h"
#include "train/gradients.h"
#include "train/optim.h"

using namespace xdino::ssl;
using xdino::ssl::cancel_gradients_last_layer;
using xdino::ssl::dino_param_groups;
using xdino::train::clip_gradients;
using xdino::train::make_adamw;
using xdino::train::make_lars;
using xdino::train::make_sgd;
using xdino::train::NamedTensors;
using xdino::train::ParamGroup;

namespace {

MultiCropWrapper tiny_student(bool norm_last_layer) {
  return xdino::testing::tiny_wrapper(norm_last_layer);
}

std::set<std::string> names(const ParamGroup& g) { return {g.names.begin(), g.names.end()}; }

ParamGroup one_param(torch::Tensor p, double lr, double wd) {
  ParamGroup g;
  g.params = {std::move(p)};
  g.names = {"w"};
  g.lr = lr;
  g.weight_decay = wd;
  return g;
}

}  // namespace

TEST(ParamGroups, DecayEverythingButBiasesAndOneDimensionalTensors) {
  auto student = tiny_student(true);
  const auto groups = dino_param_groups(student->named_parameters());
  ASSERT_EQ(groups.size(), 2u);
  const auto g0 = names(groups[0]), g1 = names(groups[1]);
  for (const char* k :
       {"backbone.cls_token", "backbone.blocks.0.attn.temperature", "backbone.patch_embed.0.weight",
        "backbone.blocks.0.attn.proj.weight", "head.mlp.0.weight", "head.last_layer.weight_v"})
    EXPECT_TRUE(g0.count(k)) << k << " should be decayed";
  for (const char* k : {"backbone.blocks.0.attn.proj.bias", "backbone.blocks.0.norm1.weight",
                        "backbone.blocks.0.norm1.bias", "backbone.blocks.0.gamma1",
                        "backbone.patch_embed.1.weight", "backbone.norm.weight", "head.mlp.4.bias"})
    EXPECT_TRUE(g1.count(k)) << k << " should not be decayed";
  EXPECT_FALSE(g0.count("head.last_layer.weight_g") || g1.count("head.last_layer.weight_g"));
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  EXPECT_EQ(g0.size() + g1.size(), student->parameters().size() - 1);

  const auto free = dino_param_groups(tiny_student(false)->named_parameters());
  EXPECT_TRUE(names(free[0]).count("head.last_layer.weight_g"));  // [K,1]: 2-D, decayed
}

TEST(AdamW, MatchesClosedFormWithDecoupledDecay) {
  torch::manual_seed(0);
  auto p = torch::randn({5, 3});
  auto ref = p.to(torch::kDouble);
  auto opt = make_adamw({one_param(p, 0, 0)});
  auto m = torch::zeros_like(ref), v = torch::zeros_like(ref);
  const double lrs[] = {1e-2, 3e-2, 2e-3}, wds[] = {0.04, 0.1, 0.4};
  for (int t = 1; t <= 3; ++t) {
    const auto g = torch::randn({5, 3});
    p.mutable_grad() = g;
    opt->param_groups()[0].lr = lrs[t - 1];
    opt->param_groups()[0].weight_decay = wds[t - 1];
    opt->step();
    const auto gd = g.to(torch::kDouble);
    ref = ref * (1 - lrs[t - 1] * wds[t - 1]);
    m = 0.9 * m + 0.1 * gd;
    v = 0.999 * v + 0.001 * gd * gd;
    const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
    ref = ref - (lrs[t - 1] / bc1) * m / (v.sqrt() / std::sqrt(bc2) + 1e-8);
    EXPECT_TRUE(torch::allclose(p.to(torch::kDouble), ref, 1e-5, 1e-6)) << "step " << t;
  }
}

TEST(AdamW, FusedCpuPathAgreesWithOpByOpPath) {
  // A transposed (non-contiguous) parameter takes LibTorch's op-by-op path, a contiguous one
  // the fused kernel; both start from the same values and see the same gradients.
  torch::manual_seed(5);
  auto fused = torch::randn({7, 5});
  auto strided = fused.t().contiguous().t();
  ASSERT_FALSE(strided.is_contiguous());
  auto a = make_adamw({one_param(fused, 0.01, 0.04)});
  auto b = make_adamw({one_param(strided, 0.01, 0.04)});
  for (int t = 0; t < 4; ++t) {
    const auto g = torch::randn({7, 5});
    fused.mutable_grad() = g;
    strided.mutable_grad() = g.t().contiguous().t();
    a->step();
    b->step();
  }
  EXPECT_TRUE(torch::allclose(fused, strided, 1e-6, 1e-7));
}

TEST(AdamW, UndefinedGradSkipsParameterEntirely) {
  auto a = torch::ones({2, 2}), b = torch::ones({2, 2});
  ParamGroup g;
  g.params = {a, b};
  g.names = {"a", "head.last_layer.weight_v"};
  g.lr = 0.1;
  g.weight_decay = 0.5;
  auto opt = make_adamw({g});
  a.mutable_grad() = torch::ones({2, 2});
  opt->step();
  EXPECT_TRUE(torch::equal(b, torch::ones({2, 2}))) << "no decay, no update without a grad";
  EXPECT_FALSE(torch::equal(a, torch::ones({2, 2})));
  const auto state = opt->state_dict().toGenericDict().at("state").toGenericDict();
  EXPECT_EQ(state.size(), 1u);
  EXPECT_TRUE(state.contains(int64_t{0}));
}

TEST(SGD, MatchesClosedFormWithMomentum) {
  auto p = torch::tensor({1.0f, -2.0f});
  auto opt = make_sgd({one_param(p, 0.1, 0.01)});
  auto ref = p.to(torch::kDouble);
  torch::Tensor buf;
  for (int t = 0; t < 3; ++t) {
    const auto g = torch::tensor({0.5f * (t + 1), -0.25f});
    p.mutable_grad() = g;
    opt->step();
    const auto d = g.to(torch::kDouble) + 0.01 * ref;
    buf = t == 0 ? d : 0.9 * buf + d;
    ref = ref - 0.1 * buf;
    EXPECT_TRUE(torch::allclose(p.to(torch::kDouble), ref, 1e-6, 1e-7)) << t;
  }
}

TEST(LARS, MatchesDinoLarsClosedForm) {
  auto w = torch::tensor({{3.0f, 4.0f}});   // 2-D: decay + trust ratio
  auto bias = torch::tensor({1.0f, 1.0f});  // 1-D: plain momentum
  ParamGroup g;
  g.params = {w, bias};
  g.names = {"w", "b"};
  g.lr = 0.5;
  g.weight_decay = 0.1;
  auto opt = make_lars({g});
  w.mutable_grad() = torch::tensor({{1.0f, 0.0f}});
  bias.mutable_grad() = torch::tensor({0.2f, -0.2f});
  opt->step();
  // dp = g + 0.1 w = (1.3, 0.4); q = 0.001 * |w| / |dp| = 0.005 / sqrt(1.85); p -= lr * q * dp.
  const double q = 0.001 * 5.0 / std::sqrt(1.3 * 1.3 + 0.4 * 0.4);
  EXPECT_NEAR(w[0][0].item<double>(), 3.0 - 0.5 * q * 1.3, 1e-6);
  EXPECT_NEAR(w[0][1].item<double>(), 4.0 - 0.5 * q * 0.4, 1e-6);
  EXPECT_NEAR(bias[0].item<double>(), 1.0 - 0.5 * 0.2, 1e-6);
}

TEST(Optimizer, StateDictHasTorchLayoutAndResumesExactly) {
  torch::manual_seed(2);
  auto a = torch::randn({3, 2}), b = torch::randn({3});
  auto make_groups = [](torch::Tensor x, torch::Tensor y) {
    ParamGroup g0, g1;
    g0.params = {std::move(x)};
    g0.names = {"a"};
    g1.params = {std::move(y)};
    g1.names = {"b"};
    return std::vector<ParamGroup>{g0, g1};
  };
  auto opt = make_adamw(make_groups(a, b));
  std::vector<torch::Tensor> grads;
  for (int i = 0; i < 4; ++i)
    grads.push_back(torch::randn({3, 2})), grads.push_back(torch::randn({3}));
  for (int i = 0; i < 2; ++i) {
    a.mutable_grad() = grads[2 * i];
    b.mutable_grad() = grads[2 * i + 1];
    opt->param_groups()[0].lr = opt->param_groups()[1].lr = 0.01;
    opt->param_groups()[0].weight_decay = 0.05;
    opt->step();
  }
  const auto sd = opt->state_dict().toGenericDict();
  const auto groups = sd.at("param_groups").toListRef();
  ASSERT_EQ(groups.size(), 2u);
  const auto g0 = groups[0].toGenericDict();
  std::vector<std::string> keys;
  for (const auto& e : g0) keys.push_back(e.key().toStringRef());
  EXPECT_EQ(keys,
            (std::vector<std::string>{"lr", "betas", "eps", "weight_decay", "amsgrad", "params"}));
  EXPECT_EQ(groups[1].toGenericDict().at("params").toIntVector(), std::vector<int64_t>{1});
  const auto s1 = sd.at("state").toGenericDict().at(int64_t{1}).toGenericDict();
  EXPECT_EQ(s1.at("step").toInt(), 2);
  EXPECT_TRUE(s1.contains("exp_avg") && s1.contains("exp_avg_sq"));

  // A fresh optimiser on copies, loaded from the state dict, continues identically.
  auto a2 = a.clone(), b2 = b.clone();
  auto opt2 = make_adamw(make_groups(a2, b2));
  opt2->load_state_dict(sd);
  EXPECT_DOUBLE_EQ(opt2->param_groups()[0].weight_decay, 0.05);
  for (int i = 2; i < 4; ++i) {
    a.mutable_grad() = a2.mutable_grad() = grads[2 * i];
    b.mutable_grad() = b2.mutable_grad() = grads[2 * i + 1];
    opt->step();
    opt2->step();
  }
  EXPECT_TRUE(torch::equal(a, a2));
  EXPECT_TRUE(torch::equal(b, b2));

  auto wrong = make_adamw({one_param(torch::zeros({3, 2}), 0, 0)});
  EXPECT_THROW(wrong->load_state_dict(sd), xdino::Error);
}

TEST(Gradients, ClipEachTensorSeparately) {
  auto big = torch::zeros({2}, torch::requires_grad()),
       small = torch::zeros({2}, torch::requires_grad());
  big.mutable_grad() = torch::tensor({30.0f, 40.0f});  // norm 50 -> scaled to 3
  small.mutable_grad() = torch::tensor({0.3f, 0.4f});  // norm 0.5 -> untouched
  NamedTensors named;
  named.insert("big", big);
  named.insert("small", small);
  named.insert("nograd", torch::zeros({2}));
  const auto norms = clip_gradients(named, 3.0);
  EXPECT_EQ(norms.numel(), 2);
  EXPECT_NEAR(norms[0].item<double>(), 50.0, 1e-4);
  const double coef = 3.0 / (50.0 + 1e-6);
  EXPECT_NEAR(big.grad()[0].item<double>(), 30.0 * coef, 1e-5);
  EXPECT_NEAR(big.grad()[1].item<double>(), 40.0 * coef, 1e-5);
  EXPECT_TRUE(torch::equal(small.grad(), torch::tensor({0.3f, 0.4f})));
}

TEST(Gradients, LastLayerGradsBecomeUndefinedDuringFreeze) {
  auto student = tiny_student(false);
  const auto named = student->named_parameters();
  student->forward({torch::randn({2, 3, 8, 8})}).sum().backward();
  cancel_gradients_last_layer(1, named, 1);  // epoch 1 >= freeze 1: nothing happens
  EXPECT_TRUE(named["head.last_layer.weight_v"].grad().defined());
  cancel_gradients_last_layer(0, named, 1);
  EXPECT_FALSE(named["head.last_layer.weight_v"].grad().defined());
  EXPECT_FALSE(named["head.last_layer.weight_g"].grad().defined());
  EXPECT_TRUE(named["head.mlp.4.weight"].grad().defined());

  // The optimiser then leaves the last layer exactly as it was: no moments, no decay.
  const auto v_before = named["head.last_layer.weight_v"].clone();
  auto groups = dino_param_groups(named);
  for (auto& g : groups) g.lr = 0.1, g.weight_decay = 0.5;
  auto opt = make_adamw(std::move(groups));
  opt->step();
  EXPECT_TRUE(torch::equal(named["head.last_layer.weight_v"], v_before));
  const auto state = opt->state_dict().toGenericDict().at("state").toGenericDict();
  EXPECT_EQ(state.size(), student->parameters().size() - 2);
}
