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
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "core/check.h"
#include "core/log.h"
#include "distributed/launcher_env.h"
#include "distributed/rendezvous/node_rendezvous.h"

extern char** environ;

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
  bool membership = false;         // stopped for a node waiting to join, or dropped from the round
  bool closed = false;             // stopped because another node closed the rendezvous
  bool lost_store = false;         // stopped because the rendezvous store stopped answering
  bool stopped_by_peer = false;    // a process saved and stopped at another rank's word
  bool stopped_by_signal = false;  // ... at a signal sent to it, not through this launcher
};

// The read end of the pipe on which each process writes one byte once it has joined the
// rendezvous (distributed/launcher_env.h, kReadyFdVariable); its write end goes to the children.
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

  int write_end() const { return fds_[1]; }
  void close_write_end() {
    if (fds_[1] >= 0) close(fds_[1]);
    fds_[1] = -1;
  }
  // The processes that have joined so far ('J' each).
  int64_t joined() {
    drain();
    return joined_;
  }
  // Whether a process said it saved and stopped before the run's end at another rank's word
  // ('S'), or at a signal of its own ('T').
  bool stopped_by_peer() {
    drain();
    return by_peer_;
  }
  bool stopped_by_signal() {
    drain();
    return by_signal_;
  }

 private:
  void drain() {
    char buffer[64];
    ssize_t n;
    while ((n = read(fds_[0], buffer, sizeof buffer)) > 0)
      for (ssize_t i = 0; i < n; ++i) {
        joined_ += buffer[i] == 'J';
        by_peer_ = by_peer_ || buffer[i] == 'S';
        by_signal_ = by_signal_ || buffer[i] == 'T';
      }
  }

  int fds_[2] = {-1, -1};
  int64_t joined_ = 0;
  bool by_peer_ = false, by_signal_ = false;
};

