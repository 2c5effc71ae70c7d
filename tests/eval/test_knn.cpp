// Weighted k-NN: faiss search + vote against a naive float64 implementation written here,
// a hand-made vote with a known answer, and invariants (chunking, backends, class count).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"
#include "eval/knn.h"

using namespace xdino::eval;

namespace {

struct Data {
  torch::Tensor train, ytrain, test, ytest;
};

// Random unit vectors; labels uniform in [0, classes).
Data unit_data(int64_t n_train, int64_t n_test, int64_t dim, int64_t classes, uint64_t seed) {
  torch::manual_seed(seed);
  Data d;
  d.train = torch::nn::functional::normalize(torch::randn({n_train, dim}),
                                             torch::nn::functional::NormalizeFuncOptions().dim(1));
  d.test = torch::nn::functional::normalize(torch::randn({n_test, dim}),
                                            torch::nn::functional::NormalizeFuncOptions().dim(1));
  d.ytrain = torch::randint(classes, {n_train}, torch::kInt64);
  d.ytest = torch::randint(classes, {n_test}, torch::kInt64);
  return d;
}

// The official algorithm in plain loops and float64: full sort of the similarities, weights
// exp(s/T), class sums, classes ranked by score (ties: smaller index first, as documented).
struct Naive {
  std::vector<double> top1, top5;
  bool tie_free = true;  // no near-tie at a k boundary or at the top-5 class boundary
};

Naive naive_knn(const Data& d, const std::vector<int64_t>& ks, double T, int64_t classes) {
  const int64_t n = d.train.size(0), m = d.test.size(0), c = d.train.size(1);
  auto tr = d.train.accessor<float, 2>();
  auto te = d.test.accessor<float, 2>();
  Naive out;
  out.top1.assign(ks.size(), 0);
  out.top5.assign(ks.size(), 0);
  for (int64_t q = 0; q < m; ++q) {
    std::vector<std::pair<double, int64_t>> sims(n);
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < c; ++j) s += static_cast<double>(te[q][j]) * tr[i][j];
      sims[i] = {s, i};
    }
    std::sort(sims.begin(), sims.end(), [](auto a, auto b) { return a.first > b.first; });
    for (size_t ki = 0; ki < ks.size(); ++ki) {
      const int64_t k = ks[ki];
      if (k < n && sims[k - 1].first - sims[k].first < 2e-6) out.tie_free = false;
      std::vector<double> score(classes, 0.0);
      std::vector<bool> voted(classes, false);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t y = d.ytrain[sims[j].second].item<int64_t>();
        score[y] += std::exp(sims[j].first / T);
        voted[y] = true;
      }
      std::vector<int64_t> order(classes);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        if (voted[a] != voted[b]) return static_cast<bool>(voted[a]);
        return score[a] > score[b];
      });
      const int64_t top = std::min<int64_t>(5, k);
      for (int64_t r = 0; r + 1 < std::min<int64_t>(top + 1, classes); ++r)
        if (voted[order[r + 1]] && score[order[r]] - score[order[r + 1]] < 2e-5 * score[order[r]])
          out.tie_free = false;
      const int64_t target = d.ytest[q].item<int64_t>();
      out.top1[ki] += order[0] == target;
      for (int64_t r = 0; r < top; ++r) out.top5[ki] += order[r] == target;
    }
  }
  for (size_t ki = 0; ki < ks.size(); ++ki) {
    out.top1[ki] *= 100.0 / m;
    out.top5[ki] *= 100.0 / m;
  }
  return out;
}

void expect_same_result(const KnnResult& a, const KnnResult& b) {
  ASSERT_EQ(a.per_k.size(), b.per_k.size());
  for (size_t i = 0; i < a.per_k.size(); ++i) {
    EXPECT_EQ(a.per_k[i].k, b.per_k[i].k);
    EXPECT_DOUBLE_EQ(a.per_k[i].top1, b.per_k[i].top1) << "k=" << a.per_k[i].k;
    EXPECT_DOUBLE_EQ(a.per_k[i].top5, b.per_k[i].top5) << "k=" << a.per_k[i].k;
  }
}

}  // namespace

