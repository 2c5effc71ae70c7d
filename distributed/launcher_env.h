// Where this process sits in a multi-process run, read from the launcher's environment the
// way the official DINO code does (see docs/architecture.md, "Processes").
//
// Contract: dist_config_from_env() looks, in this order, at
//   torchrun:  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and
//              TORCHELASTIC_USE_AGENT_STORE (True: the launcher serves MASTER_PORT's store,
//              and rank 0 connects to it as every rank does; that store outlives a restart,
//              so each attempt's keys go under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>",
//              DistConfig::store_prefix, as torch.distributed's workers put theirs; not
//              under `dino launch`, XDINO_RDZV_ROUND set, whose store is new every round)
//   SLURM:     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE; MASTER_ADDR
//              defaults to the first host of SLURM_JOB_NODELIST, MASTER_PORT to
//              20000 + SLURM_JOB_ID % 20000 (so jobs sharing a node do not collide)
//   Open MPI:  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE; MASTER_ADDR must be set
//              (mpirun -x MASTER_ADDR) unless every rank is on one node
// and otherwise returns a single process. Malformed values throw xdino::UsageError naming the
// variable. The device is the local GPU when CUDA is available, else the CPU.
//
// DistOptions hold what every subcommand that connects processes (train, knn, linear,
// features) lets the user set (launch/flags.h binds them to flags): dist_timeout, the seconds
// a process waits for the others at the rendezvous and in each collective before it names the
// lost rank and exits 1 (a process that dies is noticed at the next collective, without
// waiting), and dist_heartbeat_timeout, the seconds without a peer's heartbeat after which
// it is unreachable (distributed/peer_monitor.h). Not positive: UsageError. dist_url and
// local_rank are the official scripts' flags: a dist_url other than env:// throws UsageError
// (the launcher's variables are the one source), local_rank is accepted and ignored.
#pragma once

#include <functional>
#include <string>

#include "distributed/dist_config.h"

namespace xdino::distributed {

using EnvLookup = std::function<const char*(const char*)>;

DistConfig dist_config_from_env(const EnvLookup& env);
DistConfig dist_config_from_env();

struct DistOptions {
  double dist_timeout = 1800;          // torch.distributed's default process-group timeout
  double dist_heartbeat_timeout = 60;  // ours: a silent peer is lost (peer_monitor.h)
  std::string dist_url = "env://";     // the official flag; env:// is the only rendezvous
  int64_t local_rank = 0;              // the official flag; ignored (the environment says)
};

// dist_config_from_env() with the options applied.
DistConfig dist_config_from_env(const DistOptions& options);

// What `dino launch` adds to torchrun's variables (launch/local_launcher.h): the round of its
// rendezvous (distributed/rendezvous/node_rendezvous.h), which dist_config_from_env reads into
// DistConfig::round, and the descriptor on which a process reports that it has joined.
inline constexpr const char* kRoundVariable = "XDINO_RDZV_ROUND";
inline constexpr const char* kReadyFdVariable = "XDINO_LAUNCH_READY_FD";

// Writes 'J' to the descriptor named by kReadyFdVariable, if set, and removes the variable,
// so that a second connect() in the same process says nothing; the descriptor stays open for
// tell_launcher_stopped().
void tell_launcher_joined();

// Writes to that descriptor (nothing without one) that this process saved and stopped before
// the run's end, so that its launcher does not take the exit code 0 that follows for the end
// of the run: 'T' when a signal reached this process itself (someone asked it to stop), 'S'
// when it stopped at another rank's word (every rank stops at the same step, ssl/trainer.h:
// another node's signal, membership change or lost store), after which its launcher re-forms
// the run rather than record it as finished (launch/local_launcher.h).
void tell_launcher_stopped(bool own_signal);

// "node[01-03,07],gpu5" -> "node01"; "a,b" -> "a"; "" -> "".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace xdino::distributed
