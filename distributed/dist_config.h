// Where one process sits in a run and how it reaches the others: the plain value that the
// rendezvous fills from the launcher's environment (distributed/launcher_env.h) and that
// connect() (distributed/distributed.h) and the peer monitor (distributed/peer_monitor.h) read.
//
// Contract: a value type; 0 <= rank < world_size is checked by connect(), the port by the
// rendezvous. Timeouts are wall-clock durations.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace xdino::distributed {

struct DistConfig {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // index on this node: picks the GPU
  int local_world_size = 1;  // processes on this node: splits the CPU threads
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "single";  // torchrun, slurm, mpi or single: where the values came from
  int64_t round = -1;               // `dino launch`'s rendezvous round (XDINO_RDZV_ROUND); -1: none
  bool agent_store = false;         // the launcher serves the store at MASTER_PORT, not rank 0
  // Every key this process writes to the store starts with it: torchrun's per-attempt prefix
  // on its agent's store ("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>", as its own workers
  // use), so a restarted attempt never meets the keys of the one before. "": no prefix.
  std::string store_prefix;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  // A peer whose heartbeat has not moved for this long is unreachable (distributed/peer_monitor.h).
  std::chrono::milliseconds heartbeat_timeout{std::chrono::seconds(60)};
  torch::Device device = torch::kCPU;
  int64_t bucket_bytes = 25 << 20;  // DDP's default bucket_cap_mb = 25
};

}  // namespace xdino::distributed
