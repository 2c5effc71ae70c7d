// Where the launchers' rendezvous keeps its round (node_rendezvous.h): storage only. The rules
// that decide a round (rendezvous_rules.h) run unchanged over each backend:
//  - TcpRoundStore: the c10d store that one launcher serves for the job (--rdzv_backend c10d,
//    torchrun's default): the state is compared by value, a node's heartbeat is a counter it
//    adds to, and each reader judges it dead by its own monotonic clock when the counter has
//    not moved for keep_alive_interval x keep_alive_max_attempt.
//  - EtcdRoundStore: an etcd cluster (--rdzv_backend etcd, distributed/rendezvous/etcd.h): the
//  state is
//    one key compared by its revision in a transaction, a node's heartbeat is a key bound to
//    a lease of that same span that the node renews every keep_alive_interval, so a dead
//    node's key expires by itself (timed by etcd's leader, no host's clock). No launcher
//    serves anything: any host, node 0's included, can die and come back.
//
// Contract (both):
//  - Each operation names its use; the use sets its deadline (the options' read_timeout for
//    kMain, heartbeat_timeout for kBeat, at most 5 s for kWatch and kQuick, which must not
//    hold a launcher that is leaving). Failures throw xdino::Error (one line, naming where).
//  - read(): the state blob ("" when none was written) and the token a compare_set presents.
//    compare_set(token, blob) writes when the state is still the one read; false when another
//    writer came first (or, rarely, when the answer to a write that happened was lost: the
//    caller reads again and decides on what is there).
//  - beat(): this node's heartbeat; the constructor gives the first. left(node): `node` said it
//    left (leave(), from its destructor). dead(node): its heartbeats have stopped.
//  - where(): the store as lines name it ("node01:29400", "etcd at h1:2379,h2:2379").
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "distributed/rendezvous/etcd.h"
#include "distributed/rendezvous/store.h"

namespace xdino::distributed {

class RoundStore {
 public:
  enum class Use { kMain, kBeat, kWatch, kQuick };
  struct State {
    std::string blob, token;
  };
  virtual ~RoundStore() = default;

  virtual State read(Use use) = 0;
  virtual bool compare_set(Use use, const std::string& token, const std::string& blob) = 0;
  virtual void beat() = 0;
  virtual bool left(Use use, const std::string& node) = 0;
  virtual void leave() = 0;
  virtual bool dead(Use use, const std::string& node) = 0;
  virtual std::string where() const = 0;
};

// The deadlines of each use, and the heartbeat's span (node_rendezvous.h's options).
struct RoundStoreTimes {
  std::chrono::milliseconds main{60000}, beat{5000}, brief{5000};
  std::chrono::milliseconds keep_alive_interval{5000};
  int64_t keep_alive_max_attempt = 3;
  std::chrono::milliseconds use(RoundStore::Use use) const;
  std::chrono::milliseconds dead_after() const {
    return keep_alive_interval * keep_alive_max_attempt;
  }
};

class TcpRoundStore : public RoundStore {
 public:
  // `connect` makes a client of the store within the time given; `prefix` ends with '/'.
  TcpRoundStore(TimedStore::Factory connect, std::string where, std::string prefix,
                std::string node, RoundStoreTimes times);
  State read(Use use) override;
  bool compare_set(Use use, const std::string& token, const std::string& blob) override;
  void beat() override;
  bool left(Use use, const std::string& node) override;
  void leave() override;
  bool dead(Use use, const std::string& node) override;
  std::string where() const override { return where_; }

 private:
  TimedStore& store(Use use);
  std::string where_, prefix_, node_;
  RoundStoreTimes times_;
  TimedStore main_, beat_, watch_, quick_;
  std::mutex mutex_;  // seen_
  struct Seen {
    int64_t beats = -1;
    std::chrono::steady_clock::time_point moved;
  };
  std::map<std::string, Seen> seen_;
};

#ifdef XDINO_WITH_ETCD  // distributed/CMakeLists.txt: built where libcurl is
class EtcdRoundStore : public RoundStore {
 public:
  // Grants this node's lease and puts its heartbeat key within `connect`; throws
  // EtcdUnavailable when no member answers in that time.
  EtcdRoundStore(EtcdOptions options, std::string prefix, std::string node, RoundStoreTimes times,
                 std::chrono::milliseconds connect);
  ~EtcdRoundStore() override;
  State read(Use use) override;
  bool compare_set(Use use, const std::string& token, const std::string& blob) override;
  void beat() override;
  bool left(Use use, const std::string& node) override;
  void leave() override;
  bool dead(Use use, const std::string& node) override;
  std::string where() const override { return client_.where(); }

 private:
  void new_lease(std::chrono::milliseconds timeout);
  EtcdClient client_;
  std::string prefix_, node_;
  RoundStoreTimes times_;
  std::mutex mutex_;  // lease_
  int64_t lease_ = 0;
};
#endif

}  // namespace xdino::distributed
