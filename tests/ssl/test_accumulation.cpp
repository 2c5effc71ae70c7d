// Gradient accumulation (--accum_iter, docs/dino.md "Gradient accumulation"): N micro-batches
// of B images make one optimiser step, one EMA update and one center update, which equal one
// step on the N*B images at once wherever nothing looks across a batch (no BatchNorm). The
// truth is the trainer itself run on the concatenated batches.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/check.h"
#include "ssl/loss.h"
#include "ssl/trainer.h"
#include "tests/support/synthetic_crops.h"
#include "tests/support/train_fixture.h"

using namespace xdino::ssl;
using xdino::testing::SyntheticCrops;
using xdino::testing::TempDir;
using xdino::testing::tiny_options;
using xdino::testing::tiny_trainer;

namespace {

// Batch j of an epoch is batches j*N .. j*N+N-1 of `inner`, concatenated.
class ConcatenatedCrops : public DataSource {
 public:
  ConcatenatedCrops(std::shared_ptr<DataSource> inner, int64_t n)
      : inner_(std::move(inner)), n_(n) {}
  int64_t batches_per_epoch() const override { return inner_->batches_per_epoch() / n_; }
  void start_epoch(int64_t epoch, int64_t first_batch) override {
    inner_->start_epoch(epoch, first_batch * n_);
  }
  std::vector<torch::Tensor> next_batch() override {
    std::vector<std::vector<torch::Tensor>> parts;
    for (int64_t k = 0; k < n_; ++k) parts.push_back(inner_->next_batch());
    std::vector<torch::Tensor> crops;
    for (size_t c = 0; c < parts[0].size(); ++c) {
      std::vector<torch::Tensor> rows;
      for (const auto& p : parts) rows.push_back(p[c]);
      crops.push_back(torch::cat(rows));
    }
    return crops;
  }

 private:
  std::shared_ptr<DataSource> inner_;
  int64_t n_;
};

struct Trained {
  torch::OrderedDict<std::string, torch::Tensor> initial_student, student, teacher;
  torch::Tensor center;
};

// Trains `o` on `data` to the end and keeps the networks and the center.
Trained train_run(const DinoOptions& o, std::shared_ptr<DataSource> data) {
  auto trainer = tiny_trainer(o, std::move(data));
  Trained r;
  for (const auto& p : trainer->student()->named_parameters())
    r.initial_student.insert(p.key(), p.value().detach().clone());
  EXPECT_EQ(trainer->train(), TrainOutcome::kCompleted);
  for (const auto& p : trainer->student()->named_parameters())
    r.student.insert(p.key(), p.value().detach().clone());
  for (const auto& p : trainer->teacher()->named_parameters())
    r.teacher.insert(p.key(), p.value().detach().clone());
  r.center = trainer->loss()->center.clone();
  return r;
}

double max_abs_diff(const torch::OrderedDict<std::string, torch::Tensor>& a,
                    const torch::OrderedDict<std::string, torch::Tensor>& b) {
  double worst = 0;
  for (const auto& p : a)
    worst = std::max(worst, (p.value() - b[p.key()]).abs().max().item<double>());
  return worst;
}

constexpr int64_t kMicro = 3, kBatch = 2;

// Micro-batches of kBatch synthetic images, kMicro per step, 2 steps per epoch.
std::shared_ptr<DataSource> micro_batches(const DinoOptions& o) {
  return std::make_shared<SyntheticCrops>(2 * kMicro, kBatch, o.local_crops_number,
                                          o.global_crops_size, o.local_crops_size);
}

DinoOptions vit_options(const std::filesystem::path& dir) {
  auto o = tiny_options(dir);
  o.arch = "vit_tiny";  // LayerNorm only: nothing looks across the batch
  o.patch_size = 8;
  o.drop_path_rate = 0;  // the masks would be drawn per micro-batch
  o.lr = 0.5;            // steps well above the tolerance of the comparison
  // SGD is linear in the gradient: a wrong scale of the accumulated gradient (AdamW would hide
  // it) shows, and float32 rounding is not amplified as AdamW's 1/sqrt(v) amplifies it for
  // weights whose gradients are near zero.
  o.optimizer = "sgd";
  o.batch_size_per_gpu = kBatch;
  return o;
}

}  // namespace

