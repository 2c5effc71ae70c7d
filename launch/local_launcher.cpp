#include "launch/local_launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "distributed/rendezvous.h"

namespace xdino::launch {
namespace {

std::atomic<int> g_signal{0};
std::atomic<int> g_forwarded{0};
void remember_signal(int sig) { g_signal = sig; }

// The caller's handlers for the forwarded signals, put back when the launch ends.
class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction sa {};
    sa.sa_handler = remember_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~ForwardSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;

  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGUSR1};

 private:
  std::array<struct sigaction, 3> old_{};
};

struct Child {
  pid_t pid = -1;
  int rank = 0;
  bool running = true;
  int exit_code = 0;
};

void signal_all(std::vector<Child>& children, int sig) {
  for (const Child& c : children)
    if (c.running) kill(c.pid, sig);
}

}  // namespace

int launch_forwarded_signal() { return g_forwarded; }

int launch_local(const LocalLaunchOptions& o, const std::vector<std::string>& child_args) {
  XDINO_CHECK_ARG(o.nproc >= 1, "--nproc_per_node must be at least 1, got ", o.nproc);
  XDINO_CHECK_ARG(o.nnodes >= 1 && o.node_rank >= 0 && o.node_rank < o.nnodes,
                  "--node_rank must be in [0, --nnodes), got ", o.node_rank, " of ", o.nnodes);
  if (o.nnodes > 1) {
    XDINO_CHECK_ARG(o.master_port > 0, "--nnodes ", o.nnodes,
                    " needs --master_port: every "
                    "node's launcher must name the same port of rank 0's host");
    XDINO_CHECK_ARG(o.master_addr != "127.0.0.1" && o.master_addr != "localhost", "--nnodes ",
                    o.nnodes,
                    " needs --master_addr: the address of node 0 that "
                    "the other nodes reach (not ",
                    o.master_addr, ")");
  }
  XDINO_CHECK_ARG(!child_args.empty(),
                  "nothing to launch: give the subcommand after the launcher's flags, e.g. "
                  "dino launch --nproc_per_node 2 train --config my.ini");
  const int port =
      o.master_port > 0 ? static_cast<int>(o.master_port) : distributed::free_tcp_port();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max<unsigned>(1, cores / o.nproc));

  g_signal = 0;
  g_forwarded = 0;
  const ForwardSignals forward;

  std::vector<Child> children;
  const int64_t world_size = o.nnodes * o.nproc;
  for (int local = 0; local < o.nproc; ++local) {
    const int rank = static_cast<int>(o.node_rank * o.nproc + local);
    const pid_t pid = fork();
    XDINO_CHECK(pid >= 0, "fork failed while starting rank ", rank);
    if (pid == 0) {
      // Own process group: a terminal's Ctrl-C reaches the launcher once, which forwards it
      // once; and die with the launcher rather than linger as orphans.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      for (int sig : ForwardSignals::kSignals) signal(sig, SIG_DFL);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
      setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      setenv("OMP_NUM_THREADS", threads.c_str(), 0);
      std::vector<std::string> argv{"dino"};
      argv.insert(argv.end(), child_args.begin(), child_args.end());
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv("/proc/self/exe", cargv.data());
      _exit(127);
    }
    children.push_back({pid, rank});
  }
  if (o.nnodes == 1)
    log::info("launched ", o.nproc, " processes (rendezvous ", o.master_addr, ":", port, ")");
  else
    log::info("launched ranks ", o.node_rank * o.nproc, "-", (o.node_rank + 1) * o.nproc - 1,
              " of ", world_size, " on node ", o.node_rank, " of ", o.nnodes, " (rendezvous ",
              o.master_addr, ":", port, ")");

  using Clock = std::chrono::steady_clock;
  int first_failure = 0;
  Clock::time_point term_at = Clock::time_point::max(), kill_at = Clock::time_point::max();
  size_t running = children.size();
  while (running > 0) {
    if (const int sig = g_signal.exchange(0)) {
      g_forwarded = sig;
      signal_all(children, sig);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        --running;
        c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (c.exit_code != 0 && first_failure == 0) {
          first_failure = c.exit_code;
          if (WIFSIGNALED(status))
            log::warn("rank ", c.rank, " (pid ", c.pid, ") was killed by signal ", WTERMSIG(status),
                      " (", strsignal(WTERMSIG(status)), "); exit code ", c.exit_code);
          else
            log::warn("rank ", c.rank, " (pid ", c.pid, ") exited with code ", c.exit_code);
          term_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(o.grace_seconds));
        }
      }
      continue;
    }
    const auto now = Clock::now();
    if (now >= term_at) {
      log::warn("stopping the remaining ranks after the failure");
      signal_all(children, SIGTERM);
      signal_all(children, SIGCONT);  // a stopped (frozen) rank handles SIGTERM only once resumed
      term_at = Clock::time_point::max();
      kill_at = now + std::chrono::seconds(10);
    } else if (now >= kill_at) {
      signal_all(children, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return first_failure;
}

}  // namespace xdino::launch
