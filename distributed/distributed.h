// Processes of one run talking through LibTorch's c10d: Gloo on CPUs, NCCL on GPUs.
//
// Contract:
//  - connect(config) returns local_communicator() for a world of 1, else a Communicator backed
//    by a c10d process group whose rendezvous is a TCPStore at master_addr:master_port
//    (hosted by rank 0). It blocks until all world_size processes have joined, or throws
//    xdino::Error after `timeout` naming the address and how many joined.
//  - The group's own device is `config.device` (CPU for Gloo, the local GPU for NCCL). A tensor
//    given to a collective may live elsewhere (a host-side sum, such as the epoch's meters or
//    a linear probe's counts, on an NCCL group): it travels through config.device, a copy
//    each way, and the results land where it lives. all_reduce_sum_async alone, the gradient
//    path, takes config.device's tensors only (it throws otherwise). Lists of tensors are
//    flattened into buckets of at most bucket_bytes, so many small tensors cost a few
//    collectives, not one each.
//  - Failure: every process runs a heartbeat thread that publishes liveness and the index of
//    its current collective to the store. When a collective fails (a peer's socket closed) or
//    times out (a peer hangs: `timeout`), the communicator throws xdino::Error with one line
//    naming the lost rank and whether it died or hung, instead of hanging forever. Rank 0 is
//    judged by its store: gone (died) or silent for the probe's deadline (stopped or hung).
//    A peer whose heartbeat stops for `heartbeat_timeout` (an unreachable host, a process
//    frozen that long) fails the collective waited in at once, naming the rank(s) and host;
//    a peer that is only slow keeps beating and is waited for (distributed/peer_monitor.h).
//  - Once joined (a world of 1 at once), a process started by `dino launch --max_restarts`
//    writes one byte to the descriptor in XDINO_LAUNCH_READY_FD, so its launcher knows the
//    rendezvous formed (launch/local_launcher.h).
//  - finalize() before a clean exit: barrier, then stop the heartbeat; rank 0 keeps the store
//    alive until every rank has finalized.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/dist_config.h"

namespace xdino::distributed {

std::shared_ptr<Communicator> connect(const DistConfig& config);

// Whether this LibTorch build can make Gloo process groups.
bool gloo_available();

}  // namespace xdino::distributed
