// Data-parallel replicas inside one process: R threads run the same step, each on 1/R of the
// batch, over modules they share (docs/dino.md, "Replicas"). On a CPU this uses the
// cores the way independent processes would, without the cost of processes: no gradient
// all-reduce (autograd accumulates every replica's gradient into the shared .grad), and the
// collectives that remain (SyncBatchNorm statistics, the DINO center) are in-memory barriers.
//
// Contract:
//  - ReplicaGroup(count, outer): count >= 1 replicas per process; `outer` joins the processes
//    (local_communicator() for one). Replica 0 is the thread that calls run(); the others are
//    count - 1 threads owned by the group, started once.
//  - run(body, samples) calls body(index) on every replica at once (each holding `samples`
//    samples of the batch) and returns when all have returned.
//    Each replica thread runs with one intra-op thread and a one-thread BLAS (the replicas are
//    the parallelism); the caller's counts are restored when run() returns.
//    If a body throws, the replicas waiting in a collective are released (their bodies end
//    with an internal exception) and run() rethrows the first failure; the default generator
//    is then left as it was.
//  - communicator() is one Communicator for all replicas of this process: rank()
//    = outer.rank() * count + current replica index, world_size() = outer.world_size() * count.
//    Its collectives must be called by every replica of every process in the same order (as
//    c10d's), and only from inside run() (elsewhere they throw xdino::Error). Sums add the replicas
//    in index order, so results do not depend on thread timing. owns_module_state() is true on
//    replica 0 only: the replicas share modules, so only one may write their buffers.
//  - process_communicator() is the same over this process's replicas alone (rank() = the
//    replica's index, world_size() = count): what one process computes over its whole batch,
//    as one GPU does (DINOv2's KoLeo, ssl/recipe_terms.h).
//  - current_replica() is the calling thread's place inside run(), nullptr elsewhere. Its
//    generator starts each run() as a copy of the default CPU generator; stochastic layers
//    draw the whole batch's numbers from it and keep their own rows (replica_rows), so every
//    replica consumes the stream the one-replica step would. After run(), the default
//    generator continues from replica 0's state.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "distributed/communicator.h"

namespace xdino::distributed {

struct ReplicaPlace {
  int index = 0;
  int count = 1;
  int64_t samples = 0;  // samples each replica holds in this run() (0: not said)
  at::Generator generator;
};

const ReplicaPlace* current_replica();

// `full` holds numbers drawn for the whole batch of all replicas, laid out group-major:
// consecutive blocks of count * samples rows (e.g. one block per crop of a multi-crop group,
// images in batch order inside it), replica r's samples being rows r * samples .. of each
// block. Returns this replica's rows of every block, in order. Outside run(), returns `full`.
torch::Tensor replica_rows(const torch::Tensor& full);

class ReplicaGroup {
 public:
  ReplicaGroup(int count, std::shared_ptr<Communicator> outer);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  int count() const;
  void run(const std::function<void(int index)>& body, int64_t samples);
  std::shared_ptr<Communicator> communicator() const;
  std::shared_ptr<Communicator> process_communicator() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::vector<std::thread> threads_;  // replicas 1..count-1, started by the first run()
};

}  // namespace xdino::distributed
