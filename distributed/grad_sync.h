// Gradient averaging across processes, the way DistributedDataParallel does it.
//
// Contract:
//  - broadcast_module(module, comm): every parameter and buffer takes rank 0's value (call
//    once after construction, before the teacher copies the student).
//  - GradientSynchronizer(params, comm, bucket_bytes, overlap): params are the trainable
//    tensors of the student, in registration order. Gradients are grouped into buckets of at
//    most bucket_bytes in reverse order (the order backward produces them). With overlap, a
//    gradient hook copies each gradient into its bucket as soon as autograd has it, and a
//    full bucket starts its all-reduce while backward goes on; buckets start strictly in
//    index order on every process, so the collectives match. finish() waits for all buckets
//    and writes grad = (sum over processes) / world_size into every param's .grad. A param
//    that got no gradient in this backward contributes zeros (and receives the average).
//  - With a world of 1 it does nothing (no hooks, finish() returns at once).
//  - Call begin() before each backward and finish() after it, on every process.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "distributed/communicator.h"

namespace xdino::distributed {

void broadcast_module(torch::nn::Module& module, Communicator& communicator);

class GradientSynchronizer {
 public:
  GradientSynchronizer(std::vector<torch::Tensor> params, std::shared_ptr<Communicator> comm,
                       int64_t bucket_bytes = 25 << 20, bool overlap = true);
  ~GradientSynchronizer();
  // The gradient hooks point at this object.
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  void begin();
  void finish();
  size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Slot {
    size_t bucket;
    int64_t offset;
    bool ready = false;
  };
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    torch::Tensor flat;
    size_t pending = 0;  // gradients not yet copied in
    std::unique_ptr<PendingWork> work;
  };
  void on_gradient(size_t index, const torch::Tensor& grad);
  void launch_ready_buckets();

  std::vector<torch::Tensor> params_;
  std::vector<unsigned> hooks_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::shared_ptr<Communicator> comm_;
  bool overlap_;
  size_t next_launch_ = 0;
};

}  // namespace xdino::distributed
