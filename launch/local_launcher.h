// `dino launch`: this node's processes of one multi-process run, started again when one fails
// or when the run's membership changes (torchrun's job, without Python).
//
// Contract: launch_local(options, child_args) joins the launchers' rendezvous
// (distributed/rendezvous/node_rendezvous.h: node 0's launcher serves its store for the life of the
// job), then starts options.nproc copies of this executable with child_args and the torchrun
// environment: RANK (group_rank * nproc + local rank), WORLD_SIZE (nnodes * nproc), LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT (the round's workers' store, on a
// port of its own each round, which group rank 0's launcher serves and holds from the moment
// it chose it: TORCHELASTIC_USE_AGENT_STORE=True), TORCHELASTIC_RESTART_COUNT (this launcher's
// failed starts), TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, XDINO_RDZV_ROUND (the round: a
// worker of another round is refused at the workers' rendezvous), and OMP_NUM_THREADS = cores /
// nproc unless set. It forwards SIGINT, SIGTERM and SIGUSR1 to them, and waits.
//
// While they run it reacts to (docs/architecture.md, "Runs that heal"):
//  - a process that fails: the others get `grace_seconds` to notice on their own (they name the
//    lost rank), then SIGTERM (with SIGCONT, for a stopped one), then SIGKILL 10 s later. With
//    max_restarts N > 0, once all have ended, this node leaves the round and joins the next
//    one, up to N times (a training run resumes from its last checkpoint); each restart is
//    logged with its cause. Never after a forwarded signal (the user asked the run to stop) or
//    a usage error (exit 2: the same command fails again);
//  - a node waiting to join (a launcher started late or again): it stops its processes and
//    re-forms with it, without counting a restart;
//  - the rendezvous closed by a node that gave up: it stops its processes and exits 1 with
//    that node's reason, within seconds;
//  - its processes saving and stopping before the run's end at another node's word (its
//    signal, its membership change, its lost store: every rank stops at the same step and
//    exits 0; each says so, distributed::tell_launcher_stopped): it re-forms the run without
//    counting a restart, and never records the run as finished; with the store not answering
//    it exits 1 saying so. Stopped by a signal sent to them and not to it, it returns 0 as
//    after a forwarded signal, without recording the run as finished.
// It closes the rendezvous itself when it gives up: restarts spent, a usage error, its
// processes not joining their rendezvous within the join timeout, or the node rendezvous not
// forming in that time while it waited in an open round. It does not close on a signal, so
// that a launcher started again rejoins.
// Returns 0 if all succeeded, else the exit code of the first that failed (128 + signal when
// killed by one), 1 when the rendezvous was closed by another node. Throws xdino::Error (one
// line, "gave up: ...") when the rendezvous does not form, UsageError for bad options. The
// caller's signal handlers are restored on return.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/rendezvous/node_rendezvous.h"

namespace xdino::launch {

struct LocalLaunchOptions {
  int64_t nproc = 1;  // processes on this node
  double grace_seconds = 60;
  int64_t max_restarts = 0;  // torchrun's: starts after the first that failed
  // nnodes, node_rank, the endpoint, run id and timeouts (join_timeout is --rdzv_timeout).
  distributed::NodeRendezvousOptions rendezvous;
};

int launch_local(const LocalLaunchOptions& options, const std::vector<std::string>& child_args);

// The signal (SIGINT, SIGTERM or SIGUSR1) that the last launch_local forwarded to its
// processes, 0 if none: training ranks save and exit 0 on one, so a caller with more work
// after the launch (`dino pipeline`) must ask this to know the run stopped early.
int launch_forwarded_signal();

}  // namespace xdino::launch