TEST(Knn, MatchesNaiveFloat64Implementation) {
  // Few classes and low dimension: neighbours share labels, so the vote decides.
  const Data d = unit_data(1200, 150, 8, 12, 1);
  const std::vector<int64_t> ks = {1, 3, 10, 20, 100, 200};
  const Naive naive = naive_knn(d, ks, 0.07, 12);
  ASSERT_TRUE(naive.tie_free) << "test data has near-ties; pick another seed";
  KnnParams p;
  p.ks = ks;
  const KnnResult r = knn_classify(d.train, d.ytrain, d.test, d.ytest, p);
  EXPECT_EQ(r.num_classes, 12);
  EXPECT_EQ(r.num_train, 1200);
  EXPECT_EQ(r.num_test, 150);
  for (size_t i = 0; i < ks.size(); ++i) {
    EXPECT_DOUBLE_EQ(r.per_k[i].top1, naive.top1[i]) << "k=" << ks[i];
    EXPECT_DOUBLE_EQ(r.per_k[i].top5, naive.top5[i]) << "k=" << ks[i];
  }
  // The data is not trivially easy: accuracies are between chance and perfect.
  EXPECT_GT(r.per_k[3].top5, r.per_k[3].top1);
}

TEST(Knn, NeighboursEqualBruteForce) {
  const Data d = unit_data(500, 20, 16, 5, 2);
  const Neighbours nb = search_neighbours(d.train, d.test, 30);
  const torch::Tensor sims = torch::mm(d.test.to(torch::kDouble), d.train.to(torch::kDouble).t());
  for (int64_t q = 0; q < 20; ++q) {
    std::vector<int64_t> order(500);
    std::iota(order.begin(), order.end(), 0);
    auto row = sims[q];
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return row[a].item<double>() > row[b].item<double>(); });
    for (int64_t j = 0; j < 30; ++j) {
      EXPECT_EQ(nb.indices[q][j].item<int64_t>(), order[j]) << "query " << q << " rank " << j;
      EXPECT_NEAR(nb.similarities[q][j].item<float>(), row[order[j]].item<double>(), 1e-5);
    }
  }
}

TEST(Knn, ClassCountComesFromTheData) {
  const Data d = unit_data(3000, 40, 32, 1500, 3);
  // Make sure label 1499 occurs so the count is exactly 1500.
  d.ytrain[0] = 1499;
  const std::vector<int64_t> ks = {10, 20};
  const Naive naive = naive_knn(d, ks, 0.07, 1500);
  ASSERT_TRUE(naive.tie_free);
  KnnParams p;
  p.ks = ks;
  const KnnResult r = knn_classify(d.train, d.ytrain, d.test, d.ytest, p);
  EXPECT_EQ(r.num_classes, 1500);
  for (size_t i = 0; i < ks.size(); ++i) {
    EXPECT_DOUBLE_EQ(r.per_k[i].top1, naive.top1[i]);
    EXPECT_DOUBLE_EQ(r.per_k[i].top5, naive.top5[i]);
  }
}

TEST(Knn, SevenQueriesWork) {
  // eval_knn.py would use chunks of 7 // 100 = 0 images and fail; we take any count.
  const Data d = unit_data(300, 7, 8, 4, 4);
  const Naive naive = naive_knn(d, {10, 20}, 0.07, 4);
  ASSERT_TRUE(naive.tie_free);
  KnnParams p;
  p.ks = {10, 20};
  const KnnResult r = knn_classify(d.train, d.ytrain, d.test, d.ytest, p);
  EXPECT_EQ(r.num_test, 7);
  EXPECT_DOUBLE_EQ(r.per_k[0].top1, naive.top1[0]);
  EXPECT_DOUBLE_EQ(r.per_k[1].top1, naive.top1[1]);
}

TEST(Knn, HandMadeVote) {
  // Neighbours: class 2 at 0.9; class 1 at 0.8 and 0.7; class 0 at 0.1.
  const float sims[] = {0.9f, 0.8f, 0.7f, 0.1f};
  const int64_t labels[] = {2, 1, 1, 0};
  std::vector<double> scratch;
  // T = 0.07: e^(0.9/0.07) = 3.84e5 beats e^(0.8/0.07) + e^(0.7/0.07) = 1.14e5.
  EXPECT_EQ(rank_classes(sims, labels, 4, 0.07, 6, 5, scratch),
            (std::vector<int64_t>{2, 1, 0, 3, 4}));
  // T = 1: e^0.9 = 2.46 loses to e^0.8 + e^0.7 = 4.24: the temperature matters.
  EXPECT_EQ(rank_classes(sims, labels, 4, 1.0, 6, 5, scratch),
            (std::vector<int64_t>{1, 2, 0, 3, 4}));
  // Only the first k neighbours vote: with k = 1 class 2 alone; unvoted classes by index.
  EXPECT_EQ(rank_classes(sims, labels, 1, 0.07, 6, 3, scratch), (std::vector<int64_t>{2, 0, 1}));
  // Scratch comes back clean: equal votes rank the smaller class first.
  const float equal[] = {0.5f, 0.5f};
  const int64_t two[] = {4, 3};
  EXPECT_EQ(rank_classes(equal, two, 2, 0.07, 6, 2, scratch), (std::vector<int64_t>{3, 4}));
}

