// The DINO trainer end to end on a tiny backbone and synthetic crops (CPU, fp32): exact resume
// after a finished epoch, after a mid-epoch SIGTERM and after a crash that follows a timed
// checkpoint, non-finite handling, the checkpoint
// layout, and log.txt.
#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/host_reads.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "ssl/trainer.h"
#include "tests/support/synthetic_crops.h"
#include "tests/support/tiny_backbone.h"
#include "tests/support/train_fixture.h"

using namespace xdino::ssl;
namespace fs = std::filesystem;
using xdino::testing::TempDir;
using xdino::testing::tiny_options;
using xdino::testing::tiny_trainer;

namespace {

void expect_same_tensors(const c10::IValue& a, const c10::IValue& b, const std::string& what) {
  const auto da = a.toGenericDict(), db = b.toGenericDict();
  ASSERT_EQ(da.size(), db.size()) << what;
  for (const auto& e : da) {
    const auto& key = e.key().toStringRef();
    ASSERT_TRUE(db.contains(key)) << what << " " << key;
    EXPECT_TRUE(torch::equal(e.value().toTensor(), db.at(key).toTensor())) << what << " " << key;
  }
}

void expect_same_optimizer(const c10::IValue& a, const c10::IValue& b) {
  const auto sa = a.toGenericDict().at("state").toGenericDict();
  const auto sb = b.toGenericDict().at("state").toGenericDict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& e : sa) {
    const auto pa = e.value().toGenericDict(), pb = sb.at(e.key()).toGenericDict();
    EXPECT_EQ(pa.at("step").toInt(), pb.at("step").toInt());
    for (const char* k : {"exp_avg", "exp_avg_sq"})
      EXPECT_TRUE(torch::equal(pa.at(k).toTensor(), pb.at(k).toTensor())) << k;
  }
}

void expect_same_checkpoints(const fs::path& a, const fs::path& b) {
  const auto ca = xdino::load_pth(a).toGenericDict(), cb = xdino::load_pth(b).toGenericDict();
  expect_same_tensors(ca.at("student"), cb.at("student"), "student");
  expect_same_tensors(ca.at("teacher"), cb.at("teacher"), "teacher");
  expect_same_tensors(ca.at("dino_loss"), cb.at("dino_loss"), "dino_loss");
  ASSERT_EQ(ca.contains("ibot_patch_loss"), cb.contains("ibot_patch_loss"));
  if (ca.contains("ibot_patch_loss"))
    expect_same_tensors(ca.at("ibot_patch_loss"), cb.at("ibot_patch_loss"), "ibot_patch_loss");
  expect_same_optimizer(ca.at("optimizer"), cb.at("optimizer"));
  EXPECT_EQ(ca.at("epoch").toInt(), cb.at("epoch").toInt());
}

}  // namespace

TEST(DinoTrain, WritesOfficialCheckpointLayoutAndLog) {
  TempDir dir;
  auto opt = tiny_options(dir.path());
  auto trainer = tiny_trainer(opt);
  EXPECT_EQ(trainer->train(), TrainOutcome::kCompleted);
  for (const char* f : {"checkpoint.pth", "checkpoint0000.pth", "checkpoint0001.pth", "log.txt"})
    EXPECT_TRUE(fs::exists(dir.path() / f)) << f;

  const auto ckpt = xdino::load_pth(dir.path() / "checkpoint.pth").toGenericDict();
  std::vector<std::string> keys;
  for (const auto& e : ckpt) keys.push_back(e.key().toStringRef());
  EXPECT_EQ(keys, (std::vector<std::string>{"student", "teacher", "optimizer", "epoch", "args",
                                            "dino_loss", "xdino_resume"}));
  EXPECT_EQ(ckpt.at("epoch").toInt(), 2);
  const auto student = ckpt.at("student").toGenericDict();
  EXPECT_TRUE(student.contains("module.backbone.cls_token"));
  EXPECT_TRUE(student.contains("module.backbone.patch_embed.1.num_batches_tracked"));
  EXPECT_TRUE(student.contains("module.head.mlp.0.weight"));
  EXPECT_EQ(student.at("module.head.last_layer.weight_g").toTensor().sizes(),
            torch::IntArrayRef({opt.head.out_dim, 1}));
  EXPECT_TRUE(ckpt.at("teacher").toGenericDict().contains("module.head.last_layer.weight_v"))
      << "the teacher is DDP-wrapped in the official code when the model has BatchNorm";
  EXPECT_EQ(ckpt.at("dino_loss").toGenericDict().at("center").toTensor().sizes(),
            torch::IntArrayRef({1, opt.head.out_dim}));
  EXPECT_EQ(ckpt.at("args").toGenericDict().at("out_dim").toInt(), opt.head.out_dim);
  const auto groups = ckpt.at("optimizer").toGenericDict().at("param_groups").toListRef();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1].toGenericDict().at("weight_decay").toDouble(), 0.0);

  const std::string log = xdino::read_file(dir.path() / "log.txt");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 2);
  EXPECT_EQ(log.rfind("{\"train_loss\": ", 0), 0u) << log;
  EXPECT_NE(log.find(", \"train_lr\": "), std::string::npos);
  EXPECT_NE(log.find("\"epoch\": 1, \"train_momentum\""), std::string::npos) << log;
}

