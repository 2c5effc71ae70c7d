// The launchers' rendezvous: which nodes form the current round of a multi-process run, kept
// in one store for the whole job, so that a launcher that starts late or again (SLURM,
// Kubernetes or a person restarting a host) joins the round the others are in. torchrun's c10d
// rendezvous, without Python; docs/architecture.md, "Runs that heal", says how a run uses it.
//
// What lives where (backend "c10d"; with "etcd" the same keys live in an etcd cluster under
// "/xdino/rendezvous/<run_id>/", heartbeats are leases and no launcher serves anything:
// round_store.h says what differs, docs/distributed.md, "The rendezvous in etcd", why):
//  - One TCPStore, served for the life of the job by one launcher: the one whose node_rank is
//    0, or (without --node_rank) the one on the machine that owns the endpoint's address, or
//    the one `is_host` names. It holds, under "xdino.rendezvous.<run_id>/":
//      state       one JSON blob, changed only by compare-and-set (a writer that loses reads
//                  the fresh blob and decides again): the round number (global, never a
//                  launcher's own count), whether the round is complete or closed, its
//                  participants (each with the node rank it asks for and the address its
//                  workers' store would have), the ranks given at completion, the nodes waiting
//                  for a new round and the spare ones;
//      hb/<node>   a counter each launcher adds to every keep_alive_interval;
//      left/<node> set by a launcher that exits: the next reader drops it from the state at
//                  once, without waiting for its heartbeats to stop.
//  - A node is "<addr>/<pid>/<n>": a launcher started again is a new node, never its
//    predecessor; the predecessor leaves the state when its heartbeats stop.
//  - Liveness is judged by each reader's own monotonic clock (a counter that has not moved for
//    keep_alive_interval x keep_alive_max_attempt), never by comparing hosts' wall clocks.
//
// The round's life (torchrun's, docs/architecture.md), decided by
// distributed/rendezvous/rendezvous_rules.h's pure decide() on each state read; this class reads,
// drops the nodes that are gone, and writes:
//  - next_round() first leaves the round this node is in. When the last participant of a
//    complete round leaves, or is found dead, the round number goes up and the round is open.
//  - An open round takes participants until there are nnodes (a node asking for a node_rank
//    another participant holds waits for that one to leave or die); the node that makes it
//    nnodes completes it, giving each its node_rank, the others the free ranks in order (the
//    store's host first). A node that finds the round complete without it waits (the round has
//    fewer than nnodes live participants: running launchers see it and re-form) or is spare
//    (the round is full).
//  - Each participant serves a store of its own on a free port from the moment it starts to
//    look for a round, and publishes "<its address>:<that port>" when it joins; group rank 0's
//    becomes the round's workers' store (MASTER_ADDR/MASTER_PORT, with
//    TORCHELASTIC_USE_AGENT_STORE: its workers connect to it, rank 0 included), returned in
//    NodeRound::workers_store for the launcher to hold while they run. The port is held from
//    the moment it is chosen: no other process can take it while the round forms (minutes),
//    and each round's workers meet on a port of their own.
//  - close(reason) ends the rendezvous for every launcher (a node that gives up: restarts spent,
//    a usage error, its own join timeout); finish() marks it done after success. A closed
//    rendezvous never re-forms: next_round() throws RendezvousClosed, and status() says so to
//    launchers whose workers still run. A launcher stopped by a signal does not close, so that
//    it can be started again and rejoin.
//  - With c10d the store's host is a single point: if its launcher dies, the store goes with it.
//    The others reconnect until their join timeout (a restarted host launcher serves a new,
//    empty store, which they then join), and otherwise give up with one line. With etcd there
//    is no such host.
//
// Contract:
//  - The constructor serves or connects to the store (a client retries until join_timeout;
//    with etcd, a cluster no member of which answers within min(join_timeout, 15 s) and a
//    run_id whose rendezvous has ended are xdino::UsageError)
//    and starts two threads: the heartbeat and a watcher that reads the state every
//    poll_interval for status(). Throws xdino::UsageError for bad options (a timeout that is
//    not a finite number of seconds in (0, kMaxSeconds]), a port the host cannot bind, or a
//    node_rank 0 whose endpoint is not an address of this machine (unless is_host says so:
//    the other nodes would wait for a store that nobody serves there); xdino::Error when the
//    store cannot be reached.
//  - next_round(stop) blocks until this node is in a complete round and returns it; returns
//    nullopt as soon as stop() is true (polled every 100 ms); throws RendezvousClosed, or
//    xdino::Error after join_timeout (closing the rendezvous when this node was a participant
//    of the round that did not form: the job cannot form without it) or when the store
//    stays unreachable for that long.
//  - No call blocks on the network for longer than read_timeout (store.h, TimedStore).
//  - The destructor stops the threads and marks this node as left; the store's host keeps
//    serving until every other node of the last state has left or died (at most
//    exit_barrier_timeout).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/check.h"
#include "distributed/rendezvous/etcd.h"
#include "distributed/rendezvous/rendezvous_rules.h"
#include "distributed/rendezvous/round_store.h"
#include "distributed/rendezvous/store.h"