TEST(Knn, HandMadeAccuracy) {
  // Train points on the unit circle; class 0 near angle 0, class 1 near angle pi/2.
  auto at = [](double a) { return std::vector<float>{float(std::cos(a)), float(std::sin(a))}; };
  std::vector<float> tr;
  for (double a : {0.0, 0.1, -0.1, 1.5708, 1.4708, 1.6708}) {
    auto v = at(a);
    tr.insert(tr.end(), v.begin(), v.end());
  }
  const auto train = torch::tensor(tr).view({6, 2});
  const auto ytrain = torch::tensor(std::vector<int64_t>{0, 0, 0, 1, 1, 1});
  std::vector<float> te;
  for (double a : {0.05, 1.6, 0.7}) {
    auto v = at(a);
    te.insert(te.end(), v.begin(), v.end());
  }
  const auto test = torch::tensor(te).view({3, 2});
  // Query 3 (angle 0.7) is nearer class 0 but labelled 1: 2 of 3 right.
  const auto ytest = torch::tensor(std::vector<int64_t>{0, 1, 1});
  KnnParams p;
  p.ks = {3};
  const KnnResult r = knn_classify(train, ytrain, test, ytest, p);
  EXPECT_NEAR(r.per_k[0].top1, 200.0 / 3, 1e-9);
  EXPECT_NEAR(r.per_k[0].top5, 100.0, 1e-9);  // 2 classes: always within the top min(5, 3)
}

TEST(Knn, ChunkingGivesTheSameResult) {
  const Data d = unit_data(800, 97, 16, 10, 5);
  KnnParams p;
  p.ks = {5, 20, 50};
  p.query_chunk = 4096;
  const KnnResult whole = knn_classify(d.train, d.ytrain, d.test, d.ytest, p);
  for (int64_t chunk : {1, 7, 50}) {
    p.query_chunk = chunk;
    expect_same_result(knn_classify(d.train, d.ytrain, d.test, d.ytest, p), whole);
  }
  const Neighbours a = search_neighbours(d.train, d.test, 50, 4096);
  const Neighbours b = search_neighbours(d.train, d.test, 50, 13);
  EXPECT_TRUE(torch::equal(a.indices, b.indices));
}

TEST(Knn, TorchBackendAgreesWithFaiss) {
  const Data d = unit_data(700, 60, 16, 9, 6);
  KnnParams p;
  p.ks = {10, 20};
  const KnnResult f = knn_classify(d.train, d.ytrain, d.test, d.ytest, p);
  p.backend = KnnBackend::kTorch;
  expect_same_result(knn_classify(d.train, d.ytrain, d.test, d.ytest, p), f);
}

TEST(Knn, RejectsBadRequests) {
  const Data d = unit_data(50, 5, 4, 3, 7);
  KnnParams p;
  p.ks = {51};
  EXPECT_THROW(knn_classify(d.train, d.ytrain, d.test, d.ytest, p), xdino::UsageError);
  p.ks = {0};
  EXPECT_THROW(knn_classify(d.train, d.ytrain, d.test, d.ytest, p), xdino::UsageError);
  p.ks = {5};
  EXPECT_THROW(knn_classify(d.train, d.ytrain, d.test.narrow(1, 0, 3), d.ytest, p),
               xdino::UsageError);
  auto unlabeled = d.ytest.clone();
  unlabeled[0] = -1;
  EXPECT_THROW(knn_classify(d.train, d.ytrain, d.test, unlabeled, p), xdino::UsageError);
}

TEST(Knn, ReportedKIsTwentyOrClosest) {
  EXPECT_EQ(reported_k({10, 20, 100, 200}), 20);
  EXPECT_EQ(reported_k({10, 100}), 10);
  EXPECT_EQ(reported_k({15, 25}), 15);
  EXPECT_EQ(reported_k({200, 30}), 30);
}