TEST(DinoTrain, ResumeAfterAnEpochEqualsAStraightRun) {
  TempDir straight, split;
  auto opt = tiny_options(straight.path());
  ASSERT_EQ(tiny_trainer(opt)->train(), TrainOutcome::kCompleted);

  opt.output_dir = split.path().string();
  auto first = tiny_trainer(opt);
  const int64_t last_of_epoch0 = first->iterations_per_epoch() - 1;
  first->set_hooks({[&](int64_t it, torch::Tensor&, torch::Tensor&) {
                      if (it == last_of_epoch0) std::raise(SIGTERM);
                    },
                    nullptr});
  EXPECT_EQ(first->train(), TrainOutcome::kStopped);
  EXPECT_EQ(xdino::load_pth(split.path() / "checkpoint.pth").toGenericDict().at("epoch").toInt(),
            1);
  first.reset();
  EXPECT_EQ(tiny_trainer(opt)->train(), TrainOutcome::kCompleted);

  expect_same_checkpoints(straight.path() / "checkpoint.pth", split.path() / "checkpoint.pth");
  EXPECT_EQ(xdino::read_file(straight.path() / "log.txt"),
            xdino::read_file(split.path() / "log.txt"));
}

// A straight run against one stopped by SIGTERM in epoch 1, batch 1 and resumed: same
// weights, optimiser state, center and log.
void expect_sigterm_resume_is_exact(xdino::ssl::DinoOptions opt) {
  TempDir straight, split;
  opt.output_dir = straight.path().string();
  ASSERT_EQ(tiny_trainer(opt)->train(), TrainOutcome::kCompleted);

  opt.output_dir = split.path().string();
  auto first = tiny_trainer(opt);
  const int64_t niter = first->iterations_per_epoch();
  const int64_t stop_at = niter + 1;  // epoch 1, batch 1
  first->set_hooks({[&](int64_t it, torch::Tensor&, torch::Tensor&) {
                      if (it == stop_at) std::raise(SIGTERM);
                    },
                    nullptr});
  EXPECT_EQ(first->train(), TrainOutcome::kStopped);
  const auto ckpt = xdino::load_pth(split.path() / "checkpoint.pth").toGenericDict();
  EXPECT_EQ(ckpt.at("epoch").toInt(), 1);
  EXPECT_EQ(ckpt.at("xdino_resume").toGenericDict().at("iteration").toInt(), stop_at + 1);
  first.reset();

  auto data = std::make_shared<xdino::testing::SyntheticCrops>(
      niter, opt.batch_size_per_gpu, opt.local_crops_number, opt.global_crops_size,
      opt.local_crops_size);
  auto second = tiny_trainer(opt, data);
  EXPECT_EQ(second->train(), TrainOutcome::kCompleted);
  EXPECT_EQ(data->batches_served, niter - (stop_at + 1) % niter);

  expect_same_checkpoints(straight.path() / "checkpoint.pth", split.path() / "checkpoint.pth");
  EXPECT_EQ(xdino::read_file(straight.path() / "log.txt"),
            xdino::read_file(split.path() / "log.txt"));
}

namespace {

// tiny_options with the registry's backbone `arch`, a 64-wide head and global / local crops of
// `global_px` / `local_px`: the real backbones' mid-epoch resume tests.
DinoOptions registry_backbone_options(const fs::path& dir, const std::string& arch, int global_px,
                                      int local_px) {
  auto opt = tiny_options(dir);
  opt.arch = arch;
  opt.head.out_dim = 64;
  opt.global_crops_size = global_px;
  opt.local_crops_size = local_px;
  return opt;
}

}  // namespace

TEST(DinoTrain, SigtermMidEpochSavesAndResumeContinuesExactly) {
  TempDir unused;
  expect_sigterm_resume_is_exact(tiny_options(unused.path()));
}

