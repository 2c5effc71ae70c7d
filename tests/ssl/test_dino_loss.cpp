// DINOLoss against an explicit float64 loop over the (q, v != q) pairs of main_dino.py
// (docs/dino.md, "Loss and center"), the center-before-update rule, the per-epoch teacher
// temperature and the cross-process center average.
#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"
#include "ssl/loss.h"

using namespace xdino::ssl;

namespace {

constexpr int64_t B = 3, K = 7, NCROPS = 4;

DINOLossOptions opts() {
  DINOLossOptions o;
  o.out_dim = K;
  o.ncrops = NCROPS;
  o.warmup_teacher_temp = 0.04;
  o.teacher_temp = 0.07;
  o.warmup_teacher_temp_epochs = 3;
  o.epochs = 5;
  return o;
}

// Plain double loops; no vectorised tensor math shared with the implementation.
double reference_loss(const torch::Tensor& S, const torch::Tensor& T, const torch::Tensor& c,
                      double temp) {
  const auto s = S.to(torch::kDouble).contiguous();
  const auto t = T.to(torch::kDouble).contiguous();
  const auto cc = c.to(torch::kDouble).contiguous();
  const auto sa = s.accessor<double, 2>();
  const auto ta = t.accessor<double, 2>();
  const auto ca = cc.accessor<double, 2>();
  double total = 0;
  int terms = 0;
  for (int q = 0; q < 2; ++q) {
    for (int v = 0; v < NCROPS; ++v) {
      if (v == q) continue;
      double pair = 0;
      for (int b = 0; b < B; ++b) {
        std::vector<double> p(K), ls(K);
        double zmax = -1e300, smax = -1e300;
        for (int k = 0; k < K; ++k) {
          p[k] = (ta[q * B + b][k] - ca[0][k]) / temp;
          ls[k] = sa[v * B + b][k] / 0.1;
          zmax = std::max(zmax, p[k]);
          smax = std::max(smax, ls[k]);
        }
        double zs = 0, ss = 0;
        for (int k = 0; k < K; ++k) {
          zs += std::exp(p[k] - zmax);
          ss += std::exp(ls[k] - smax);
        }
        double ce = 0;
        for (int k = 0; k < K; ++k) {
          const double pk = std::exp(p[k] - zmax) / zs;
          const double lsk = ls[k] - smax - std::log(ss);
          ce += -pk * lsk;
        }
        pair += ce / B;
      }
      total += pair;
      ++terms;
    }
  }
  EXPECT_EQ(terms, 2 * (NCROPS - 1));
  return total / terms;
}

class FakeTwoProcesses : public xdino::Communicator {
 public:
  explicit FakeTwoProcesses(torch::Tensor other) : other_(std::move(other)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void all_reduce_sum(std::vector<torch::Tensor>& ts) override {
    for (auto& t : ts) t.add_(other_);
  }
  void broadcast(std::vector<torch::Tensor>&, int) override {}
  std::vector<torch::Tensor> all_gather(const torch::Tensor& t) override { return {t, t}; }
  std::vector<torch::Tensor> all_gather_varying(const torch::Tensor& t) override { return {t, t}; }
  void barrier() override {}

 private:
  torch::Tensor other_;
};

}  // namespace

TEST(DINOLoss, MatchesExplicitPairLoopInFloat64) {
  torch::manual_seed(0);
  DINOLoss loss(opts(), nullptr);
  const auto S = torch::randn({NCROPS * B, K});
  const auto T = torch::randn({2 * B, K}) * 0.3;
  loss->center.copy_(torch::randn({1, K}) * 0.1);
  const auto c0 = loss->center.clone();
  for (int64_t epoch : {0, 1, 4}) {
    const auto c = loss->center.clone();
    const double temp = loss->teacher_temp(epoch);
    const double got = loss->forward(S, T, epoch).item<double>();
    EXPECT_NEAR(got, reference_loss(S, T, c, temp), 1e-5) << "epoch " << epoch;
  }
  EXPECT_FALSE(torch::equal(c0, loss->center));
}

TEST(DINOLoss, TeacherTemperatureSchedule) {
  const auto t = teacher_temp_schedule(0.04, 0.07, 30, 100);
  ASSERT_EQ(t.size(), 100u);
  EXPECT_DOUBLE_EQ(t[0], 0.04);
  EXPECT_DOUBLE_EQ(t[29], 0.07);
  EXPECT_NEAR(t[1], 0.04 + 0.03 / 29, 1e-15);
  EXPECT_DOUBLE_EQ(t[99], 0.07);
  const auto flat = teacher_temp_schedule(0.04, 0.04, 0, 5);
  for (double v : flat) EXPECT_DOUBLE_EQ(v, 0.04);
  EXPECT_THROW(teacher_temp_schedule(0.04, 0.07, 30, 10), xdino::UsageError);
}

TEST(DINOLoss, TeacherTemperatureIsPerEpoch) {
  DINOLoss loss(opts(), nullptr);
  EXPECT_DOUBLE_EQ(loss->teacher_temp(0), 0.04);
  EXPECT_DOUBLE_EQ(loss->teacher_temp(1), 0.055);
  EXPECT_DOUBLE_EQ(loss->teacher_temp(2), 0.07);
  EXPECT_DOUBLE_EQ(loss->teacher_temp(4), 0.07);
  EXPECT_THROW(loss->teacher_temp(5), xdino::Error);
}

TEST(DINOLoss, CenterUsesValueBeforeUpdateThenMovesTowardsBatchMean) {
  torch::manual_seed(1);
  DINOLoss loss(opts(), nullptr);
  const auto S = torch::randn({NCROPS * B, K});
  const auto T = torch::randn({2 * B, K});
  // First call: center 0 is used, so the loss equals the reference with a zero center.
  const double first = loss->forward(S, T, 2).item<double>();
  EXPECT_NEAR(first, reference_loss(S, T, torch::zeros({1, K}), 0.07), 1e-5);
  const auto mean = T.to(torch::kDouble).mean(0, true);
  EXPECT_TRUE(torch::allclose(loss->center.to(torch::kDouble), 0.1 * mean, 1e-6, 1e-7));
  const auto c1 = loss->center.clone();
  const double second = loss->forward(S, T, 2).item<double>();
  EXPECT_NEAR(second, reference_loss(S, T, c1, 0.07), 1e-5);
  EXPECT_TRUE(
      torch::allclose(loss->center.to(torch::kDouble), 0.9 * 0.1 * mean + 0.1 * mean, 1e-6, 1e-7));
}

TEST(DINOLoss, CenterAndStatisticsCoverAllProcessRows) {
  // The other process holds teacher rows T2; what it contributes to the one all-reduce is its
  // raw row sums, its softmax row sums and its summed entropy. Center and statistics must be
  // those of one process holding [T; T2].
  torch::manual_seed(2);
  const auto T = torch::randn({2 * B, K}), T2 = torch::randn({2 * B, K}) * 2;
  DINOLoss whole(opts(), nullptr);
  const double temp = whole->teacher_temp(0);
  const auto log_p2 = torch::log_softmax(T2 / temp, -1);
  const auto p2 = log_p2.exp();
  const auto other = torch::cat({T2.sum(0), p2.sum(0), -(p2 * log_p2).sum().view({1})});
  DINOLoss loss(opts(), std::make_shared<FakeTwoProcesses>(other));
  loss->forward(torch::randn({NCROPS * B, K}), T, 0);
  whole->forward(torch::randn({NCROPS * 2 * B, K}),
                 torch::cat({T.view({2, B, K}), T2.view({2, B, K})}, 1).view({4 * B, K}), 0);
  EXPECT_TRUE(torch::allclose(loss->center, whole->center, 1e-6, 1e-7));
  EXPECT_TRUE(torch::allclose(loss->center, 0.1 * (T.sum(0, true) + T2.sum(0, true)) / (4.0 * B),
                              1e-6, 1e-7));
  EXPECT_NEAR(loss->last_stats().teacher_entropy.item<double>(),
              whole->last_stats().teacher_entropy.item<double>(), 1e-5);
  EXPECT_NEAR(loss->last_stats().kl_uniform.item<double>(),
              whole->last_stats().kl_uniform.item<double>(), 1e-5);
}

TEST(DINOLoss, GradientMatchesFloat64Autograd) {
  torch::manual_seed(3);
  DINOLoss loss(opts(), nullptr);
  loss->center.copy_(torch::randn({1, K}) * 0.1);
  const auto c = loss->center.clone().to(torch::kDouble);
  auto S = torch::randn({NCROPS * B, K}).requires_grad_();
  const auto T = torch::randn({2 * B, K});
  loss->forward(S, T, 1).backward();

  // Reference: the official structure (18 separate pair means) in float64 with autograd.
  auto Sd = S.detach().to(torch::kDouble).requires_grad_();
  const auto p = torch::softmax((T.to(torch::kDouble) - c) / 0.055, -1).chunk(2);
  const auto s = (Sd / 0.1).chunk(NCROPS);
  torch::Tensor total = torch::zeros({}, torch::kDouble);
  int n = 0;
  for (int q = 0; q < 2; ++q)
    for (int v = 0; v < NCROPS; ++v)
      if (v != q) {
        total = total + torch::sum(-p[q] * torch::log_softmax(s[v], -1), -1).mean();
        ++n;
      }
  (total / n).backward();
  EXPECT_TRUE(torch::allclose(S.grad().to(torch::kDouble), Sd.grad(), 1e-5, 1e-7));
}

TEST(DINOLoss, LowPrecisionInputsGiveFp32Loss) {
  torch::manual_seed(4);
  DINOLoss loss(opts(), nullptr);
  const auto S = torch::randn({NCROPS * B, K});
  const auto T = torch::randn({2 * B, K});
  const auto l = loss->forward(S.to(torch::kBFloat16), T.to(torch::kBFloat16), 0);
  EXPECT_EQ(l.scalar_type(), torch::kFloat);
  EXPECT_EQ(loss->center.scalar_type(), torch::kFloat);
  EXPECT_NEAR(l.item<double>(), reference_loss(S, T, torch::zeros({1, K}), 0.04), 0.1);
}

TEST(DINOLoss, CollapseStatisticsMatchDefinitions) {
  torch::manual_seed(5);
  DINOLoss loss(opts(), nullptr);
  const auto T = torch::randn({2 * B, K});
  loss->forward(torch::randn({NCROPS * B, K}), T, 0);
  const auto p = torch::softmax(T.to(torch::kDouble) / 0.04, -1);
  const double H = (-(p * p.log()).sum(-1)).mean().item<double>();
  const auto pm = p.mean(0);
  const double kl = std::log(double(K)) + (pm * pm.log()).sum().item<double>();
  EXPECT_NEAR(loss->last_stats().teacher_entropy.item<double>(), H, 1e-5);
  EXPECT_NEAR(loss->last_stats().kl_uniform.item<double>(), kl, 1e-5);

  // One-dimension collapse: every teacher row picks dimension 3 -> KL to uniform = ln K.
  auto collapsed = torch::zeros({2 * B, K});
  collapsed.select(1, 3).fill_(10.0);
  loss->center.zero_();
  loss->forward(torch::randn({NCROPS * B, K}), collapsed, 0);
  EXPECT_NEAR(loss->last_stats().kl_uniform.item<double>(), std::log(double(K)), 1e-4);
  EXPECT_NEAR(loss->last_stats().teacher_entropy.item<double>(), 0.0, 1e-4);
}

TEST(DINOLoss, WrongShapesAreErrors) {
  DINOLoss loss(opts(), nullptr);
  EXPECT_THROW(loss->forward(torch::randn({NCROPS * B, K}), torch::randn({2 * B + 1, K}), 0),
               xdino::Error);
  EXPECT_THROW(loss->forward(torch::randn({NCROPS * B - 1, K}), torch::randn({2 * B, K}), 0),
               xdino::Error);
}
