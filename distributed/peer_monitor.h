// Liveness of the processes of one run, watched beside the collectives (internal to
// distributed/; distributed.cpp owns one per communicator).
//
// Why heartbeats, and what they separate. A collective cannot tell a dead peer from a slow
// one: it only waits. Gloo sets no keepalive, so when the network between two hosts goes down
// nothing is closed and a collective waits out --dist_timeout (30 min by default) before
// anyone speaks. torchrun's elastic agent and NCCL's watchdog solve this with a thread that is
// not the training loop; so do we:
//  - every process runs a heartbeat thread that adds 1 to its counter in rank 0's store every
//    kHeartbeat (0.5 s), however long its own step takes (a slow step is the main thread's
//    business, not this thread's): a peer that is alive but slow keeps beating and is waited
//    for, up to --dist_timeout, as torch does;
//  - the same thread reads every peer's counter every 5 s (4 times per window for short
//    windows) and checks that each moved within `heartbeat_timeout` (--dist_heartbeat_timeout,
//    60 s); a watchdog thread checks every second that those store round trips still
//    complete (they block, with no timeout, when rank 0's host is unreachable);
//  - when one does not, the run cannot go on: the verdict names the unreachable rank(s) and
//    their host, and the collective the main thread waits in (or its next one) fails with it
//    at once. A process frozen longer than the window (SIGSTOP, a debugger) beats no more and
//    is named the same way: we cannot tell it from an unreachable host, and say so. When
//    it runs again, it knows it was frozen (its own threads missed half a window) and starts
//    a fresh window instead of blaming its peers.
// A peer that dies closes its sockets, so the collective itself fails first; diagnose() then
// says who died or hangs (unchanged from before the watchdog).
//
// Contract:
//  - PeerMonitor(config, store_factory) publishes this process's host (hostname, or the
//    node name under SLURM, plus the address of GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME when
//    set) and starts both threads; every store connection it uses is made in the constructor
//    (a connection made after a failure can meet a dying rank 0; see the .cpp).
//  - verdict() is empty while all is well, else one line naming the lost rank(s) and host;
//    it never clears. wait_until(done) blocks until done() is true or a verdict exists, woken
//    by wake() (the caller's completion callback) or by the watchdog.
//  - entering_collective() counts collectives for diagnose(); diagnose() returns within ~8 s
//    and never throws.
//  - stop() ends both threads (idempotent); the destructor calls it. A monitor whose threads
//    may be blocked on a dead connection must be leaked instead (the communicator does).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "distributed/dist_config.h"

namespace xdino::distributed {

using StoreFactory = std::function<c10::intrusive_ptr<c10d::Store>()>;

// The store key of `what` for `rank`: "xdino/<what>/<rank>".
std::string store_key(const char* what, int rank);

class PeerMonitor {
 public:
  PeerMonitor(const DistConfig& config, const StoreFactory& connect_store);
  ~PeerMonitor();
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;

  void stop();
  void entering_collective() { ++sequence_; }
  std::string diagnose() const;

  std::string verdict() const;
  void wait_until(const std::function<bool()>& done);
  void wake();

 private:
  using Clock = std::chrono::steady_clock;

  void beat_loop();
  void watch_loop();
  void check_peers(c10d::Store& store);
  void set_verdict(std::string verdict);
  bool was_frozen(Clock::time_point& last_pass) const;

  DistConfig config_;
  std::vector<std::string> hosts_;               // per rank, read once at start
  c10::intrusive_ptr<c10d::Store> beat_store_;   // the heartbeat thread's
  c10::intrusive_ptr<c10d::Store> probe_store_;  // diagnose()'s
  std::atomic<int64_t> sequence_{0};
  int check_every_ = 1;  // beats between reads of the peers' counters

  mutable std::mutex mutex_;  // everything below
  std::condition_variable cv_;
  bool stopped_ = false;
  std::string verdict_;
  Clock::time_point last_round_trip_;          // of the heartbeat thread's store requests
  std::vector<int64_t> last_beat_;             // per rank, as last read
  std::vector<Clock::time_point> last_moved_;  // when that counter last changed

  std::thread beat_thread_, watch_thread_;
};

}  // namespace xdino::distributed