TEST(DinoTrain, XCiTNanoResumesExactlyMidEpoch) {
  // The real backbone: XCiT BatchNorm buffers, drop path in every XCA block.
  TempDir unused;
  expect_sigterm_resume_is_exact(
      registry_backbone_options(unused.path(), "xcit_nano_12_p16", 32, 16));
}

TEST(DinoTrain, ResNetResumesExactlyMidEpoch) {
  // A ResNet: every layer's BatchNorm running statistics (buffers the checkpoint carries, in
  // the student and the teacher) must come back as they were mid-epoch.
  TempDir unused;
  expect_sigterm_resume_is_exact(registry_backbone_options(unused.path(), "resnet18", 32, 16));
}

TEST(DinoTrain, Dinov2OptionsResumeExactlyMidEpoch) {
  // KoLeo and iBOT with its own head and running centre (ssl/recipe.h): the resumed
  // iterations draw their masks again from (seed, iteration), the iBOT centre comes back.
  TempDir unused;
  auto opt = registry_backbone_options(unused.path(), "xcit_nano_4_p4", 28, 12);
  opt.recipe.koleo_loss_weight = 0.1;
  opt.recipe.ibot_loss_weight = 1.0;
  opt.recipe.ibot_separate_head = true;
  expect_sigterm_resume_is_exact(opt);
}

TEST(DinoTrain, ReplicasResumeExactlyMidEpoch) {
  // Two replicas (docs/dino.md, "Replicas"): the generator state a checkpoint saves is the one
  // the split step leaves, and the step does not depend on thread timing.
  TempDir unused;
  auto opt = registry_backbone_options(unused.path(), "xcit_nano_4_p4", 28, 12);
  opt.replicas = 2;
  expect_sigterm_resume_is_exact(opt);
}

// --saveckp_minutes: a checkpoint after every iteration (the interval is a nanosecond), then a
// crash (an exception: nothing more is saved) in epoch 1, batch 1. The rerun redoes that one
// iteration and ends where a run without timed saves ends: saving changes nothing.
TEST(DinoTrain, TimedCheckpointsResumeExactlyAfterACrash) {
  TempDir straight, crashed;
  auto opt = tiny_options(straight.path());
  opt.saveckp_minutes = 0;
  ASSERT_EQ(tiny_trainer(opt)->train(), TrainOutcome::kCompleted);

  opt.output_dir = crashed.path().string();
  opt.saveckp_minutes = 1e-12;
  auto first = tiny_trainer(opt);
  const int64_t niter = first->iterations_per_epoch();
  const int64_t crash_at = niter + 1;
  first->set_hooks({nullptr, [&](int64_t it) {
                      if (it == crash_at) throw std::runtime_error("simulated crash");
                    }});
  EXPECT_THROW(first->train(), std::runtime_error);
  EXPECT_GT(first->times().checkpoint, 0.0);
  const auto ckpt = xdino::load_pth(crashed.path() / "checkpoint.pth").toGenericDict();
  EXPECT_EQ(ckpt.at("epoch").toInt(), 1);
  EXPECT_EQ(ckpt.at("xdino_resume").toGenericDict().at("iteration").toInt(), crash_at);
  EXPECT_EQ(ckpt.at("args").toGenericDict().at("saveckp_minutes").toDouble(), 1e-12);
  first.reset();

  auto data = std::make_shared<xdino::testing::SyntheticCrops>(
      niter, opt.batch_size_per_gpu, opt.local_crops_number, opt.global_crops_size,
      opt.local_crops_size);
  EXPECT_EQ(tiny_trainer(opt, data)->train(), TrainOutcome::kCompleted);
  EXPECT_EQ(data->batches_served, niter - 1) << "only the crashed iteration is redone";
  expect_same_checkpoints(straight.path() / "checkpoint.pth", crashed.path() / "checkpoint.pth");
  EXPECT_EQ(xdino::read_file(straight.path() / "log.txt"),
            xdino::read_file(crashed.path() / "log.txt"));
}

TEST(DinoTrain, RefusesANegativeCheckpointInterval) {
  TempDir dir;
  auto opt = tiny_options(dir.path());
  opt.saveckp_minutes = -1;
  EXPECT_THROW(tiny_trainer(opt), xdino::UsageError);
}

