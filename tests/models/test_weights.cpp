// State dicts: PyTorch's key order, strict loading that leaves the module alone on failure,
// and the official pretrained loader on fake DINO / XCiT files.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "core/check.h"
#include "core/pth.h"
#include "models/weights.h"
#include "tests/support/pth_testing.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
namespace nn = torch::nn;
using xdino::models::LoadReport;
using xdino::models::StateDict;

using xdino::testing::error_of;

namespace {

// The structure of pth_tool.py's Net: children registered before parameters, a buffer, a
// BatchNorm, a parameterless child (GELU) inside a Sequential, an Identity head.
struct BlockImpl : nn::Module {
  BlockImpl() {
    register_module("norm", nn::LayerNorm(nn::LayerNormOptions({4})));
    register_parameter("gamma", torch::ones({4}));
    register_module("mlp", nn::Sequential(nn::Linear(4, 8), nn::GELU(), nn::Linear(8, 4)));
    register_buffer("scale", torch::ones({1}));
    register_module("bn", nn::BatchNorm1d(4));
    register_parameter("temperature", torch::ones({2, 1, 1}));
  }
};
TORCH_MODULE(Block);

struct NetImpl : nn::Module {
  explicit NetImpl(int64_t width = 4, bool classifier = false) {
    register_module("embed", nn::Linear(nn::LinearOptions(2, width).bias(false)));
    register_parameter("cls_token", torch::randn({1, 1, width}));
    register_module("blocks", nn::ModuleList(Block(), Block()));
    if (classifier)
      register_module("head", nn::Linear(4, 3));
    else
      register_module("head", nn::Identity());
    register_module("pos", nn::Conv2d(nn::Conv2dOptions(4, 4, 1)));
  }
};
TORCH_MODULE(Net);

// PyTorch's rule written out by hand: own parameters, own buffers, then children.
std::vector<std::string> expected_keys() {
  std::vector<std::string> keys = {"cls_token", "embed.weight"};
  for (const std::string b : {"blocks.0.", "blocks.1."})
    for (const char* k : {"gamma", "temperature", "scale", "norm.weight", "norm.bias",
                          "mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "bn.weight",
                          "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"})
      keys.push_back(b + k);
  keys.push_back("pos.weight");
  keys.push_back("pos.bias");
  return keys;
}

std::vector<std::string> keys_of(const StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& item : sd) out.push_back(item.key());
  return out;
}

StateDict clone(const StateDict& sd) {
  StateDict out;
  for (const auto& item : sd) out.insert(item.key(), item.value().clone());
  return out;
}

void expect_bit_identical(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(keys_of(a), keys_of(b));
  for (const auto& item : a) {
    SCOPED_TRACE(item.key());
    const torch::Tensor& other = *b.find(item.key());
    EXPECT_EQ(item.value().scalar_type(), other.scalar_type());
    EXPECT_TRUE(torch::equal(item.value(), other));
  }
}

// `sd` with every key prefixed, as a GenericDict (how DDP/MultiCropWrapper name them).
c10::impl::GenericDict prefixed(const StateDict& sd, const std::string& prefix) {
  auto d = xdino::testing::any_dict();
  for (const auto& item : sd) d.insert(prefix + item.key(), item.value());
  return d;
}

}  // namespace

TEST(StateDictOrder, MatchesPyTorchsRule) {
  Net net;
  EXPECT_EQ(keys_of(xdino::models::state_dict(*net)), expected_keys());
}

TEST(StateDictOrder, MatchesPythonsStateDictOfTheSameModule) {
  if (!xdino::testing::python_torch_available())
    XDINO_SKIP_MISSING() << "/usr/bin/python3 cannot import torch (scripts/setup.sh --tests)";
  Net net;
  std::vector<std::string> ours;
  for (const auto& item : xdino::models::state_dict(*net))
    ours.push_back(item.key() + " [" + c10::Join(", ", item.value().sizes()) + "]");
  EXPECT_EQ(ours, xdino::testing::split_lines(xdino::testing::run_pth_tool({"module-keys"})));
}

TEST(StateDictOrder, TensorsAliasTheModuleButCarryNoGradient) {
  Net net;
  const StateDict sd = xdino::models::state_dict(*net);
  EXPECT_FALSE(sd["cls_token"].requires_grad());
  EXPECT_TRUE(sd["cls_token"].is_alias_of(net->named_parameters()["cls_token"]));
}

