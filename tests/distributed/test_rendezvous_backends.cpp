// The launchers' rendezvous (distributed/rendezvous/node_rendezvous.h) over each round store it
// can keep its round in (round_store.h): the same cases, typed over the c10d store one launcher
// serves (--rdzv_backend c10d) and an etcd cluster (--rdzv_backend etcd, real members on
// loopback, where the build has the backend). What a round is does not depend on where it is
// kept: one round for all with the ranks of --node_rank, a new round only once every
// participant has left, a late node waiting and the running ones seeing it, closing seen by the
// others at once, and a round that cannot form timing out with how far it got. What only one
// backend does (a launcher's dead store port, a lease that expires) is in test_node_rendezvous
// and test_etcd_rendezvous.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "distributed/rendezvous/node_rendezvous.h"
#include "distributed/rendezvous/store.h"
#include "tests/support/rendezvous.h"
#include "tests/support/require.h"
#ifdef XDINO_WITH_ETCD
#include "tests/support/etcd_cluster.h"
#endif

using namespace std::chrono_literals;
using xdino::distributed::NodeRendezvous;
using xdino::distributed::NodeRendezvousOptions;
using xdino::distributed::NodeRound;
using xdino::distributed::RendezvousClosed;
using xdino::distributed::RendezvousTimeout;
using xdino::testing::join_round;

namespace {

// What both backends' nodes share: a 20 s join, a poll every 0.1 s.
NodeRendezvousOptions common_options(int64_t rank, int64_t nnodes) {
  NodeRendezvousOptions o;
  o.nnodes = nnodes;
  o.node_rank = rank;
  o.join_timeout = 20;
  o.poll_interval = 0.1;
  return o;
}

// Node 0's launcher serves the round on a loopback port of its own, one port per job; a silent
// node is out after 0.2 s x 3.
class TcpBackend {
 public:
  static constexpr bool kLauncherHosts = true;
  static bool available() { return true; }
  static const char* missing() { return ""; }
  void start() {}
  NodeRendezvousOptions node(int64_t rank, int64_t nnodes, int job) {
    NodeRendezvousOptions o = common_options(rank, nnodes);
    o.endpoint_host = "127.0.0.1";
    o.endpoint_port = port(job);
    o.run_id = "test";
    o.keep_alive_interval = 0.2;
    o.keep_alive_max_attempt = 3;
    o.exit_barrier_timeout = 2;
    return o;
  }
  int port(int job) {
    auto [it, fresh] = ports_.try_emplace(job, 0);
    if (fresh) it->second = xdino::distributed::free_tcp_port();
    return it->second;
  }

 private:
  std::map<int, int> ports_;
};

#ifdef XDINO_WITH_ETCD
// One etcd member on loopback keeps every job's round, one run id per job; a silent node's
// lease (2 s at least) expires about 2 s after its last renewal.
class EtcdBackend {
 public:
  static constexpr bool kLauncherHosts = false;
  static bool available() { return !xdino::testing::etcd_binary().empty(); }
  static const char* missing() {
    return "needs etcd-server (scripts/setup.sh --tests installs it)";
  }
  void start() { cluster_ = std::make_unique<xdino::testing::EtcdCluster>(1); }
  NodeRendezvousOptions node(int64_t rank, int64_t nnodes, int job) {
    NodeRendezvousOptions o = common_options(rank, nnodes);
    o.backend = xdino::distributed::RendezvousBackend::kEtcd;
    o.etcd = cluster_->options();
    o.run_id = "job" + std::to_string(job);
    o.local_addr = "127.0.0.1";
    o.read_timeout = 10;  // a request met by a leader election waits up to 7 s inside etcd
    o.keep_alive_interval = 0.5;
    o.keep_alive_max_attempt = 3;
    return o;
  }

 private:
  std::unique_ptr<xdino::testing::EtcdCluster> cluster_;
};
#endif

template <typename Backend>
class RoundOverEachStore : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Backend::available()) XDINO_SKIP_MISSING() << Backend::missing();
    backend_.start();
  }
  // Node `rank` of an `nnodes` job; another `job` is another run that shares nothing.
  NodeRendezvousOptions node(int64_t rank, int64_t nnodes = 2, int job = 0) {
    return backend_.node(rank, nnodes, job);
  }
  Backend backend_;
};

#ifdef XDINO_WITH_ETCD
using Backends = ::testing::Types<TcpBackend, EtcdBackend>;
#else
using Backends = ::testing::Types<TcpBackend>;
#endif

struct BackendName {
  template <typename T>
  static std::string GetName(int) {
    return T::kLauncherHosts ? "c10d" : "etcd";
  }
};
TYPED_TEST_SUITE(RoundOverEachStore, Backends, BackendName);

const auto no_stop = [] { return false; };

}  // namespace