// --cuda_graph refuses, with a usage error naming the fix, what one captured pass cannot hold;
// the device is checked last, so that each case reaches its own message here.
TEST(DinoTrain, CudaGraphRefusesWhatItCannotCapture) {
  struct Case {
    std::function<void(DinoOptions&)> set;
    std::string says;
  };
  const std::vector<Case> cases = {
      {[](DinoOptions& o) { o.accum_iter = 2; }, "--accum_iter 1"},
      // The count and the flag named (it said "drop it with 1 processes").
      {[](DinoOptions& o) { o.replicas = 2; }, "set --replicas 1 (got 2)"},
      {[](DinoOptions& o) {
         o.arch = "xcit_nano_12_p16";
         o.recipe.ibot_loss_weight = 1.0;
       },
       "cannot capture iBOT"},
      {[](DinoOptions&) {}, "needs a CUDA device (got cpu)"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    auto opt = tiny_options(dir.path());
    opt.cuda_graph = true;
    c.set(opt);
    try {
      tiny_trainer(opt);
      ADD_FAILURE() << "accepted; expected: " << c.says;
    } catch (const xdino::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
}

// The step's host reads (core/host_reads.h), counted between the ends of consecutive steps
// on the CPU build, where the same calls are made as on a GPU: one read-back per step; one
// more for the clip coefficients over the multi-tensor path (per tensor, clipping multiplies
// on the device); fp16's found-inf verdict would be one more (a GPU only). Before, the flags
// were a blocking copy and iBOT's counts two more reads (DinoTrain's stated numbers below).
TEST(DinoTrain, TheStepReadsTheHostOnlyAsItSays) {
  struct Case {
    double clip;
    xdino::train::UpdatePath path;
    bool ibot;
    int64_t reads;
  };
  for (const Case& c : {Case{0, xdino::train::UpdatePath::kAuto, false, 1},
                        Case{3, xdino::train::UpdatePath::kPerTensor, false, 1},
                        Case{3, xdino::train::UpdatePath::kMultiTensor, false, 2},
                        Case{0, xdino::train::UpdatePath::kAuto, true, 1}}) {
    SCOPED_TRACE("clip " + std::to_string(c.clip) + (c.ibot ? ", iBOT + Sinkhorn-Knopp" : ""));
    TempDir dir;
    auto opt = tiny_options(dir.path());
    opt.clip_grad = c.clip;
    opt.update_path = c.path;
    if (c.ibot) {
      opt.arch = "xcit_nano_12_p16";
      opt.global_crops_size = 32;
      opt.local_crops_size = 16;
      opt.recipe.ibot_loss_weight = 1.0;
      opt.recipe.centering = "sinkhorn_knopp";
    }
    auto trainer = tiny_trainer(opt);
    std::vector<int64_t> at_end;
    trainer->set_hooks({nullptr, [&](int64_t) { at_end.push_back(xdino::host_reads()); }});
    trainer->train();
    // Within an epoch: its end (statistics, checkpoint) reads more, by design.
    ASSERT_GE(at_end.size(), 3u);
    for (size_t i = 1; i < 3; ++i) EXPECT_EQ(at_end[i] - at_end[i - 1], c.reads) << "step " << i;
  }
}

// The step reads its numbers back once, at its end (ssl/trainer.cpp, train_step): the message
// still names the part that went non-finite first, and the micro-batch when there are several.
TEST(DinoTrain, NonFiniteOutputStopsAndLeavesCheckpointUntouched) {
  struct Case {
    std::string which;
    int64_t accum_iter, bad_call;  // bad_call: which forward of iteration niter + 1 (from 0)
    std::string where;
  };
  for (const Case& c : {Case{"student output", 1, 0, ""}, Case{"teacher output", 1, 0, ""},
                        Case{"student output", 2, 0, "(micro-batch 1 of 2)"}}) {
    TempDir dir;
    auto opt = tiny_options(dir.path());
    opt.accum_iter = c.accum_iter;
    opt.batch_size_per_gpu /= c.accum_iter;  // the same 3 iterations of 2 images
    auto trainer =
        tiny_trainer(opt, std::make_shared<xdino::testing::SyntheticCrops>(
                              3 * c.accum_iter, opt.batch_size_per_gpu, opt.local_crops_number,
                              opt.global_crops_size, opt.local_crops_size));
    const int64_t niter = trainer->iterations_per_epoch();
    std::string saved;
    int64_t calls = 0;
    torch::Tensor student_before, teacher_before;  // at the bad iteration's first forward
    const auto probe = [](MultiCropWrapper& m) {
      return m->named_parameters()["head.mlp.0.weight"].detach().clone();
    };
    trainer->set_hooks({[&](int64_t it, torch::Tensor& s, torch::Tensor& t) {
                          if (it == niter) saved = xdino::read_file(dir.path() / "checkpoint.pth");
                          if (it == niter + 1 && calls == 0) {
                            student_before = probe(trainer->student());
                            teacher_before = probe(trainer->teacher());
                          }
                          if (it != niter + 1 || calls++ != c.bad_call) return;
                          // A product keeps the student's graph, as an overflow would.
                          torch::Tensor& target = c.which == "student output" ? s : t;
                          target = target * NAN;
                        },
                        nullptr});
    try {
      trainer->train();
      FAIL() << "a NaN " << c.which << " must stop the run";
    } catch (const xdino::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("iteration " + std::to_string(niter + 1)), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.which), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.where), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos);
    }
    ASSERT_FALSE(saved.empty());
    EXPECT_EQ(xdino::read_file(dir.path() / "checkpoint.pth"), saved) << c.which;
    // The step's one read-back comes after its update and EMA (trainer.h): the networks in
    // memory hold the bad step, only the files are kept from it.
    ASSERT_TRUE(student_before.defined());
    EXPECT_FALSE(torch::equal(probe(trainer->student()), student_before)) << c.which;
    EXPECT_FALSE(torch::equal(probe(trainer->teacher()), teacher_before)) << c.which;
    EXPECT_FALSE(fs::exists(dir.path() / "checkpoint0001.pth"));
  }
}

