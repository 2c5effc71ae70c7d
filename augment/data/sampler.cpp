#include "augment/data/sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "core/check.h"

namespace xdino::augment {

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size, bool shuffle,
                                       int64_t seed)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      shuffle_(shuffle),
      seed_(seed) {
  XDINO_CHECK(dataset_size >= 1, "cannot sample from an empty dataset");
  XDINO_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "invalid rank ", rank,
              " for a world of ", world_size, " processes");
  num_samples_ = (dataset_size + world_size - 1) / world_size;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_size_));
  if (shuffle_) {
    // The same generator and kernel as torch.randperm(n, generator=g) after
    // g.manual_seed(seed + epoch) in Python.
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed_ + epoch));
    const torch::Tensor perm = torch::randperm(dataset_size_, gen, torch::kLong);
    const int64_t* p = perm.data_ptr<int64_t>();
    std::copy(p, p + dataset_size_, order.begin());
  } else {
    for (int64_t i = 0; i < dataset_size_; ++i) order[static_cast<size_t>(i)] = i;
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  // Position k of the padded order is order[k mod n]: the start repeated, as torch pads.
  for (int64_t k = rank_; k < total_size(); k += world_size_)
    mine.push_back(order[static_cast<size_t>(k % dataset_size_)]);
  return mine;
}

int64_t batches_per_epoch(int64_t dataset_size, int world_size, int64_t batch_size,
                          bool drop_last) {
  XDINO_CHECK(dataset_size >= 0 && world_size >= 1 && batch_size >= 1, "invalid sizes: dataset ",
              dataset_size, ", world ", world_size, ", batch ", batch_size);
  const int64_t per_rank = (dataset_size + world_size - 1) / world_size;
  return drop_last ? per_rank / batch_size : (per_rank + batch_size - 1) / batch_size;
}

}  // namespace xdino::augment
