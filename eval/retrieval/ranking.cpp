#include "eval/retrieval/ranking.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "core/check.h"

namespace xdino::eval::retrieval {

double average_precision(const std::vector<int64_t>& ranks, int64_t num_positives) {
  XDINO_CHECK(num_positives > 0, "average precision needs at least one positive");
  const double recall_step = 1.0 / static_cast<double>(num_positives);
  double ap = 0.0;
  for (size_t j = 0; j < ranks.size(); ++j) {
    const double rank = static_cast<double>(ranks[j]);
    const double precision_0 = ranks[j] == 0 ? 1.0 : static_cast<double>(j) / rank;
    const double precision_1 = static_cast<double>(j + 1) / (rank + 1);
    ap += (precision_0 + precision_1) * recall_step / 2.0;
  }
  return ap;
}

MapResult compute_map(const torch::Tensor& ranks, const std::vector<QueryGround>& ground,
                      const std::vector<int64_t>& kappas) {
  XDINO_CHECK(ranks.dim() == 2 && ranks.scalar_type() == torch::kInt64,
              "ranks must be a 2-D int64 tensor (database x queries), got ", ranks.sizes());
  const int64_t n = ranks.size(0), nq = static_cast<int64_t>(ground.size());
  XDINO_CHECK(ranks.size(1) == nq, "ranks have ", ranks.size(1), " columns for ", nq, " queries");
  const torch::Tensor r = ranks.t().contiguous().to(torch::kCPU);  // a row per query
  const double nan = std::numeric_limits<double>::quiet_NaN();
  MapResult out;
  out.aps.assign(static_cast<size_t>(nq), nan);
  out.precision.assign(static_cast<size_t>(nq), std::vector<double>(kappas.size(), nan));
  out.mean_precision.assign(kappas.size(), 0.0);
  for (int64_t q = 0; q < nq; ++q) {
    const QueryGround& g = ground[static_cast<size_t>(q)];
    if (g.ok.empty()) {
      ++out.empty;
      continue;
    }
    const std::unordered_set<int64_t> ok(g.ok.begin(), g.ok.end());
    const std::unordered_set<int64_t> junk(g.junk.begin(), g.junk.end());
    // One pass down the ranked list: a positive's position minus the junk seen before it
    // (an image both ok and junk is a positive that also counts as junk after itself).
    std::vector<int64_t> positions;
    int64_t junk_before = 0;
    const int64_t* column = r.data_ptr<int64_t>() + q * n;
    for (int64_t i = 0; i < n; ++i) {
      if (ok.count(column[i])) positions.push_back(i - junk_before);
      if (junk.count(column[i])) ++junk_before;
    }
    const double ap = average_precision(positions, static_cast<int64_t>(g.ok.size()));
    out.aps[static_cast<size_t>(q)] = ap;
    out.map += ap;
    const int64_t last = positions.empty() ? 0 : positions.back() + 1;  // 1-based
    for (size_t k = 0; k < kappas.size(); ++k) {
      const int64_t kq = std::min(last, kappas[k]);
      const int64_t hits =
          std::count_if(positions.begin(), positions.end(), [&](int64_t p) { return p + 1 <= kq; });
      const double p = kq > 0 ? static_cast<double>(hits) / static_cast<double>(kq) : nan;
      out.precision[static_cast<size_t>(q)][k] = p;
      out.mean_precision[k] += p;
    }
  }
  const double counted = static_cast<double>(nq - out.empty);
  out.map /= counted;
  for (double& p : out.mean_precision) p /= counted;
  return out;
}

}  // namespace xdino::eval::retrieval