TEST(DinoTrain, SchedulesDriveEveryIteration) {
  // lr (every group) and wd (group 0 only) are set from the schedules before each step, and
  // the teacher moves with momentum_schedule[it]; expected values from the closed forms of
  // docs/dino.md's schedules with 2 epochs x 3 iterations, 1 warmup epoch, total batch 2.
  TempDir dir;
  auto opt = tiny_options(dir.path());
  auto trainer = tiny_trainer(opt);
  const double pi = std::acos(-1.0), base_lr = opt.lr * 2 / 256;
  const auto cosine = [&](double base, double final, int i, int len) {
    return final + 0.5 * (base - final) * (1 + std::cos(pi * i / len));
  };
  torch::Tensor teacher_before;
  const auto probe = [&](MultiCropWrapper& m) {
    return m->named_parameters()["head.mlp.0.weight"].detach().clone().to(torch::kDouble);
  };
  int checked = 0;
  trainer->set_hooks(
      {[&](int64_t it, torch::Tensor&, torch::Tensor&) {
         const auto& g = trainer->optimizer().param_groups();
         const int i = static_cast<int>(it);
         const double lr = i < 3 ? base_lr * i / 2 : cosine(base_lr, opt.min_lr, i - 3, 3);
         EXPECT_NEAR(g[0].lr, lr, 1e-15) << it;
         EXPECT_NEAR(g[1].lr, lr, 1e-15) << it;
         EXPECT_NEAR(g[0].weight_decay, cosine(0.04, 0.4, i, 6), 1e-15) << it;
         EXPECT_EQ(g[1].weight_decay, 0.0) << it;
         teacher_before = probe(trainer->teacher());
       },
       [&](int64_t it) {
         const double m = cosine(0.996, 1.0, static_cast<int>(it), 6);
         const auto expect = m * teacher_before + (1 - m) * probe(trainer->student());
         EXPECT_TRUE(torch::allclose(probe(trainer->teacher()), expect, 1e-6, 1e-7)) << it;
         ++checked;
       }});
  ASSERT_EQ(trainer->train(), TrainOutcome::kCompleted);
  EXPECT_EQ(checked, 6);
}

TEST(DinoTrain, Bf16AutocastTrainsOnCpu) {
  TempDir dir;
  auto opt = tiny_options(dir.path());
  opt.epochs = 1;
  opt.precision = "bf16";
  auto trainer = tiny_trainer(opt);
  EXPECT_TRUE(trainer->precision().autocast);
  EXPECT_EQ(trainer->scaler(), nullptr);
  torch::ScalarType seen = torch::kFloat;
  trainer->set_hooks(
      {[&](int64_t, torch::Tensor& s, torch::Tensor&) { seen = s.scalar_type(); }, nullptr});
  ASSERT_EQ(trainer->train(), TrainOutcome::kCompleted);
  EXPECT_EQ(seen, torch::kBFloat16);  // the head's matmuls ran under autocast
  EXPECT_EQ(trainer->loss()->center.scalar_type(), torch::kFloat);
  for (const auto& p : trainer->student()->parameters())
    EXPECT_EQ(p.scalar_type(), torch::kFloat);  // master weights stay fp32
  EXPECT_NE(xdino::read_file(dir.path() / "log.txt").find("\"train_loss\": "), std::string::npos);
}
