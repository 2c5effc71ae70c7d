// A deterministic DataSource for trainer tests: batch k of epoch e is a pure function of
// (seed, e, k), so an interrupted and resumed run sees exactly the batches an uninterrupted
// one sees.
#pragma once

#include <ATen/CPUGeneratorImpl.h>

#include "ssl/data_source.h"

namespace xdino::testing {

class SyntheticCrops : public ssl::DataSource {
 public:
  SyntheticCrops(int64_t batches, int64_t batch_size, int64_t local_crops, int64_t global_size,
                 int64_t local_size, uint64_t seed = 7)
      : batches_(batches),
        batch_size_(batch_size),
        local_crops_(local_crops),
        global_size_(global_size),
        local_size_(local_size),
        seed_(seed) {}

  int64_t batches_per_epoch() const override { return batches_; }
  void start_epoch(int64_t epoch, int64_t first_batch) override {
    epoch_ = epoch;
    next_ = first_batch;
    ++epochs_started;
  }
  std::vector<torch::Tensor> next_batch() override {
    auto gen = at::detail::createCPUGenerator(seed_ * 1000003 + epoch_ * 1009 + next_++);
    std::vector<torch::Tensor> crops;
    for (int64_t c = 0; c < 2 + local_crops_; ++c) {
      const int64_t s = c < 2 ? global_size_ : local_size_;
      crops.push_back(torch::randn({batch_size_, 3, s, s}, gen));
    }
    ++batches_served;
    return crops;
  }

  int64_t batches_served = 0;
  int64_t epochs_started = 0;

 private:
  int64_t batches_, batch_size_, local_crops_, global_size_, local_size_;
  uint64_t seed_;
  int64_t epoch_ = 0, next_ = 0;
};

}  // namespace xdino::testing
