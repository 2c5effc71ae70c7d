// `dino launch`: N local processes of one multi-process run, for CPU testing and single-node
// use (torchrun's job, without Python).
//
// Contract: launch_local(options, child_args) starts options.nproc copies of this executable
// with child_args and the torchrun environment (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; OMP_NUM_THREADS = cores / nproc unless set).
// With nnodes > 1 it is torchrun's multi-node mode: one launcher per node, all given the same
// nnodes, nproc, master_addr (rank 0's host, not loopback) and master_port (not 0), each its
// own node_rank; RANK is global (node_rank * nproc + local rank), WORLD_SIZE nnodes * nproc.
// A rank that fails on one node makes the others fail at their next collective or heartbeat
// window (distributed/peer_monitor.h), naming it, so every node's launcher ends too. It
// forwards SIGINT, SIGTERM and SIGUSR1 to them, and waits. When one fails, the others get
// `grace_seconds` to notice on their own (they report the lost rank), then SIGTERM (with
// SIGCONT, for a stopped rank), then SIGKILL 10 s later. The first failure is reported with
// the rank, pid and exit code or signal. Returns 0 if all succeeded, else the exit code of
// the first that failed (128 + signal when killed by one). The caller's signal handlers are
// restored on return.
//
// Restarts (torchrun's --max_restarts; docs/architecture.md, "Runs that heal"). With
// max_restarts N > 0, a failed start is followed by up to N more: once every local process
// has ended, they start again with the same arguments (a training run resumes from its last
// checkpoint), and each restart is logged with the failure that caused it. Every node's
// launcher does the same, so a multi-node run re-forms by itself once the lost host or link
// is back. Restart k moves the rendezvous to master_port + k (a free port on one node), so a
// restarted process never joins the store of the start before it. Each start must form its
// rendezvous within rdzv_timeout seconds: every process tells the launcher when it has
// joined (one byte on the pipe named by XDINO_LAUNCH_READY_FD, distributed/distributed.h);
// when they have not all joined by then, the launcher stops them and gives up with one line,
// exit 1. It also gives up, with the last failure's code, after N restarts, and does not
// restart after a forwarded signal or a usage error (exit 2: the same command fails again).
// The processes see TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_MAX_RESTARTS, as torchrun sets
// them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xdino::launch {

struct LocalLaunchOptions {
  int64_t nproc = 1;      // processes on this node
  int64_t nnodes = 1;     // nodes of the run, each with its own `dino launch`
  int64_t node_rank = 0;  // this node's index: its ranks are node_rank * nproc + 0..nproc-1
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;  // 0: a free port
  double grace_seconds = 60;
  int64_t max_restarts = 0;   // torchrun's: starts after the first that failed
  double rdzv_timeout = 600;  // seconds each start has to form its rendezvous (max_restarts > 0)
};

int launch_local(const LocalLaunchOptions& options, const std::vector<std::string>& child_args);

// The signal (SIGINT, SIGTERM or SIGUSR1) that the last launch_local forwarded to its
// processes, 0 if none: training ranks save and exit 0 on one, so a caller with more work
// after the launch (`dino pipeline`) must ask this to know the run stopped early.
int launch_forwarded_signal();

}  // namespace xdino::launch