namespace xdino::distributed {

// The longest any rendezvous timeout may be: about 11.6 days. Longer is a typo (or inf), and
// its milliseconds would overflow.
inline constexpr double kMaxSeconds = 1e6;

// Where the round lives: kC10d, a TCPStore that one launcher serves (torchrun's c10d and
// static backends); kEtcd, an etcd cluster, and no launcher serves anything.
enum class RendezvousBackend { kC10d, kEtcd };

// torchrun's --rdzv_backend names: c10d or static, etcd or etcd-v2; anything else throws
// xdino::UsageError naming the ones there are.
RendezvousBackend parse_rendezvous_backend(const std::string& name);

struct NodeRendezvousOptions {
  // kEtcd: the cluster `etcd` names (endpoint_host, endpoint_port and is_host unused).
  RendezvousBackend backend = RendezvousBackend::kC10d;
  EtcdOptions etcd;
  std::string endpoint_host = "127.0.0.1";  // the store's host, as every node reaches it
  int endpoint_port = 0;                    // 0: a free port of this machine (one node only)
  std::string run_id = "none";              // torchrun's --rdzv_id
  int64_t nnodes = 1;
  int64_t node_rank = -1;       // -1: given by the rendezvous
  std::optional<bool> is_host;  // unset: node_rank 0, or the endpoint's address is local
  std::string local_addr;       // how the others reach this machine; "": its host name
  double join_timeout = 600;    // seconds; torchrun's defaults below
  double keep_alive_interval = 5;
  int64_t keep_alive_max_attempt = 3;
  double read_timeout = 60;
  double heartbeat_timeout = 5;  // one heartbeat's store write, at most
  // torchrun's wait for nodes beyond --nnodes MIN once MIN have joined. Every size here is
  // fixed (MIN = MAX), so a round completes the moment MAX have joined and there is nothing
  // to wait for: checked and recorded, never waited.
  double last_call_timeout = 30;
  double close_timeout = 30;
  double exit_barrier_timeout = 300;
  double poll_interval = 1;
};

struct NodeRound {
  int64_t round = 0;
  int64_t group_rank = 0;  // this node's rank: its workers are group_rank * nproc + local
  int64_t nnodes = 1;
  std::string master_addr;  // the round's workers' store (group rank 0's machine)
  int master_port = 0;
  // Group rank 0's: the workers' store itself, served by this launcher on master_port since
  // the round began; hold it until the round's workers have ended. Null on the other nodes.
  TcpStorePtr workers_store;
};

// What the watcher last read (launch/local_launcher.cpp acts on it between worker checks).
struct RendezvousStatus {
  bool in_round = false;  // this node is a participant of the complete current round
  int64_t round = 0;
  int64_t waiting = 0;       // nodes asking for a new round
  std::string waiting_node;  // the first of them, for the log
  bool closed = false;
  bool finished = false;  // closed by success, not by a node giving up
  std::string closed_by, reason;
  // How long the store has not answered the watcher (0 while it answers), and its last error.
  double unreachable_for = 0;
  std::string unreachable;
  int64_t reads = 0;  // how many times the watcher has read the state so far
};

// Thrown by next_round(): the rendezvous was closed (the message is the closer's reason), or
// it did not form within join_timeout (the message says how far it got).
class RendezvousClosed : public Error {
 public:
  using Error::Error;
};
class RendezvousTimeout : public Error {
 public:
  using Error::Error;
};

class NodeRendezvous {
 public:
  explicit NodeRendezvous(NodeRendezvousOptions options);
  ~NodeRendezvous();
  NodeRendezvous(const NodeRendezvous&) = delete;
  NodeRendezvous& operator=(const NodeRendezvous&) = delete;

  std::optional<NodeRound> next_round(const std::function<bool()>& stop);
  RendezvousStatus status() const;
  void close(const std::string& reason);
  void finish();

  bool is_host() const { return is_host_; }
  const std::string& endpoint() const { return endpoint_; }  // "host:port"
  const std::string& node() const { return node_; }
  std::string name() const;  // the node as lines name it: "node02 (launcher pid 4242)"

 private:
  struct Read;
  Read read(RoundStore::Use use, bool sanitize);
  bool write(RoundStore::Use use, const std::string& token, const RoundState& state);
  bool sanitize(RoundStore::Use use, RoundState& state);
  void serve_or_connect(std::chrono::milliseconds op_timeout);
  void connect_etcd(std::chrono::milliseconds op_timeout);
  RoundStoreTimes times(std::chrono::milliseconds op_timeout) const;
  void set_closed(const std::string& reason, bool finished);
  void beat_loop();
  void watch_loop();
  bool sleep_for(std::chrono::milliseconds d);  // false once stopping
  std::string key(const std::string& what) const;

  NodeRendezvousOptions options_;
  bool is_host_ = false;
  std::string endpoint_, node_, addr_, master_;
  TcpStorePtr server_;         // the host's (c10d)
  TcpStorePtr workers_store_;  // this node's, on master_'s port, while it looks for a round
  std::unique_ptr<RoundStore> store_;

  mutable std::mutex mutex_;  // everything below
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  RendezvousStatus status_;
  std::chrono::steady_clock::time_point last_sanitize_{};
  std::vector<std::string> last_nodes_;  // of the last state read: whom the exit barrier waits for

  std::thread beat_thread_, watch_thread_;
};

}  // namespace xdino::distributed
