// What the DINO trainer needs from a data pipeline, so that ssl/ does not depend on augment/
// (launch/train_data.h adapts the real multi-crop loader to it; tests use synthetic data).
//
// Contract:
//  - batches_per_epoch(): len(data_loader) on this process (drop_last: full batches only).
//  - start_epoch(epoch, first_batch): positions the source at batch `first_batch` of `epoch`;
//    the batches it then yields are exactly those an uninterrupted epoch would yield from
//    that batch on (this is what makes a mid-epoch resume exact). Called once per epoch.
//  - next_batch(): the crops of the next batch, [global1, global2, local1..localL], each a
//    float tensor (B, 3, S, S) on the CPU (pinned memory welcome); the trainer moves them.
//    Throws xdino::Error on failure; calling it more than batches_per_epoch() times per epoch
//    is a caller error.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace xdino::ssl {

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual int64_t batches_per_epoch() const = 0;
  virtual void start_epoch(int64_t epoch, int64_t first_batch) = 0;
  virtual std::vector<torch::Tensor> next_batch() = 0;
};

}  // namespace xdino::ssl
