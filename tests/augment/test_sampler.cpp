// DistributedSampler: indices identical to torch's (golden from make_fixtures.py), shards that
// partition the padded epoch, per-epoch orders, and main_dino.py's niter.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "augment/data/sampler.h"
#include "core/check.h"
#include "tests/support/files.h"

using xdino::augment::batches_per_epoch;
using xdino::augment::DistributedSampler;

TEST(Sampler, IndicesEqualTorchDistributedSampler) {
  std::ifstream golden(xdino::testing::fixture("datasets/sampler.txt"));
  int cases = 0;
  for (std::string line; std::getline(golden, line); ++cases) {
    std::istringstream ls(line);
    int64_t n, seed, epoch;
    int world, rank, shuffle;
    std::string colon;
    ls >> n >> world >> rank >> seed >> shuffle >> epoch >> colon;
    std::vector<int64_t> expected;
    for (int64_t i; ls >> i;) expected.push_back(i);
    const DistributedSampler s(n, rank, world, shuffle != 0, seed);
    EXPECT_EQ(s.indices(epoch), expected) << line;
    EXPECT_EQ(s.num_samples(), static_cast<int64_t>(expected.size())) << line;
  }
  EXPECT_GE(cases, 40);
}

TEST(Sampler, RanksPartitionThePaddedEpoch) {
  for (const auto& [n, world] : std::vector<std::pair<int64_t, int>>{{103, 4}, {3, 5}, {64, 8}}) {
    std::map<int64_t, int> seen;
    for (int rank = 0; rank < world; ++rank)
      for (int64_t i : DistributedSampler(n, rank, world, true, 3).indices(2)) seen[i]++;
    // Every index at least once; exactly total - n extra copies (the padding).
    EXPECT_EQ(static_cast<int64_t>(seen.size()), n);
    int64_t copies = 0;
    for (const auto& [i, c] : seen) copies += c;
    const int64_t total = (n + world - 1) / world * world;
    EXPECT_EQ(copies, total) << n << " " << world;
  }
}

TEST(Sampler, EveryEpochHasItsOwnOrderAndSeedMatters) {
  const DistributedSampler a(1000, 1, 2, true, 0), b(1000, 1, 2, true, 1);
  std::set<std::vector<int64_t>> orders;
  for (int64_t e = 0; e < 5; ++e) orders.insert(a.indices(e));
  EXPECT_EQ(orders.size(), 5u);
  EXPECT_EQ(a.indices(3), a.indices(3));
  EXPECT_NE(a.indices(3), b.indices(3));
  // torch seeds the generator with seed + epoch: (seed 1, epoch 2) == (seed 0, epoch 3).
  EXPECT_EQ(b.indices(2), a.indices(3));
  const DistributedSampler plain(10, 0, 1, false, 0);
  EXPECT_EQ(plain.indices(4), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Sampler, NiterIsFloorOfCeilDividedByBatch) {
  // docs/dino.md: ImageNet-1k on 16 GPUs x 64 images: 1251 iterations per epoch.
  EXPECT_EQ(batches_per_epoch(1281167, 16, 64, true), 1251);
  EXPECT_EQ(batches_per_epoch(1281167, 16, 64, false), 1252);
  EXPECT_EQ(batches_per_epoch(60000, 1, 64, true), 937);
  EXPECT_EQ(batches_per_epoch(10, 3, 4, true), 1);  // ceil(10/3) = 4 per rank
  EXPECT_EQ(batches_per_epoch(10, 3, 5, true), 0);
  EXPECT_EQ(batches_per_epoch(10, 3, 5, false), 1);
  EXPECT_THROW(DistributedSampler(10, 3, 3), xdino::Error);
  EXPECT_THROW(DistributedSampler(0, 0, 1), xdino::Error);
}
