// Starting a subcommand that may run as one of several processes (train, features, knn,
// linear): one place for what each of them did on its own before.
//
// Contract:
//  - start_session(options) reads the process layout from the launcher's environment
//    (distributed/launcher_env.h), gives each process of a node its share of the cores when
//    OMP_NUM_THREADS is unset, tags the log with the rank, connects the processes (one
//    process: no networking) and picks the device (the local GPU when CUDA is available). It
//    logs the BLAS in use and the intra-op thread count (rank 0 only, like every log line).
//  - config_record(flags, dir): the file that records the command's effective flags in dir:
//    dir/config.ini, unless that file is another command's record (a training run's, which
//    `dino report` and `--config` reruns read) or a file no command of ours wrote; those are
//    never replaced, and the record goes to dir/config.<command>.ini instead.
//  - write_config(flags, file, comm) creates file's folder and writes the effective flags to
//    it atomically, on rank 0 only.
//  - run_in_session(flags, options, config_file, body) is the skeleton of the evaluation
//    commands: start_session, body(comm, device, checks_passed), then finalize (the barrier
//    every process leaves together). The body hands checks_passed to the evaluation
//    (eval/checks_passed.h), which calls it once everything it was given has been checked:
//    only then is config_file written (not at all when it is empty), so a refused command
//    writes nothing. Returns 0; what body throws propagates, without finalize
//    (a failed process does not wait for the rest).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/distributed.h"
#include "launch/dist_flags.h"
#include "launch/flags.h"

namespace xdino::launch {

struct Session {
  distributed::DistConfig config;
  std::shared_ptr<Communicator> comm;
  torch::Device device = torch::kCPU;
};

// `device` is the command's --device: "cpu" keeps the processes on Gloo and the CPU even on a
// host with GPUs (else each process takes cuda:<local rank>, NCCL's).
Session start_session(const distributed::DistOptions& options, const std::string& device = "auto");

// How many data-parallel replicas `dino train --replicas 0` runs (docs/dino.md, "Replicas"):
// on the CPU, the cores this process may use (OMP_NUM_THREADS when set, else the machine's
// hardware threads shared among the processes of this node), lowered to the largest count
// that divides the per-process batch; 1 on a GPU.
int64_t auto_replicas(const Session& session, int64_t batch_size_per_process);

std::string config_record(const Flags& flags, const std::string& dir);
void write_config(const Flags& flags, const std::string& file, const Communicator& comm);

using SessionBody =
    std::function<void(Communicator&, torch::Device, const std::function<void()>& checks_passed)>;
int run_in_session(const Flags& flags, const distributed::DistOptions& options,
                   const std::string& config_file, const SessionBody& body);

}  // namespace xdino::launch
