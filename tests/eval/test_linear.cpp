// Linear probe training: golden values from PyTorch (tests/data/make_linear_golden.py) for the
// cosine schedule, the SGD steps and the DistributedSampler shards; a separable synthetic set.
#include <gtest/gtest.h>

#include <cmath>

#include "core/atomic_file.h"
#include "core/json.h"
#include "eval/linear.h"
#include "tests/support/process.h"

using namespace xdino::eval;
using xdino::Json;

namespace {

const Json& linear_golden() {
  static const Json g = xdino::parse_json(
      xdino::read_file(xdino::testing::test_data_dir() + "/linear_golden.json"), "golden");
  return g;
}

torch::Tensor tensor_of(const Json& list) {
  std::vector<float> v;
  for (const Json& x : list) v.push_back(static_cast<float>(x.get<double>()));
  return torch::tensor(v);
}

std::vector<int64_t> ints_of(const Json& list) {
  std::vector<int64_t> v;
  for (const Json& x : list) v.push_back(x.get<int64_t>());
  return v;
}

}  // namespace

TEST(Linear, CosineScheduleMatchesTorchCosineAnnealingLR) {
  const Json& c = linear_golden().at("cosine_lr");
  const Json& lrs = c.at("lr");
  for (size_t e = 0; e < lrs.size(); ++e)
    EXPECT_NEAR(cosine_lr(c.at("base").get<double>(), static_cast<int64_t>(e),
                          c.at("epochs").get<int64_t>()),
                lrs[e].get<double>(), 1e-15)
        << "epoch " << e;
}

TEST(Linear, InitialisationIsOfficial) {
  torch::manual_seed(0);
  LinearClassifier clf(384, 1000);
  EXPECT_EQ(clf->linear->weight.sizes(), (std::vector<int64_t>{1000, 384}));
  EXPECT_NEAR(clf->linear->weight.std().item<double>(), 0.01, 0.0002);
  EXPECT_NEAR(clf->linear->weight.mean().item<double>(), 0.0, 0.0002);
  EXPECT_EQ(clf->linear->bias.abs().max().item<float>(), 0.0f);
  const auto names = clf->named_parameters().keys();
  EXPECT_EQ(names, (std::vector<std::string>{"linear.weight", "linear.bias"}));
  // Inputs are flattened like x.view(B, -1).
  EXPECT_EQ(LinearClassifier(6, 2)->forward(torch::ones({3, 2, 3})).sizes(),
            (std::vector<int64_t>{3, 2}));
}

