// Which samples each process sees in each epoch: torch.utils.data.DistributedSampler.
//
// Contract (identical indices to torch's for the same arguments, drop_last=False):
//  - The epoch order is torch.randperm(n) from a CPU generator seeded with seed + epoch
//    (LibTorch's own randperm, so the permutation is bit-identical to the official code's),
//    or 0..n-1 without shuffle.
//  - It is padded to total = world_size * ceil(n / world_size) by repeating its start (the
//    whole order again as often as needed when n < world_size), and rank r takes positions
//    r, r + world_size, ... : num_samples() = ceil(n / world_size) indices per rank.
//  - Batching is the loader's: batches_per_epoch() = floor(num_samples / batch) with
//    drop_last (main_dino.py's niter, docs/dino.md), ceil(...) without.
//  - n >= 1, world_size >= 1, 0 <= rank < world_size; violations throw xdino::Error.
#pragma once

#include <cstdint>
#include <vector>

namespace xdino::augment {

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int rank = 0, int world_size = 1, bool shuffle = true,
                     int64_t seed = 0);

  // This rank's dataset indices for `epoch`, num_samples() of them.
  std::vector<int64_t> indices(int64_t epoch) const;

  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return num_samples_ * world_size_; }
  int64_t dataset_size() const { return dataset_size_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  int64_t dataset_size_;
  int rank_;
  int world_size_;
  bool shuffle_;
  int64_t seed_;
  int64_t num_samples_;
};

// Batches one rank gets per epoch; with drop_last this is main_dino.py's niter:
// floor(ceil(dataset_size / world_size) / batch_size).
int64_t batches_per_epoch(int64_t dataset_size, int world_size, int64_t batch_size, bool drop_last);

}  // namespace xdino::augment