TEST(LoadStateDict, CopiesValuesConvertingDtype) {
  Net source, target;
  StateDict sd = clone(xdino::models::state_dict(*source));
  sd["blocks.0.gamma"] = sd["blocks.0.gamma"].to(torch::kDouble) * 3;  // converted on copy
  const LoadReport report = xdino::models::load_state_dict(*target, sd);
  EXPECT_EQ(report.loaded, int64_t(expected_keys().size()));
  const StateDict now = xdino::models::state_dict(*target);
  EXPECT_EQ(now["blocks.0.gamma"].scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(now["blocks.0.gamma"], sd["blocks.0.gamma"].to(torch::kFloat)));
  EXPECT_TRUE(torch::equal(now["cls_token"], sd["cls_token"]));
}

TEST(LoadStateDict, StrictFailuresNameTheKeyAndLeaveTheModuleUnchanged) {
  Net target, other;
  const StateDict before = clone(xdino::models::state_dict(*target));
  const StateDict good = clone(xdino::models::state_dict(*other));

  StateDict wrong_shape = clone(good);
  wrong_shape["pos.weight"] = torch::zeros({4, 8, 1, 1});
  std::string msg = error_of([&] { xdino::models::load_state_dict(*target, wrong_shape); });
  EXPECT_NE(msg.find("checkpoint key 'pos.weight' has shape [4, 8, 1, 1] but the model expects "
                     "[4, 4, 1, 1]"),
            std::string::npos)
      << msg;
  expect_bit_identical(xdino::models::state_dict(*target), before);
  // Shape mismatches fail without strict too, as in PyTorch.
  EXPECT_THROW(xdino::models::load_state_dict(*target, wrong_shape, false), xdino::Error);
  expect_bit_identical(xdino::models::state_dict(*target), before);

  StateDict missing;
  for (const auto& item : good)
    if (item.key() != "blocks.1.norm.bias") missing.insert(item.key(), item.value());
  msg = error_of([&] { xdino::models::load_state_dict(*target, missing, true, "'x.pth'"); });
  EXPECT_NE(msg.find("'x.pth': the model's key 'blocks.1.norm.bias' (shape [4]) is missing"),
            std::string::npos)
      << msg;
  expect_bit_identical(xdino::models::state_dict(*target), before);

  StateDict unexpected = clone(good);
  unexpected.insert("module.extra", torch::zeros({2, 2}));
  msg = error_of([&] { xdino::models::load_state_dict(*target, unexpected); });
  EXPECT_NE(msg.find("checkpoint key 'module.extra' (shape [2, 2]) is not in the model"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("load_pretrained"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  expect_bit_identical(xdino::models::state_dict(*target), before);
}

TEST(LoadStateDict, NonStrictReportsWhatItSkipped) {
  Net target, other;
  StateDict partial;
  for (const auto& item : xdino::models::state_dict(*other))
    if (item.key().rfind("blocks.1.", 0) != 0) partial.insert(item.key(), item.value().clone());
  partial.insert("head.mlp.0.weight", torch::zeros({3}));
  const LoadReport report = xdino::models::load_state_dict(*target, partial, false);
  EXPECT_EQ(report.missing.size(), 13u);  // blocks.1.* except num_batches_tracked
  EXPECT_EQ(report.unexpected, std::vector<std::string>{"head.mlp.0.weight"});
  EXPECT_EQ(report.loaded, 2 + 14 + 2);
  EXPECT_NE(report.summary().find("13 missing (blocks.1.gamma"), std::string::npos)
      << report.summary();
}

TEST(LoadStateDict, BatchNormCountMayBeAbsentOrOneElement) {
  Net target, other;
  StateDict sd = clone(xdino::models::state_dict(*other));
  StateDict without;
  for (const auto& item : sd)
    if (item.key() != "blocks.0.bn.num_batches_tracked") without.insert(item.key(), item.value());
  without["blocks.1.bn.num_batches_tracked"] = torch::tensor({int64_t(77)});  // shape [1]
  xdino::models::load_state_dict(*target, without);
  const StateDict now = xdino::models::state_dict(*target);
  EXPECT_EQ(now["blocks.1.bn.num_batches_tracked"].item<int64_t>(), 77);
  EXPECT_EQ(now["blocks.0.bn.num_batches_tracked"].item<int64_t>(), 0);
}

TEST(LoadStateDict, AModuleSavedAndLoadedBackIsBitIdentical) {
  const fs::path dir = xdino::testing::fresh_dir("weights_roundtrip");
  Net source, target;
  xdino::models::state_dict(*source)["blocks.0.bn.running_var"].uniform_();
  xdino::save_pth(dir / "m.pth", xdino::models::to_ivalue(xdino::models::state_dict(*source)));
  const StateDict loaded = xdino::models::from_ivalue(xdino::load_pth(dir / "m.pth"));
  xdino::models::load_state_dict(*target, loaded);
  expect_bit_identical(xdino::models::state_dict(*target), xdino::models::state_dict(*source));
  fs::remove_all(dir);
}

TEST(LoadPretrained, DinoTrainingCheckpointTeacherOrStudent) {
  const fs::path dir = xdino::testing::fresh_dir("weights_dino");
  Net student, teacher;
  const StateDict s = xdino::models::state_dict(*student), t = xdino::models::state_dict(*teacher);
  auto student_dict = prefixed(s, "module.backbone.");
  auto teacher_dict = prefixed(t, "module.backbone.");
  for (auto* d : {&student_dict, &teacher_dict}) {
    d->insert("module.head.mlp.0.weight", torch::zeros({8, 4}));
    d->insert("module.head.last_layer.weight_g", torch::ones({16, 1}));
  }
  auto ckpt = xdino::testing::any_dict();
  ckpt.insert("student", student_dict);
  ckpt.insert("teacher", teacher_dict);
  ckpt.insert("epoch", int64_t(3));
  xdino::save_pth(dir / "checkpoint.pth", ckpt);

  Net model;
  LoadReport report = xdino::models::load_pretrained(*model, dir / "checkpoint.pth");
  expect_bit_identical(xdino::models::state_dict(*model), t);
  EXPECT_EQ(report.ignored, (std::vector<std::string>{"module.head.mlp.0.weight",
                                                      "module.head.last_layer.weight_g"}));
  EXPECT_TRUE(report.missing.empty() && report.unexpected.empty());
  xdino::models::load_pretrained(*model, dir / "checkpoint.pth", "student");
  expect_bit_identical(xdino::models::state_dict(*model), s);

  // No usable key: the error names the file and suggests --checkpoint_key.
  const std::string msg =
      error_of([&] { xdino::models::load_pretrained(*model, dir / "checkpoint.pth", ""); });
  EXPECT_NE(msg.find((dir / "checkpoint.pth").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("--checkpoint_key"), std::string::npos) << msg;

  // A key the file lacks: the error names it and the keys the file holds (eval_knn.py would
  // silently take the whole file and load nothing).
  const std::string typo =
      error_of([&] { xdino::models::load_pretrained(*model, dir / "checkpoint.pth", "studnt"); });
  EXPECT_NE(typo.find("has no key 'studnt' (--checkpoint_key); it holds 'student', 'teacher', "
                      "'epoch'"),
            std::string::npos)
      << typo;
  fs::remove_all(dir);
}

TEST(LoadPretrained, BackboneOnlyAndSupervisedFiles) {
  const fs::path dir = xdino::testing::fresh_dir("weights_files");
  Net reference;
  const StateDict ref = xdino::models::state_dict(*reference);
  xdino::save_pth(dir / "backbone.pth", xdino::models::to_ivalue(ref));  // DINO release file
  Net model;
  xdino::models::load_pretrained(*model, dir / "backbone.pth");
  expect_bit_identical(xdino::models::state_dict(*model), ref);

  Net classifier(4, /*classifier=*/true);
  const StateDict cls = xdino::models::state_dict(*classifier);
  auto supervised = xdino::testing::any_dict();
  supervised.insert("model", xdino::models::to_ivalue(cls));  // XCiT repo layout
  supervised.insert("epoch", int64_t(400));
  xdino::save_pth(dir / "supervised.pth", supervised);
  Net backbone_only;
  const LoadReport r = xdino::models::load_pretrained(*backbone_only, dir / "supervised.pth");
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"head.weight", "head.bias"}));
  Net with_head(4, true);
  EXPECT_TRUE(xdino::models::load_pretrained(*with_head, dir / "supervised.pth").ignored.empty());
  expect_bit_identical(xdino::models::state_dict(*with_head), cls);

  // A wider model: the first mismatching key and both shapes, with the file and sub-dict.
  Net wide(6);
  const std::string msg =
      error_of([&] { xdino::models::load_pretrained(*wide, dir / "supervised.pth"); });
  EXPECT_NE(msg.find((dir / "supervised.pth").string() +
                     "' (key 'model'): checkpoint key "
                     "'cls_token' has shape [1, 1, 4] but the model expects [1, 1, 6]"),
            std::string::npos)
      << msg;
  fs::remove_all(dir);
}