TEST(Linear, TrainingStepsMatchPyTorch) {
  const Json& g = linear_golden().at("sgd");
  const int64_t dim = g.at("dim").get<int64_t>(), labels = g.at("labels").get<int64_t>();
  const torch::Tensor x = tensor_of(g.at("x")).view({-1, dim});
  const torch::Tensor y = torch::tensor(ints_of(g.at("y")));
  LinearClassifier clf(dim, labels);
  {
    torch::NoGradGuard no_grad;
    clf->linear->weight.copy_(tensor_of(g.at("w0")).view({labels, dim}));
    clf->linear->bias.copy_(tensor_of(g.at("b0")));
  }
  LinearSchedule s;
  s.epochs = g.at("epochs").get<int64_t>();
  s.lr = g.at("lr").get<double>();
  const int64_t batch = g.at("batch").get<int64_t>();
  // In order, no shuffle: the batches of the Python loop.
  CachedBatches train(x, y, batch, false, 0, 0, 1, torch::kCPU);
  CachedBatches val(x, y, 5, false, 0, 0, 1, torch::kCPU);
  const double lr = scaled_lr(s, batch, 1);
  auto opt = make_linear_optimizer(clf, lr);
  std::vector<double> losses;
  const LinearOutcome out = train_linear(
      clf, *opt, train, val, s, lr, *xdino::local_communicator(), 0, {},
      [&](const EpochStats& e, const LinearOutcome&) { losses.push_back(e.train_loss); });
  EXPECT_TRUE(
      torch::allclose(clf->linear->weight, tensor_of(g.at("w")).view({labels, dim}), 1e-5, 1e-7));
  EXPECT_TRUE(torch::allclose(clf->linear->bias, tensor_of(g.at("b")), 1e-5, 1e-7));
  const Json& ref = g.at("train_loss");
  ASSERT_EQ(losses.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(losses[i], ref[i].get<double>(), 1e-6);
  ASSERT_TRUE(out.last.has_value());
  EXPECT_EQ(out.last->epoch, s.epochs - 1);
  EXPECT_TRUE(std::isnan(out.last->test->acc5));  // 3 labels: no top-5, as officially
}

TEST(Linear, ShuffledShardsMatchDistributedSampler) {
  const Json& g = linear_golden().at("sampler");
  const int64_t n = g.at("n").get<int64_t>();
  const int world = static_cast<int>(g.at("world").get<int64_t>());
  const torch::Tensor feats = torch::arange(n, torch::kFloat32).view({n, 1});
  for (int rank = 0; rank < world; ++rank) {
    CachedBatches b(feats, torch::zeros({n}, torch::kInt64), 100, true,
                    static_cast<uint64_t>(g.at("seed").get<int64_t>()), rank, world, torch::kCPU);
    b.start_epoch(g.at("epoch").get<int64_t>());
    torch::Tensor x, y;
    ASSERT_TRUE(b.next(x, y));
    std::vector<int64_t> got;
    for (int64_t i = 0; i < x.size(0); ++i)
      got.push_back(static_cast<int64_t>(x[i][0].item<float>()));
    EXPECT_EQ(got, ints_of(g.at("shards")[rank])) << "rank " << rank;
    EXPECT_FALSE(b.next(x, y));
  }
  // Validation shards: contiguous, no padding, every sample once.
  int64_t seen = 0;
  for (int rank = 0; rank < 3; ++rank) {
    CachedBatches v(feats, torch::zeros({n}, torch::kInt64), 3, false, 0, rank, 3, torch::kCPU);
    torch::Tensor x, y;
    while (v.next(x, y)) seen += x.size(0);
  }
  EXPECT_EQ(seen, n);
}

TEST(Linear, SeparableSetReachesFullAccuracy) {
  // 10 well-separated classes in 32 dims, Gaussian noise around random unit means.
  torch::manual_seed(3);
  const int64_t classes = 10, dim = 32, per = 40;
  const torch::Tensor means = torch::nn::functional::normalize(
      torch::randn({classes, dim}), torch::nn::functional::NormalizeFuncOptions().dim(1));
  auto make = [&](int64_t count) {
    const torch::Tensor y = torch::arange(classes).repeat({count});
    return std::make_pair(means.index_select(0, y) * 3 + 0.1 * torch::randn({y.size(0), dim}), y);
  };
  const auto [xtr, ytr] = make(per);
  const auto [xte, yte] = make(10);
  LinearClassifier clf(dim, classes);
  LinearSchedule s;
  s.epochs = 15;
  s.lr = 10.0;  // per 256 images; features are O(1), unlike ImageNet backbone outputs
  CachedBatches train(xtr, ytr, 32, true, 0, 0, 1, torch::kCPU);
  CachedBatches val(xte, yte, 64, false, 0, 0, 1, torch::kCPU);
  const double lr = scaled_lr(s, 32, 1);
  auto opt = make_linear_optimizer(clf, lr);
  std::vector<double> lrs;
  const LinearOutcome out =
      train_linear(clf, *opt, train, val, s, lr, *xdino::local_communicator(), 0, {},
                   [&](const EpochStats& e, const LinearOutcome&) { lrs.push_back(e.train_lr); });
  EXPECT_GE(out.best_acc, 99.9);
  EXPECT_GE(out.best_acc5, 99.9);
  EXPECT_GE(out.last->test->acc1, 99.9);
  // The lr logged per epoch follows lr * batch / 256 * (1 + cos(pi e / E)) / 2.
  ASSERT_EQ(lrs.size(), 15u);
  for (int e = 0; e < 15; ++e)
    EXPECT_NEAR(lrs[e], 10.0 * 32 / 256 * 0.5 * (1 + std::cos(M_PI * e / 15)), 1e-12);
}

TEST(Linear, ValidationFrequencyAndBestEpoch) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({40, 4});
  const torch::Tensor y = (x.select(1, 0) > 0).to(torch::kInt64);
  LinearClassifier clf(4, 2);
  LinearSchedule s;
  s.epochs = 8;
  s.val_freq = 3;
  s.lr = 50.0;
  CachedBatches train(x, y, 8, true, 0, 0, 1, torch::kCPU);
  CachedBatches val(x, y, 8, false, 0, 0, 1, torch::kCPU);
  const double lr = scaled_lr(s, 8, 1);
  auto opt = make_linear_optimizer(clf, lr);
  std::vector<int64_t> validated;
  double best_seen = 0;
  const LinearOutcome out = train_linear(clf, *opt, train, val, s, lr, *xdino::local_communicator(),
                                         0, {}, [&](const EpochStats& e, const LinearOutcome&) {
                                           if (e.test) {
                                             validated.push_back(e.epoch);
                                             best_seen = std::max(best_seen, e.test->acc1);
                                           }
                                         });
  EXPECT_EQ(validated, (std::vector<int64_t>{0, 3, 6, 7}));  // e % 3 == 0, plus the last
  EXPECT_DOUBLE_EQ(out.best_acc, best_seen);
}