// Both are told the same workers' store, on a port of its own: the store's host's under c10d,
// group rank 0's launcher's under etcd, where no launcher hosts the round.
TYPED_TEST(RoundOverEachStore, TwoNodesFormOneRoundWithTheirNodeRanks) {
  NodeRendezvous a(this->node(0));
  auto b_round = std::async(std::launch::async, [&] {
    NodeRendezvous b(this->node(1));
    return join_round(b);
  });
  const NodeRound ra = join_round(a);
  const NodeRound rb = b_round.get();
  EXPECT_EQ(ra.round, 0);
  EXPECT_EQ(rb.round, 0);
  EXPECT_EQ(ra.group_rank, 0);
  EXPECT_EQ(rb.group_rank, 1);
  EXPECT_EQ(ra.nnodes, 2);
  EXPECT_EQ(ra.master_addr, "127.0.0.1");
  EXPECT_EQ(ra.master_port, rb.master_port);
  EXPECT_TRUE(ra.workers_store);
  EXPECT_EQ(a.is_host(), TypeParam::kLauncherHosts);
  if constexpr (TypeParam::kLauncherHosts) {
    EXPECT_NE(ra.master_port, this->backend_.port(0));
  } else {
    EXPECT_NE(a.endpoint().find("etcd at 127.0.0.1:"), std::string::npos) << a.endpoint();
  }
}

// The round number is the store's, not a launcher's count: a node that restarts twice and one
// that never restarts meet in the same round, the next one only once both have left.
TYPED_TEST(RoundOverEachStore, ARoundAdvancesOnceEveryParticipantHasLeft) {
  NodeRendezvous a(this->node(0));
  NodeRendezvous b(this->node(1));
  auto first = std::async(std::launch::async, [&] { return join_round(b); });
  EXPECT_EQ(join_round(a).round, 0);
  EXPECT_EQ(first.get().round, 0);
  // a leaves and asks again; it waits (the round is complete without it) until b leaves too,
  // and b, still in round 0, sees it waiting.
  auto again = std::async(std::launch::async, [&] { return join_round(a); });
  EXPECT_EQ(again.wait_for(500ms), std::future_status::timeout);
  EXPECT_EQ(b.status().waiting, 1);
  EXPECT_TRUE(b.status().in_round);
  const NodeRound rb = join_round(b);
  const NodeRound ra = again.get();
  EXPECT_EQ(ra.round, 1);
  EXPECT_EQ(rb.round, 1);
  EXPECT_EQ(ra.group_rank, 0);
  EXPECT_EQ(rb.group_rank, 1);
}

// A late node (a launcher started again on a host) finds the round complete without it: it
// waits, and the running node sees it waiting, which is what makes it re-form.
TYPED_TEST(RoundOverEachStore, ALateNodeWaitsAndTheRunningOnesSeeIt) {
  NodeRendezvous a(this->node(0));
  auto b = std::make_unique<NodeRendezvous>(this->node(1));
  auto first = std::async(std::launch::async, [&] { return join_round(*b); });
  join_round(a);
  first.get();
  b.reset();  // host B's launcher is gone (its last state: a participant of round 0)
  NodeRendezvous b_again(this->node(1));
  auto late = std::async(std::launch::async, [&] { return join_round(b_again); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (a.status().waiting == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(a.status().waiting, 1);
  EXPECT_TRUE(a.status().in_round);
  const NodeRound ra = join_round(a);  // what a's launcher does on seeing it: leave and rejoin
  const NodeRound rb = late.get();
  EXPECT_EQ(ra.round, 1);
  EXPECT_EQ(rb.round, 1);
  EXPECT_EQ(rb.group_rank, 1);
}

// A node that gives up closes the rendezvous: the other, waiting for a round, stops at once
// with the reason, not after its join timeout; a node that joins later is refused too.
TYPED_TEST(RoundOverEachStore, ClosingStopsTheOthersAtOnce) {
  NodeRendezvous a(this->node(0, 3));
  NodeRendezvous b(this->node(1, 3));
  auto waiting = std::async(std::launch::async, [&] { return b.next_round(no_stop); });
  std::this_thread::sleep_for(300ms);
  const auto t0 = std::chrono::steady_clock::now();
  a.close("node 0 gave up: a test");
  try {
    waiting.get();
    FAIL() << "next_round must throw once the rendezvous is closed";
  } catch (const RendezvousClosed& e) {
    EXPECT_STREQ(e.what(), "node 0 gave up: a test");
  }
  // Against the join timeout (20 s) it would otherwise wait out.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_THROW(a.next_round(no_stop), RendezvousClosed);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!b.status().closed && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(b.status().closed);
  EXPECT_FALSE(b.status().finished);
}

// A round that cannot form ends after the join timeout with how far it got; a stop request
// ends the wait at once, with no round.
TYPED_TEST(RoundOverEachStore, AJoinTimeoutSaysHowFarItGotAndAStopEndsTheWait) {
  auto o = this->node(0);
  o.join_timeout = 1;
  NodeRendezvous a(o);
  try {
    join_round(a);
    FAIL() << "a round of 2 with 1 node must time out";
  } catch (const RendezvousTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("did not form within --rdzv_timeout 1 s: 1 of 2 nodes "
                                         "joined round 0"),
              std::string::npos)
        << e.what();
  }
  // Giving up in a forming round closed it for everyone.
  EXPECT_THROW(a.next_round(no_stop), RendezvousClosed);

  NodeRendezvous c(this->node(0, 2, /*job=*/1));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.next_round([&] { return std::chrono::steady_clock::now() - t0 > 300ms; }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the stop came at 0.3 s";
}
