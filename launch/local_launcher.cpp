#include "launch/local_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
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
    struct sigaction sa = {};
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

// How one start of the local processes ended.
struct StartEnd {
  int exit_code = 0;    // the first failure's (0: all succeeded)
  std::string cause;    // that failure, in words
  bool formed = false;  // every local process joined the rendezvous
  bool rdzv_timed_out = false;
};

// The read end of the pipe on which each process writes one byte once it has joined the
// rendezvous (distributed/distributed.h); its write end is handed to the children only.
class ReadyPipe {
 public:
  ReadyPipe() {
    XDINO_CHECK(pipe2(fds_, O_CLOEXEC | O_NONBLOCK) == 0,
                "cannot create a pipe: ", std::strerror(errno));
  }
  ~ReadyPipe() {
    close_write_end();
    close(fds_[0]);
  }
  ReadyPipe(const ReadyPipe&) = delete;
  ReadyPipe& operator=(const ReadyPipe&) = delete;

  // In the child, before exec: keep the write end open across exec and name it.
  void hand_to_child() const {
    fcntl(fds_[1], F_SETFD, 0);
    setenv("XDINO_LAUNCH_READY_FD", std::to_string(fds_[1]).c_str(), 1);
  }
  void close_write_end() {
    if (fds_[1] >= 0) close(fds_[1]);
    fds_[1] = -1;
  }
  // Bytes received so far.
  int64_t joined() {
    char buffer[64];
    ssize_t n;
    while ((n = read(fds_[0], buffer, sizeof buffer)) > 0) joined_ += n;
    return joined_;
  }

 private:
  int fds_[2] = {-1, -1};
  int64_t joined_ = 0;
};

std::string describe_exit(const Child& c, int status) {
  if (WIFSIGNALED(status))
    return "rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) +
           ") was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + "); exit code " + std::to_string(c.exit_code);
  return "rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) +
         ") exited with code " + std::to_string(c.exit_code);
}

// Starts this node's processes once, with the rendezvous at `port`, and waits for all of them.
StartEnd start_once(const LocalLaunchOptions& o, const std::vector<std::string>& child_args,
                    int port, int64_t restart) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max<unsigned>(1, cores / o.nproc));
  const int64_t world_size = o.nnodes * o.nproc;
  const bool watch_rendezvous = o.max_restarts > 0;
  ReadyPipe ready;

  std::vector<Child> children;
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
      setenv("TORCHELASTIC_RESTART_COUNT", std::to_string(restart).c_str(), 1);
      setenv("TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts).c_str(), 1);
      if (watch_rendezvous) ready.hand_to_child();
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
  ready.close_write_end();
  const std::string where = o.master_addr + ":" + std::to_string(port);
  if (o.nnodes == 1)
    log::info("launched ", o.nproc, " processes (rendezvous ", where, ")");
  else
    log::info("launched ranks ", o.node_rank * o.nproc, "-", (o.node_rank + 1) * o.nproc - 1,
              " of ", world_size, " on node ", o.node_rank, " of ", o.nnodes, " (rendezvous ",
              where, ")");

  using Clock = std::chrono::steady_clock;
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  StartEnd end;
  const auto rdzv_deadline = Clock::now() + seconds(o.rdzv_timeout);
  Clock::time_point term_at = Clock::time_point::max(), kill_at = Clock::time_point::max();
  const auto stop_all = [&] {
    signal_all(children, SIGTERM);
    signal_all(children, SIGCONT);  // a stopped (frozen) rank handles SIGTERM only once resumed
    term_at = Clock::time_point::max();
    kill_at = Clock::now() + std::chrono::seconds(10);
  };
  size_t running = children.size();
  while (running > 0) {
    if (const int sig = g_signal.exchange(0)) {
      g_forwarded = sig;
      signal_all(children, sig);
    }
    if (watch_rendezvous && !end.formed && !end.rdzv_timed_out) {
      end.formed = ready.joined() >= o.nproc;
      if (!end.formed && Clock::now() >= rdzv_deadline && end.exit_code == 0) {
        end.rdzv_timed_out = true;
        end.exit_code = 1;
        end.cause = detail::concat("the rendezvous at ", where, " did not form within ",
                                   "--rdzv_timeout ", o.rdzv_timeout, " s");
        log::warn(end.cause, "; stopping them");
        stop_all();
      }
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        --running;
        c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (c.exit_code != 0 && end.exit_code == 0) {
          end.exit_code = c.exit_code;
          end.cause = describe_exit(c, status);
          log::warn(end.cause);
          term_at = Clock::now() + seconds(o.grace_seconds);
        }
      }
      continue;
    }
    const auto now = Clock::now();
    if (now >= term_at) {
      log::warn("stopping the remaining ranks after the failure");
      stop_all();
    } else if (now >= kill_at) {
      signal_all(children, SIGKILL);
      kill_at = Clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return end;
}

}  // namespace

int launch_forwarded_signal() { return g_forwarded; }

int launch_local(const LocalLaunchOptions& o, const std::vector<std::string>& child_args) {
  XDINO_CHECK_ARG(o.nproc >= 1, "--nproc_per_node must be at least 1, got ", o.nproc);
  XDINO_CHECK_ARG(o.nnodes >= 1 && o.node_rank >= 0 && o.node_rank < o.nnodes,
                  "--node_rank must be in [0, --nnodes), got ", o.node_rank, " of ", o.nnodes);
  XDINO_CHECK_ARG(o.max_restarts >= 0, "--max_restarts must be >= 0, got ", o.max_restarts);
  XDINO_CHECK_ARG(o.rdzv_timeout > 0, "--rdzv_timeout must be positive (seconds), got ",
                  o.rdzv_timeout);
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
  XDINO_CHECK_ARG(o.master_port == 0 || o.master_port + o.max_restarts <= 65535, "--master_port ",
                  o.master_port, " + --max_restarts ", o.max_restarts,
                  " passes 65535: restart k uses port master_port + k");
  XDINO_CHECK_ARG(!child_args.empty(),
                  "nothing to launch: give the subcommand after the launcher's flags, e.g. "
                  "dino launch --nproc_per_node 2 train --config my.ini");

  g_signal = 0;
  g_forwarded = 0;
  const ForwardSignals forward;
  for (int64_t restart = 0;; ++restart) {
    const int port = o.master_port > 0 ? static_cast<int>(o.master_port + restart)
                                       : distributed::free_tcp_port();
    const StartEnd end = start_once(o, child_args, port, restart);
    if (end.exit_code == 0 || o.max_restarts == 0) return end.exit_code;
    if (g_forwarded != 0 || g_signal != 0) {
      log::warn("not restarting: the run was asked to stop (signal ",
                std::max<int>(g_forwarded, g_signal), ")");
      return end.exit_code;
    }
    if (end.rdzv_timed_out)
      XDINO_FAIL("gave up: ", end.cause,
                 restart > 0 ? " after restart " + std::to_string(restart) : std::string(),
                 "; check that every node's launcher runs and reaches ", o.master_addr);
    if (end.exit_code == 2) {
      log::warn("not restarting: exit code 2 is a usage error, which a restart repeats");
      return end.exit_code;
    }
    if (restart == o.max_restarts) {
      log::error("gave up after ", o.max_restarts, " restart", o.max_restarts == 1 ? "" : "s",
                 " (--max_restarts): ", end.cause);
      return end.exit_code;
    }
    log::warn("restart ", restart + 1, " of ", o.max_restarts, " after: ", end.cause,
              "; starting this node's processes again, to resume from the last checkpoint");
  }
}

}  // namespace xdino::launch
