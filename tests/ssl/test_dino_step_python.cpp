// The DINO step against Python: our trainer and PyTorch running main_dino.py's operations
// (bench/reference/official_dino_step.py --parity) start from the same weights (ours, saved here),
// see the same crops, and must end with the same student, teacher and center.
//
// Run: XCiT-N12/8 (BatchNorm patch embedding, XCA, LPI, class attention), 32 px global and
// 16 px local crops, 2 epochs x 2 iterations, so that each of these shows up in the result:
// the lr warm-up (iteration 0 has lr 0) and cosine, the weight-decay and teacher-momentum
// cosines, the teacher-temperature warm-up (0.04 in epoch 0, 0.07 in epoch 1), the frozen
// last layer of epoch 0 (no gradient: AdamW neither decays nor moves it), per-tensor gradient
// clipping, the regularised/unregularised parameter groups, BatchNorm's running statistics in
// the student and in the (train-mode) teacher, and the center's EMA. Drop path is 0: the two
// sides draw random numbers differently.
//
// Tolerance, and why: both sides compute in fp32 with different operation orders (our XCA
// normalises the d x d product, the optimiser and EMA run fused), so gradients agree to about
// 1e-6 relative, and AdamW's first steps (about lr x sign(gradient) per weight) amplify that
// where a gradient is near zero. Each tensor's update from the initial weights is compared:
// ||ours - theirs||_2 <= 3% of ||theirs||_2 (measured: at most 0.4%, in a class-attention
// qkv bias), and no weight may differ by more than a full step the other way (2 x the summed
// lr). The schedules are compared exactly through log.txt, the loss to 1e-5 relative.
// It fails when one side changes any of: freeze_last_layer 1 -> 0 (relative difference 114%),
// clip_grad 3 -> 0.5 (11%), momentum_teacher 0.996 -> 0.99 (60%), teacher_temp 0.07 -> 0.06
// (6%), warmup_epochs 1 -> 0 (177%), weight_decay_end 0.4 -> 0.1 (29%), min_lr 1e-6 -> 1e-4
// (3.75%), each also through the log where the value shows there.
// Skipped (failing in CI, tests/support/require.h) when /usr/bin/python3 cannot import torch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/ivalue.h"
#include "core/json.h"
#include "core/pth.h"
#include "ssl/checkpoint.h"
#include "ssl/trainer.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/synthetic_crops.h"
#include "tests/support/train_fixture.h"

using namespace xdino::ssl;
namespace fs = std::filesystem;
using xdino::testing::kPython;
using xdino::testing::TempDir;

namespace {

std::string step_script() {
  return (fs::path(xdino::testing::test_data_dir()) / ".." / ".." / "bench" / "reference" /
          "official_dino_step.py")
      .string();
}

DinoOptions parity_options(const fs::path& dir) {
  DinoOptions o;
  o.arch = "xcit_nano_12_p8";
  o.head.out_dim = 64;
  o.loss.warmup_teacher_temp = 0.04;
  o.loss.teacher_temp = 0.07;
  o.loss.warmup_teacher_temp_epochs = 1;
  o.epochs = 2;
  o.batch_size_per_gpu = 4;
  o.local_crops_number = 2;
  o.global_crops_size = 32;
  o.local_crops_size = 16;
  o.lr = 0.05;  // 0.05 x 4 / 256 = 7.8e-4 after warm-up
  o.warmup_epochs = 1;
  o.drop_path_rate = 0.0;
  o.use_fp16 = false;
  o.precision = "fp32";
  o.device = "cpu";
  o.saveckp_freq = 100;
  o.output_dir = dir.string();
  return o;
}

constexpr int64_t kBatches = 2;  // per epoch

xdino::IDict state_dict(torch::nn::Module& m) {
  auto d = xdino::make_dict();
  for (const auto& p : m.named_parameters()) d.insert(p.key(), p.value().detach().clone());
  for (const auto& b : m.named_buffers()) d.insert(b.key(), b.value().detach().clone());
  return d;
}

// The checkpoint's "args" (main_dino.py's Namespace) plus the head sizes it fixes.
c10::IValue args_dict(const DinoOptions& o) {
  auto d = options_dict(o);
  d.insert("hidden_dim", o.head.hidden_dim);
  d.insert("bottleneck_dim", o.head.bottleneck_dim);
  return d;
}

// Every crop of the run, iteration by iteration, as the trainer will see them.
c10::IValue all_batches(const DinoOptions& o) {
  xdino::testing::SyntheticCrops data(kBatches, o.batch_size_per_gpu, o.local_crops_number,
                                      o.global_crops_size, o.local_crops_size);
  c10::impl::GenericList batches(c10::AnyType::get());
  for (int64_t e = 0; e < o.epochs; ++e) {
    data.start_epoch(e, 0);
    for (int64_t b = 0; b < kBatches; ++b) {
      c10::impl::GenericList crops(c10::AnyType::get());
      for (auto& c : data.next_batch()) crops.push_back(c);
      batches.push_back(crops);
    }
  }
  return batches;
}

// Compares every tensor of `ours` with the Python state_dict `theirs` (same keys, same
// shapes; integer buffers equal), through the update each side made from `init`:
// |delta_ours - delta_theirs| <= max_abs everywhere, and ||delta_ours - delta_theirs||_2 <=
// rel x ||delta_theirs||_2 + floor for each tensor.
void expect_module_close(torch::nn::Module& ours, const c10::IValue& theirs,
                         const xdino::IDict& init, double max_abs, double rel, double floor,
                         const std::string& what) {
  const auto d = theirs.toGenericDict();
  int64_t compared = 0;
  double worst_abs = 0, worst_rel = 0;
  std::string worst_key;
  auto compare = [&](const std::string& key, const torch::Tensor& a) {
    ASSERT_TRUE(d.contains(key)) << what << ": Python has no " << key;
    const auto t = d.at(key).toTensor();
    ASSERT_EQ(a.sizes(), t.sizes()) << what << " " << key;
    ++compared;
    if (!a.is_floating_point()) {
      EXPECT_TRUE(torch::equal(a, t)) << what << " " << key;
      return;
    }
    const auto start = init.at(key).toTensor().to(torch::kDouble);
    const auto mine = a.detach().to(torch::kDouble) - start, theirs = t.to(torch::kDouble) - start;
    const double abs_diff = (mine - theirs).abs().max().item<double>();
    const double norm_diff = (mine - theirs).norm().item<double>();
    const double norm = theirs.norm().item<double>();
    worst_abs = std::max(worst_abs, abs_diff);
    if (norm > 0 && norm_diff / norm > worst_rel) {
      worst_rel = norm_diff / norm;
      worst_key = key;
    }
    EXPECT_LE(abs_diff, max_abs) << what << " " << key;
    EXPECT_LE(norm_diff, rel * norm + floor)
        << what << " " << key << ": update differs by " << norm_diff << " of " << norm;
  };
  for (const auto& p : ours.named_parameters()) compare(p.key(), p.value());
  for (const auto& p : ours.named_buffers()) compare(p.key(), p.value());
  EXPECT_EQ(compared, static_cast<int64_t>(d.size())) << what << ": Python has other keys";
  std::printf(
      "%s: %lld tensors, largest difference %.3g (bound %.3g), largest relative update "
      "difference %.3g in %s (bound %.3g)\n",
      what.c_str(), static_cast<long long>(compared), worst_abs, max_abs, worst_rel,
      worst_key.c_str(), rel);
}

std::vector<double> doubles(const c10::IValue& v) {
  std::vector<double> out;
  for (const auto& x : v.toListRef()) out.push_back(x.toDouble());
  return out;
}

}  // namespace

