// Collective operations across the processes of one run.
//
// Contract:
//  - Every place where processes must agree (gradients, the DINO center, BatchNorm
//    statistics, metrics, gathered features) goes through a Communicator, so the libraries
//    never know whether they run alone or under c10d.
//  - Collectives are blocking and must be called by every process in the same order with
//    tensors of the same shape and dtype (all_gather_varying excepted), like c10d's.
//  - local_communicator() is the single-process implementation (rank 0 of 1): all_reduce and
//    broadcast leave tensors unchanged, all_gather returns {t}.
//  - Failures of a peer throw xdino::Error naming the lost rank.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace xdino {

// A collective started asynchronously; wait() blocks until it is done (and throws like the
// blocking collectives do).
class PendingWork {
 public:
  virtual ~PendingWork() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In-place element-wise sum over processes.
  virtual void all_reduce_sum(std::vector<torch::Tensor>& tensors) = 0;
  // In-place copy of `root`'s tensors to every process.
  virtual void broadcast(std::vector<torch::Tensor>& tensors, int root) = 0;
  // Every process's `t`, in rank order (same shape everywhere).
  virtual std::vector<torch::Tensor> all_gather(const torch::Tensor& t) = 0;
  // Like all_gather, but dim 0 may differ between processes.
  virtual std::vector<torch::Tensor> all_gather_varying(const torch::Tensor& t) = 0;
  virtual void barrier() = 0;
  // Starts an in-place sum of one contiguous tensor; the default runs it synchronously.
  virtual std::unique_ptr<PendingWork> all_reduce_sum_async(torch::Tensor t);
  // Called once at the end of a successful run, before destruction: a clean shutdown that
  // peers do not mistake for a lost process.
  virtual void finalize() {}
  // False on all but one of the replicas that share this process's modules
  // (distributed/replicas.h): only the owner writes shared buffers such as BatchNorm's running
  // statistics or the DINO center.
  virtual bool owns_module_state() const { return true; }

  bool is_main() const { return rank() == 0; }
  void all_reduce_sum(torch::Tensor& t) {
    std::vector<torch::Tensor> v{t};
    all_reduce_sum(v);
  }
};

std::shared_ptr<Communicator> local_communicator();

}  // namespace xdino
