// The state of a DINO run beyond its modules and optimiser: where it stands (epoch, next
// iteration), the partial statistics of an interrupted epoch and every process's random
// generators -- what an exact resume after a stop needs. One type that the trainer captures,
// the checkpoint stores (its `xdino_resume` entry, ssl/checkpoint.h) and a restart reads back,
// as marian's TrainingState is for its trainer.
//
// Contract:
//  - capture(...) is collective (every process calls it, in step): it gathers each rank's CPU
//    generator state (and CUDA's on a CUDA device) and its epoch statistics, and all-reduces
//    the statistics, so rank 0 alone can write the result.
//  - to_dict() / from_dict() are the `xdino_resume` dict; from_dict() throws xdino::Error
//    naming a missing key and sets exact = true. A default TrainingState (exact = false) is
//    what an official checkpoint yields: resume at the start of `epoch`.
//  - resume_position(...) returns the (epoch, batch) to continue from with the run's
//    iterations per epoch, restores this rank's generators when the world size is unchanged,
//    puts the epoch statistics into `meters` when resuming mid-epoch (each rank its own with
//    the world size unchanged, so the epoch's averages come out bit for bit as without the
//    stop; else all of them on rank 0), and logs why a resume is not exact (official
//    checkpoint, changed batch count or world size).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/ivalue.h"
#include "distributed/communicator.h"
#include "ssl/metrics.h"

namespace xdino::ssl {

struct TrainingState {
  struct Position {
    int64_t epoch = 0, batch = 0;
  };

  int64_t epoch = 0;                 // the epoch to run next (the checkpoint's `epoch`)
  int64_t iteration = 0;             // global index of the next iteration
  int64_t iterations_per_epoch = 0;  // 0 when unknown (official checkpoints)
  int64_t world_size = 1;
  EpochMeters epoch_stats;                // sums over all processes of the epoch so far
  std::vector<torch::Tensor> rank_stats;  // each rank's own sums (to_tensor); empty when unknown
  std::vector<torch::Tensor> rng_cpu, rng_cuda;  // per rank; empty when unknown
  // log.txt's line for the last completed epoch ("" before the first). The checkpoint is
  // written before log.txt, so a run killed between the two finds the line here on resume.
  std::string log_line;
  bool exact = false;  // false: only `epoch` is known

  static TrainingState capture(int64_t next_epoch, int64_t next_iteration,
                               int64_t iterations_per_epoch, const EpochMeters& meters,
                               Communicator& comm, const torch::Device& device);

  Position resume_position(int64_t iterations_per_epoch, Communicator& comm,
                           const torch::Device& device, EpochMeters& meters) const;

  IDict to_dict() const;
  void from_dict(const IDict& resume, const std::string& what);
};

}  // namespace xdino::ssl
