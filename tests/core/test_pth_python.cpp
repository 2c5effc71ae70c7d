// Cross-checks with Python's torch (Debian /usr/bin/python3) in both directions: we read what
// torch.save writes now, and torch.load reads what we write. Skipped without Python torch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>

#include "core/pth.h"
#include "core/pth/pickle.h"
#include "core/pth/zip.h"
#include "tests/support/pth_testing.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using c10::IValue;
using xdino::testing::describe;
using xdino::testing::run_pth_tool;
using xdino::testing::split_lines;

namespace {

#define SKIP_WITHOUT_PYTHON_TORCH()                                                            \
  if (!xdino::testing::python_torch_available())                                               \
  XDINO_SKIP_MISSING() << "/usr/bin/python3 cannot import torch and numpy (install them with " \
                          "scripts/setup.sh --tests)"

// What a DINO training checkpoint holds (docs/checkpoints.md), small.
IValue checkpoint_like() {
  torch::manual_seed(3);
  const auto backbone = [](const char* prefix) {
    auto sd = xdino::testing::any_dict();
    const std::string p = prefix;
    sd.insert(p + "cls_token", torch::randn({1, 1, 4}));
    sd.insert(p + "blocks.0.attn.qkv.weight", torch::randn({12, 4}));
    sd.insert(p + "blocks.0.attn.temperature", torch::ones({2, 1, 1}));
    sd.insert(p + "patch_embed.proj.0.1.num_batches_tracked", torch::tensor(int64_t(1251)));
    return sd;
  };
  auto student = backbone("module.backbone.");
  student.insert("module.head.last_layer.weight_g", torch::ones({16, 1}));
  auto teacher = backbone("module.backbone.");
  auto group0 = xdino::testing::any_dict();
  group0.insert("lr", 0.00025);
  group0.insert("betas", c10::ivalue::Tuple::create({0.9, 0.999}));
  group0.insert("weight_decay", 0.04);
  group0.insert("amsgrad", false);
  c10::impl::GenericList params(c10::AnyType::get());
  for (int64_t i = 0; i < 3; ++i) params.push_back(i);
  group0.insert("params", params);
  c10::impl::GenericList groups(c10::AnyType::get());
  groups.push_back(group0);
  auto state = xdino::testing::any_dict();
  auto s0 = xdino::testing::any_dict();
  s0.insert("step", int64_t(40));
  s0.insert("exp_avg", torch::randn({12, 4}));
  s0.insert("exp_avg_sq", torch::rand({12, 4}).to(torch::kDouble));
  state.insert(int64_t(0), s0);
  auto optimizer = xdino::testing::any_dict();
  optimizer.insert("state", state);
  optimizer.insert("param_groups", groups);
  auto args = xdino::testing::any_dict();
  args.insert("__class__", std::string("argparse.Namespace"));
  args.insert("arch", std::string("xcit_small_12_p16"));
  args.insert("global_crops_scale", c10::ivalue::Tuple::create({0.4, 1.0}));
  args.insert("output_dir", std::string("/tmp/run"));
  auto loss = xdino::testing::any_dict();
  loss.insert("center", torch::randn({1, 16}));
  auto scaler = xdino::testing::any_dict();
  scaler.insert("scale", 65536.0);
  scaler.insert("_growth_tracker", int64_t(12));
  const at::Tensor shared = torch::arange(10, torch::kFloat);
  auto extra = xdino::testing::any_dict();
  extra.insert("bf16", torch::randn({3}).to(torch::kBFloat16));
  extra.insert("f16", torch::randn({3}).to(torch::kHalf));
  extra.insert("i64", torch::tensor({INT64_MIN, INT64_MAX}));
  extra.insert("bool", torch::tensor({true, false}));
  extra.insert("shared", shared);
  extra.insert("strided_view", shared.slice(0, 1, 9, 3));
  extra.insert("transposed", torch::randn({2, 3}).t());
  auto v = xdino::testing::any_dict();
  v.insert("student", student);
  v.insert("teacher", teacher);
  v.insert("optimizer", optimizer);
  v.insert("epoch", int64_t(21));
  v.insert("args", args);
  v.insert("dino_loss", loss);
  v.insert("fp16_scaler", scaler);
  v.insert("extra", extra);
  return v;
}

}  // namespace

TEST(PthPython, WeReadWhatTorchSaveWritesForEveryProtocol) {
  SKIP_WITHOUT_PYTHON_TORCH();
  const fs::path dir = xdino::testing::fresh_dir("pthpy_read");
  const std::vector<std::string> printed =
      split_lines(run_pth_tool({"write-mixed", dir.string(), "2", "4", "5"}));
  ASSERT_EQ(std::count(printed.begin(), printed.end(), "# p4.pth"), 1);
  std::vector<std::string> ours;
  for (const char* name : {"p2.pth", "p4.pth", "p5.pth"}) {
    ours.push_back(std::string("# ") + name);
    for (std::string& line : describe(xdino::load_pth(dir / name))) ours.push_back(line);
  }
  EXPECT_EQ(ours, printed);
  fs::remove_all(dir);
}

TEST(PthPython, TorchLoadReadsTheCheckpointsWeWrite) {
  SKIP_WITHOUT_PYTHON_TORCH();
  const fs::path dir = xdino::testing::fresh_dir("pthpy_write");
  const IValue value = checkpoint_like();
  xdino::save_pth(dir / "checkpoint.pth", value);
  EXPECT_EQ(split_lines(run_pth_tool({"describe", (dir / "checkpoint.pth").string()})),
            describe(value));
  fs::remove_all(dir);
}

TEST(PthPython, TorchLoadWeightsOnlyAcceptsOurFilesWithoutPythonObjects) {
  SKIP_WITHOUT_PYTHON_TORCH();
  const fs::path dir = xdino::testing::fresh_dir("pthpy_safe");
  // Weights as a backbone release holds them (torch 1.13's weights_only unpickler refuses Python
  // floats even in files torch.save wrote, and argparse.Namespace needs weights_only=False as in
  // official checkpoints; both are fine for torch.load's default).
  const auto full = checkpoint_like().toGenericDict();
  auto value = xdino::testing::any_dict();
  for (const char* key : {"teacher", "epoch", "extra"}) value.insert(key, full.at(key));
  xdino::save_pth(dir / "checkpoint.pth", value);
  EXPECT_EQ(split_lines(run_pth_tool({"describe-safe", (dir / "checkpoint.pth").string()})),
            describe(value));
  fs::remove_all(dir);
}

TEST(PthPython, TorchLoadReadsZip64Records) {
  SKIP_WITHOUT_PYTHON_TORCH();
  const fs::path dir = xdino::testing::fresh_dir("pthpy_zip64");
  const IValue value = checkpoint_like();
  xdino::testing::save_pth_zip64(dir / "z.pth", value);
  EXPECT_EQ(split_lines(run_pth_tool({"describe", (dir / "z.pth").string()})), describe(value));
  fs::remove_all(dir);
}