TEST(DinoStepPython, TwoEpochsMatchTheOfficialOperations) {
  if (!xdino::testing::python_has("torch"))
    XDINO_SKIP_MISSING() << kPython << " cannot import torch";
  TempDir dir;
  const auto o = parity_options(dir.path());
  auto data = std::make_shared<xdino::testing::SyntheticCrops>(
      kBatches, o.batch_size_per_gpu, o.local_crops_number, o.global_crops_size,
      o.local_crops_size);
  auto trainer = xdino::testing::tiny_trainer(o, data);

  auto init = xdino::make_dict();
  init.insert("args", args_dict(o));
  const auto init_student = state_dict(*trainer->student());
  init.insert("student", init_student);
  init.insert("batches", all_batches(o));
  const fs::path init_file = dir.path() / "parity_init.pth";
  const fs::path result_file = dir.path() / "parity_result.pth";
  xdino::save_pth(init_file, init);

  ASSERT_EQ(trainer->train(), TrainOutcome::kCompleted);
  const auto r = xdino::testing::run_process(
      {kPython, step_script(), "--parity", init_file.string(), result_file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto result = xdino::load_pth(result_file).toGenericDict();

  // The schedules, iteration by iteration, through log.txt's epoch means.
  const auto lr = doubles(result.at("lr")), wd = doubles(result.at("wd")),
             momentum = doubles(result.at("momentum")), loss = doubles(result.at("loss"));
  ASSERT_EQ(lr.size(), static_cast<size_t>(o.epochs * kBatches));
  EXPECT_EQ(lr[0], 0.0) << "warm-up starts at 0";
  std::vector<std::string> lines;
  std::istringstream log(xdino::read_file(dir.path() / "log.txt"));
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), static_cast<size_t>(o.epochs));
  for (int64_t e = 0; e < o.epochs; ++e) {
    const auto j = xdino::Json::parse(lines[e]);
    auto mean = [&](const std::vector<double>& v) {
      return (v[e * kBatches] + v[e * kBatches + 1]) / 2;
    };
    EXPECT_NEAR(j.at("train_lr").get<double>(), mean(lr), 1e-12) << "epoch " << e;
    EXPECT_NEAR(j.at("train_wd").get<double>(), mean(wd), 1e-12) << "epoch " << e;
    EXPECT_NEAR(j.at("train_momentum").get<double>(), mean(momentum), 1e-12) << "epoch " << e;
    EXPECT_EQ(j.at("train_teacher_temp").get<double>(), e == 0 ? 0.04 : 0.07) << "epoch " << e;
    EXPECT_NEAR(j.at("train_loss").get<double>(), mean(loss), 1e-5 * mean(loss)) << "epoch " << e;
  }

  double lr_sum = 0;
  for (double v : lr) lr_sum += v;
  const double max_abs = 2 * lr_sum * (1 + o.weight_decay_end), rel = 0.03, floor = 1e-12;
  expect_module_close(*trainer->student(), result.at("student"), init_student, max_abs, rel, floor,
                      "student");
  expect_module_close(*trainer->teacher(), result.at("teacher"), init_student, max_abs, rel, floor,
                      "teacher");
  const auto center_diff =
      (trainer->loss()->center - result.at("center").toTensor()).abs().max().item<double>();
  EXPECT_LE(center_diff, 1e-4 * result.at("center").toTensor().abs().max().item<double>());
}