TEST(Accumulation, LossMicroBatchesGiveTheCenterAndStatsOfTheWholeBatch) {
  // forward_micro on two halves + update_center == forward on the whole: same losses (each
  // half's mean, averaged), same center, same statistics.
  torch::manual_seed(3);
  DINOLossOptions lo;
  lo.out_dim = 16;
  lo.ncrops = 4;
  lo.epochs = 1;
  DINOLoss whole(lo, nullptr), split(lo, nullptr);
  whole->center.normal_();
  split->center.copy_(whole->center);
  const int64_t B = 6;
  auto student = torch::randn({lo.ncrops * B, lo.out_dim});
  auto teacher = torch::randn({2 * B, lo.out_dim});
  const auto expected = whole->forward(student, teacher, 0).item<double>();

  CenterSums sums;
  double mean = 0;
  const auto s = student.view({lo.ncrops, B, lo.out_dim}), t = teacher.view({2, B, lo.out_dim});
  for (int64_t h = 0; h < 2; ++h) {
    const auto sh = s.narrow(1, h * B / 2, B / 2).reshape({-1, lo.out_dim});
    const auto th = t.narrow(1, h * B / 2, B / 2).reshape({-1, lo.out_dim});
    const auto before = split->center.clone();
    mean += split->forward_micro(sh, th, 0, sums).item<double>() / 2;
    EXPECT_TRUE(torch::equal(split->center, before))
        << "the center moved before the last micro-batch";
  }
  EXPECT_EQ(sums.rows, 2 * B);
  split->update_center(sums);
  EXPECT_FALSE(sums.values.defined());
  EXPECT_NEAR(mean, expected, 1e-6);
  EXPECT_TRUE(torch::allclose(split->center, whole->center, 1e-6, 1e-7));
  EXPECT_NEAR(split->last_stats().teacher_entropy.item<double>(),
              whole->last_stats().teacher_entropy.item<double>(), 1e-6);
  EXPECT_NEAR(split->last_stats().kl_uniform.item<double>(),
              whole->last_stats().kl_uniform.item<double>(), 1e-6);
  CenterSums empty;
  EXPECT_THROW(split->update_center(empty), xdino::Error);
}

TEST(Accumulation, MicroBatchesOfAViTEqualOneBigBatch) {
  TempDir a_dir, b_dir;
  auto accumulated = vit_options(a_dir.path());
  accumulated.accum_iter = kMicro;
  auto big = vit_options(b_dir.path());
  big.batch_size_per_gpu = kBatch * kMicro;
  const Trained a = train_run(accumulated, micro_batches(accumulated));
  const Trained b = train_run(big, std::make_shared<ConcatenatedCrops>(micro_batches(big), kMicro));
  const double student = max_abs_diff(a.student, b.student);
  const double teacher = max_abs_diff(a.teacher, b.teacher);
  const double center = (a.center - b.center).abs().max().item<double>();
  EXPECT_LT(student, 2e-6) << "student";
  EXPECT_LT(teacher, 2e-6) << "teacher";
  EXPECT_LT(center, 1e-6) << "center";
  // The training moved the weights by far more than that tolerance.
  EXPECT_GT(max_abs_diff(a.initial_student, a.student), 100 * 2e-6);
  std::printf(
      "accum_iter %lld x batch %lld vs batch %lld: max |diff| student %.3g teacher %.3g "
      "center %.3g\n",
      static_cast<long long>(kMicro), static_cast<long long>(kBatch),
      static_cast<long long>(kMicro * kBatch), student, teacher, center);
}

TEST(Accumulation, BatchNormSeesEachMicroBatchAlone) {
  // TinyBackbone has BatchNorm in its patch embedding: each micro-batch is normalised by its
  // own statistics, so accumulation is a different function there (docs/dino.md). The same
  // comparison as above must then differ clearly, or the ViT test above proves nothing about
  // where the equality comes from.
  TempDir a_dir, b_dir;
  auto accumulated = tiny_options(a_dir.path());
  accumulated.drop_path_rate = 0;
  accumulated.batch_size_per_gpu = kBatch;
  accumulated.accum_iter = kMicro;
  auto big = accumulated;
  big.output_dir = b_dir.path().string();
  big.accum_iter = 1;
  big.batch_size_per_gpu = kBatch * kMicro;
  const Trained a = train_run(accumulated, micro_batches(accumulated));
  const Trained b = train_run(big, std::make_shared<ConcatenatedCrops>(micro_batches(big), kMicro));
  EXPECT_GT(max_abs_diff(a.student, b.student), 1e-3);
}

TEST(Accumulation, SigtermMidEpochResumesExactly) {
  // A stop lands between steps, never inside one; the resumed run repositions the data at
  // micro-batch (step * accum_iter) and ends where an uninterrupted run ends, bit for bit.
  TempDir straight_dir, stopped_dir;
  auto o = vit_options(straight_dir.path());
  o.accum_iter = kMicro;
  const Trained straight = train_run(o, micro_batches(o));

  o.output_dir = stopped_dir.path().string();
  {
    auto trainer = tiny_trainer(o, micro_batches(o));
    trainer->set_hooks({nullptr, [](int64_t it) {
                          // Seen during step 2 (epoch 1's first of 2): saved before step 3,
                          // whose data starts at micro-batch 3 * kMicro.
                          if (it == 1) std::raise(SIGTERM);
                        }});
    ASSERT_EQ(trainer->train(), TrainOutcome::kStopped);
  }
  const Trained resumed = train_run(o, micro_batches(o));
  EXPECT_EQ(max_abs_diff(resumed.student, straight.student), 0.0);
  EXPECT_EQ(max_abs_diff(resumed.teacher, straight.teacher), 0.0);
  EXPECT_TRUE(torch::equal(resumed.center, straight.center));
}

TEST(Accumulation, RefusesWhatCannotWork) {
  TempDir dir;
  auto o = tiny_options(dir.path());
  o.accum_iter = 0;
  EXPECT_THROW(tiny_trainer(o), xdino::UsageError);
  o.accum_iter = 4;  // 3 batches per epoch hold no step of 4 micro-batches
  try {
    tiny_trainer(o);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--accum_iter"), std::string::npos) << e.what();
  }
}