// The environment of one child, made before fork: between fork and exec a child of this
// multi-threaded process (the rendezvous' threads) may only make async-signal-safe calls.
class ChildEnvironment {
 public:
  explicit ChildEnvironment(const std::map<std::string, std::string>& set,
                            const std::map<std::string, std::string>& set_unless_present) {
    std::map<std::string, std::string> all;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry(*e);
      const size_t eq = entry.find('=');
      if (eq != std::string::npos) all[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    for (const auto& [k, v] : set_unless_present) all.emplace(k, v);
    for (const auto& [k, v] : set) all[k] = v;
    for (const auto& [k, v] : all) entries_.push_back(k + "=" + v);
    for (auto& entry : entries_) pointers_.push_back(entry.data());
    pointers_.push_back(nullptr);
  }
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

std::string describe_exit(const Child& c, int status) {
  if (WIFSIGNALED(status))
    return "rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) +
           ") was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + "); exit code " + std::to_string(c.exit_code);
  return "rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) +
         ") exited with code " + std::to_string(c.exit_code);
}

// Starts this node's processes once, in `round`, and waits for all of them.
StartEnd start_once(const LocalLaunchOptions& o, const std::vector<std::string>& child_args,
                    const distributed::NodeRound& round, int64_t restarts,
                    distributed::NodeRendezvous& rendezvous) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max<unsigned>(1, cores / o.nproc));
  const int64_t world_size = round.nnodes * o.nproc;
  ReadyPipe ready;

  std::vector<std::string> argv{"dino"};
  argv.insert(argv.end(), child_args.begin(), child_args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  std::vector<Child> children;
  for (int local = 0; local < o.nproc; ++local) {
    const int rank = static_cast<int>(round.group_rank * o.nproc + local);
    const ChildEnvironment env({{"RANK", std::to_string(rank)},
                                {"LOCAL_RANK", std::to_string(local)},
                                {"GROUP_RANK", std::to_string(round.group_rank)},
                                {"WORLD_SIZE", std::to_string(world_size)},
                                {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
                                {"MASTER_ADDR", round.master_addr},
                                {"MASTER_PORT", std::to_string(round.master_port)},
                                // Group rank 0's launcher serves that store (node_rendezvous.h).
                                {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                {"TORCHELASTIC_RESTART_COUNT", std::to_string(restarts)},
                                {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
                                {"TORCHELASTIC_RUN_ID", o.rendezvous.run_id},
                                {distributed::kRoundVariable, std::to_string(round.round)},
                                {distributed::kReadyFdVariable, std::to_string(ready.write_end())}},
                               {{"OMP_NUM_THREADS", threads}});
    const pid_t pid = fork();
    XDINO_CHECK(pid >= 0, "fork failed while starting rank ", rank);
    if (pid == 0) {
      // Own process group: a terminal's Ctrl-C reaches the launcher once, which forwards it
      // once; and die with the launcher rather than linger as orphans.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      for (int sig : ForwardSignals::kSignals) signal(sig, SIG_DFL);
      fcntl(ready.write_end(), F_SETFD, 0);  // kept across exec
      execve("/proc/self/exe", cargv.data(), env.get());
      _exit(127);
    }
    children.push_back({pid, rank});
  }
  ready.close_write_end();
  const std::string where = round.master_addr + ":" + std::to_string(round.master_port);
  if (round.nnodes == 1)
    log::info("launched ", o.nproc, " processes (rendezvous ", where, ", round ", round.round, ")");
  else
    log::info("launched ranks ", round.group_rank * o.nproc, "-",
              (round.group_rank + 1) * o.nproc - 1, " of ", world_size, " on node ",
              round.group_rank, " of ", round.nnodes, " (rendezvous ", where, ", round ",
              round.round, ")");

  using Clock = std::chrono::steady_clock;
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  StartEnd end;
  const double join_timeout = o.rendezvous.join_timeout;
  const auto rdzv_deadline = Clock::now() + seconds(join_timeout);
  Clock::time_point term_at = Clock::time_point::max(), kill_at = Clock::time_point::max();
  const auto stop_all = [&] {
    signal_all(children, SIGTERM);
    signal_all(children, SIGCONT);  // a stopped (frozen) rank handles SIGTERM only once resumed
    term_at = Clock::time_point::max();
    kill_at = Clock::now() + std::chrono::seconds(10);
  };
  size_t running = children.size();
  // What the watcher had read when the round started: only a later read may say this node
  // is no longer in it.
  const int64_t reads_at_start = rendezvous.status().reads;
  while (running > 0) {
    if (const int sig = g_signal.exchange(0)) {
      g_forwarded = sig;
      signal_all(children, sig);
    }
    if (!end.formed && !end.rdzv_timed_out) {
      end.formed = ready.joined() >= o.nproc;
      if (!end.formed && Clock::now() >= rdzv_deadline && end.exit_code == 0) {
        end.rdzv_timed_out = true;
        end.exit_code = 1;
        end.cause = detail::concat("the workers' rendezvous at ", where, " did not form within ",
                                   "--rdzv_timeout ", join_timeout, " s");
        log::warn(end.cause, "; stopping them");
        stop_all();
      }
    }
    const distributed::RendezvousStatus status = rendezvous.status();
    if (status.closed && !status.finished && !end.closed && !end.membership) {
      end.closed = true;
      end.cause = status.reason;
      log::warn("the rendezvous was closed (", status.reason, "); stopping this node's processes");
      stop_all();
    } else if (status.unreachable_for > o.rendezvous.join_timeout && !end.lost_store &&
               !end.closed && !end.membership) {
      // Without its store a run cannot re-form when a node fails, and its end cannot be
      // recorded: stop while the workers can still save (torchrun's agent fails likewise).
      end.lost_store = true;
      end.exit_code = 1;
      end.cause =
          detail::concat("the rendezvous store (", rendezvous.endpoint(), ") has not answered for ",
                         std::lround(status.unreachable_for), " s, more than --rdzv_timeout ",
                         o.rendezvous.join_timeout, " s: ", status.unreachable);
      log::warn(end.cause, "; stopping this node's processes");
      stop_all();
    } else if (status.in_round && status.round == round.round && status.waiting > 0 &&
               !end.membership && !end.closed && end.exit_code == 0 && g_forwarded == 0) {
      end.membership = true;
      end.cause = status.waiting_node + " is waiting to join";
      log::warn(end.cause, "; stopping this node's processes to re-form the run with it");
      stop_all();
    } else if (status.reads > reads_at_start && !status.closed &&
               (status.round > round.round || (status.round == round.round && !status.in_round)) &&
               !end.membership && !end.closed && end.exit_code == 0 && g_forwarded == 0) {
      // The others dropped this node (its heartbeats lapsed: frozen, cut off): its ranks may
      // be given to a replacement, so its workers must not go on beside it.
      end.membership = true;
      end.cause = detail::concat("this node is no longer in round ", round.round,
                                 " (its heartbeats lapsed and the others dropped it)");
      log::warn(end.cause, "; stopping this node's processes to join the next round");
      stop_all();
    }
    int status_code = 0;
    const pid_t pid = waitpid(-1, &status_code, WNOHANG);
    if (pid > 0) {
      for (Child& c : children) {
        if (c.pid != pid) continue;
        c.running = false;
        --running;
        c.exit_code =
            WIFEXITED(status_code) ? WEXITSTATUS(status_code) : 128 + WTERMSIG(status_code);
        if (c.exit_code != 0 && end.exit_code == 0 && !end.membership && !end.closed) {
          end.exit_code = c.exit_code;
          end.cause = describe_exit(c, status_code);
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
  end.stopped_by_peer = ready.stopped_by_peer();
  end.stopped_by_signal = ready.stopped_by_signal();
  return end;
}

}  // namespace

int launch_forwarded_signal() { return g_forwarded; }

int launch_local(const LocalLaunchOptions& o, const std::vector<std::string>& child_args) {
  XDINO_CHECK_ARG(o.nproc >= 1, "--nproc_per_node must be at least 1, got ", o.nproc);
  XDINO_CHECK_ARG(o.max_restarts >= 0, "--max_restarts must be >= 0, got ", o.max_restarts);
  XDINO_CHECK_ARG(!child_args.empty(),
                  "nothing to launch: give the subcommand after the launcher's flags, e.g. "
                  "dino launch --nproc_per_node 2 train --config my.ini");

  g_signal = 0;
  g_forwarded = 0;
  // Before the signals are taken over: a Ctrl-C while it waits for the store just ends us.
  distributed::NodeRendezvous rendezvous(o.rendezvous);
  const ForwardSignals forward;
  const auto give_up = [&](const std::string& why) {
    rendezvous.close(rendezvous.name() + " gave up: " + why);
  };
  for (int64_t restarts = 0;;) {
    std::optional<distributed::NodeRound> round;
    try {
      round = rendezvous.next_round([] { return g_signal != 0; });
    } catch (const distributed::RendezvousClosed& e) {
      throw Error(detail::concat("stopped: the rendezvous at ", rendezvous.endpoint(),
                                 " was closed: ", e.what()));
    } catch (const distributed::RendezvousTimeout& e) {
      throw Error(detail::concat(
          "gave up: ", e.what(),
          restarts > 0 ? " after restart " + std::to_string(restarts) : std::string(),
          "; check that every node's launcher runs and reaches ", rendezvous.endpoint()));
    }
    if (!round) {
      const int sig = g_signal.exchange(0);
      g_forwarded = sig;
      log::warn("stopped by signal ", sig, " while waiting for the rendezvous");
      return 128 + sig;
    }
    const StartEnd end = start_once(o, child_args, *round, restarts, rendezvous);
    const bool signalled = g_forwarded != 0 || g_signal != 0;
    if (end.closed)
      throw Error(detail::concat("stopped: the rendezvous at ", rendezvous.endpoint(),
                                 " was closed: ", end.cause));
    if (end.lost_store) throw Error("stopped: " + end.cause);
    if (end.membership && !signalled) continue;  // free: a membership change, not a failure
    if (end.exit_code == 0 && end.stopped_by_signal && !signalled) {
      // Someone stopped this node's processes themselves (`kill`, `pkill -f "dino train"`):
      // as a signal to this launcher, the run stops, and is not recorded as finished.
      log::warn(
          "not restarting: this node's processes were stopped by a signal sent to them; "
          "rerun the same command to continue");
      return 0;
    }
    if (end.exit_code == 0 && end.stopped_by_peer && !signalled) {
      // Stopped at another node's word (its signal, its membership change, its lost store):
      // the run is not over, so it is not recorded as finished.
      if (const auto status = rendezvous.status(); status.unreachable_for > 0)
        throw Error(
            detail::concat("stopped: this node's processes saved and stopped before the "
                           "run's end, and the rendezvous store (",
                           rendezvous.endpoint(), ") has not answered for ",
                           std::lround(status.unreachable_for), " s: ", status.unreachable));
      log::warn(
          "this node's processes saved and stopped before the run's end (another node "
          "stopped); re-forming the run");
      continue;  // free, as a membership change
    }
    if (end.exit_code == 0) {
      if (!signalled) rendezvous.finish();
      return 0;
    }
    if (signalled) {
      log::warn("not restarting: the run was asked to stop (signal ",
                std::max<int>(g_forwarded, g_signal), ")");
      return end.exit_code;
    }
    if (end.rdzv_timed_out) {
      give_up(end.cause);
      throw Error(detail::concat(
          "gave up: ", end.cause,
          restarts > 0 ? " after restart " + std::to_string(restarts) : std::string(),
          "; check that every node's launcher runs and reaches ", rendezvous.endpoint()));
    }
    if (o.max_restarts == 0) {
      give_up(end.cause);
      return end.exit_code;
    }
    if (end.exit_code == 2) {
      log::warn("not restarting: exit code 2 is a usage error, which a restart repeats");
      give_up(end.cause + " (a usage error)");
      return end.exit_code;
    }
    if (restarts == o.max_restarts) {
      log::error("gave up after ", o.max_restarts, " restart", o.max_restarts == 1 ? "" : "s",
                 " (--max_restarts): ", end.cause);
      give_up(end.cause + " after " + std::to_string(o.max_restarts) + " restarts");
      return end.exit_code;
    }
    ++restarts;
    log::warn("restart ", restarts, " of ", o.max_restarts, " after: ", end.cause,
              "; starting this node's processes again, to resume from the last checkpoint");
  }
}

}  // namespace xdino::launch
