// BatchNorm that synchronises its batch statistics across processes (SyncBatchNorm), and is
// exactly torch's BatchNorm when it runs alone.
// Ours rather than LibTorch's: LibTorch has no SyncBatchNorm module, and torch's
// SyncBatchNorm kernels are CUDA-only, while our CPU runs synchronise over Gloo; the state and
// checkpoint keys are torch's. Under autocast a half input stays half (statistics in float32
// inside at::batch_norm), as torch's BatchNorm does.
//
// Contract:
//  - Same state as torch.nn.BatchNorm{1,2}d: `weight`, `bias` (C,), buffers `running_mean`,
//    `running_var` (C,) and `num_batches_tracked` (int64 scalar), so checkpoint keys match.
//    Input (B, C, ...) with any number of trailing dims; output has the input's shape and dtype.
//  - Without a communicator, with a world of 1, or in eval mode: at::batch_norm, bit for bit
//    the plain BatchNorm.
//  - With a communicator of world > 1 in train mode: mean and biased variance over the
//    concatenation of every process's batch (two all-reduces: sums, then centred squares),
//    running stats updated with the unbiased global variance, and gradients that are the
//    exact derivative of that function (the all-reduce is differentiable: its backward
//    all-reduces the incoming gradient), as torch.nn.SyncBatchNorm computes them.
//  - Every process must call forward/backward in the same order (they are collectives).
//  - Replicas sharing this module in one process (distributed/replicas.h) each call forward
//    on their share of the batch; only the one that owns_module_state() updates the buffers.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "distributed/communicator.h"

namespace xdino::models {

struct BatchNormImpl : torch::nn::Module {
  explicit BatchNormImpl(int64_t num_features, double eps = 1e-5, double momentum = 0.1);
  torch::Tensor forward(const torch::Tensor& x);

  void set_communicator(std::shared_ptr<Communicator> communicator) {
    communicator_ = std::move(communicator);
  }

  int64_t num_features;
  double eps, momentum;
  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  torch::Tensor forward_synced(const torch::Tensor& x);
  std::shared_ptr<Communicator> communicator_;
};
TORCH_MODULE(BatchNorm);

// Gives every BatchNorm below `root` the communicator (nullptr: back to local statistics).
void set_batch_norm_communicator(torch::nn::Module& root,
                                 const std::shared_ptr<Communicator>& communicator);

// Sum over processes that autograd can differentiate: backward sums the gradient over
// processes too. With a world of 1 it is the identity.
torch::Tensor differentiable_all_reduce_sum(const torch::Tensor& t, Communicator& communicator);

}  // namespace xdino::models
