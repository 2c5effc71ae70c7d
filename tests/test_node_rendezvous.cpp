// The launchers' rendezvous (distributed/node_rendezvous.h) in one process, several "nodes" on
// threads over loopback, against torchrun's c10d semantics: one round for all, ranks from
// --node_rank, a new round only once every participant has left, a late node waiting for it,
// a dead node dropped after its heartbeats stop, closing seen by the others at once, and the
// store operations that never block for longer than their timeout (distributed/store.h).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "core/check.h"
#include "distributed/node_rendezvous.h"
#include "distributed/rendezvous.h"
#include "distributed/store.h"

using namespace std::chrono_literals;
using xdino::distributed::NodeRendezvous;
using xdino::distributed::NodeRendezvousOptions;
using xdino::distributed::NodeRound;
using xdino::distributed::RendezvousClosed;
using xdino::distributed::RendezvousTimeout;

namespace {

// Node `rank` of a 2-node job whose store node 0 serves on `port` (fast heartbeats: a silent
// node is out after 0.2 s x 3).
NodeRendezvousOptions node(int port, int64_t rank, int64_t nnodes = 2) {
  NodeRendezvousOptions o;
  o.endpoint_host = "127.0.0.1";
  o.endpoint_port = port;
  o.nnodes = nnodes;
  o.node_rank = rank;
  o.run_id = "test";
  o.join_timeout = 20;
  o.keep_alive_interval = 0.2;
  o.keep_alive_max_attempt = 3;
  o.poll_interval = 0.1;
  o.exit_barrier_timeout = 2;
  return o;
}

const auto never = [] { return false; };

NodeRound join(NodeRendezvous& r) {
  const auto round = r.next_round(never);
  if (!round) throw std::runtime_error("next_round returned no round");
  return *round;
}

}  // namespace

TEST(NodeRendezvous, TwoNodesFormOneRoundWithTheirNodeRanks) {
  const int port = xdino::distributed::free_tcp_port();
  NodeRendezvous a(node(port, 0));
  auto b_round = std::async(std::launch::async, [&] {
    NodeRendezvous b(node(port, 1));
    return join(b);
  });
  const NodeRound ra = join(a);
  const NodeRound rb = b_round.get();
  EXPECT_EQ(ra.round, 0);
  EXPECT_EQ(rb.round, 0);
  EXPECT_EQ(ra.group_rank, 0);
  EXPECT_EQ(rb.group_rank, 1);
  EXPECT_EQ(ra.nnodes, 2);
  // Both are told the same workers' store: node 0's, on a port of its own (not the store's).
  EXPECT_EQ(ra.master_addr, "127.0.0.1");
  EXPECT_EQ(ra.master_port, rb.master_port);
  EXPECT_NE(ra.master_port, port);
  EXPECT_TRUE(a.is_host());
}

// Without --node_rank the store's host is rank 0 and the other takes what is left.
TEST(NodeRendezvous, RanksWithoutNodeRankPutTheStoresHostFirst) {
  const int port = xdino::distributed::free_tcp_port();
  auto options = node(port, -1);
  options.is_host = true;
  NodeRendezvous a(options);
  auto b_round = std::async(std::launch::async, [&] {
    auto o = node(port, -1);
    o.is_host = false;
    NodeRendezvous b(o);
    return join(b);
  });
  EXPECT_EQ(join(a).group_rank, 0);
  EXPECT_EQ(b_round.get().group_rank, 1);
}

// The round number is the store's, not a launcher's count: a node that restarts twice and one
// that never restarts meet in the same round, the next one only once both have left.
TEST(NodeRendezvous, ARoundAdvancesOnceEveryParticipantHasLeft) {
  const int port = xdino::distributed::free_tcp_port();
  NodeRendezvous a(node(port, 0));
  NodeRendezvous b(node(port, 1));
  auto first = std::async(std::launch::async, [&] { return join(b); });
  EXPECT_EQ(join(a).round, 0);
  EXPECT_EQ(first.get().round, 0);
  // a leaves and asks again; it waits (the round is complete without it) until b leaves too,
  // and b, still in round 0, sees it waiting.
  auto again = std::async(std::launch::async, [&] { return join(a); });
  EXPECT_EQ(again.wait_for(500ms), std::future_status::timeout);
  EXPECT_EQ(b.status().waiting, 1);
  EXPECT_TRUE(b.status().in_round);
  const NodeRound rb = join(b);
  const NodeRound ra = again.get();
  EXPECT_EQ(ra.round, 1);
  EXPECT_EQ(rb.round, 1);
  EXPECT_EQ(ra.group_rank, 0);
  EXPECT_EQ(rb.group_rank, 1);
}

// A late node (a launcher started again on a host) finds the round complete without it: it
// waits, and the running node sees it waiting, which is what makes it re-form.
TEST(NodeRendezvous, ALateNodeWaitsAndTheRunningOnesSeeIt) {
  const int port = xdino::distributed::free_tcp_port();
  NodeRendezvous a(node(port, 0));
  auto b = std::make_unique<NodeRendezvous>(node(port, 1));
  auto first = std::async(std::launch::async, [&] { return join(*b); });
  join(a);
  first.get();
  b.reset();  // host B's launcher is gone (its last state: a participant of round 0)
  NodeRendezvous b_again(node(port, 1));
  auto late = std::async(std::launch::async, [&] { return join(b_again); });
  // b's old node is dropped once its heartbeats stop; the new one waits for a new round.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (a.status().waiting == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(a.status().waiting, 1);
  EXPECT_TRUE(a.status().in_round);
  const NodeRound ra = join(a);  // what a's launcher does on seeing it: leave and rejoin
  const NodeRound rb = late.get();
  EXPECT_EQ(ra.round, 1);
  EXPECT_EQ(rb.round, 1);
  EXPECT_EQ(rb.group_rank, 1);
}

// A node that gives up closes the rendezvous: the other, waiting for a round, stops at once
// with the reason, not after its join timeout; a node that joins later is refused too.
TEST(NodeRendezvous, ClosingStopsTheOthersAtOnce) {
  const int port = xdino::distributed::free_tcp_port();
  NodeRendezvous a(node(port, 0, 3));
  NodeRendezvous b(node(port, 1, 3));
  auto waiting = std::async(std::launch::async, [&] { return b.next_round(never); });
  std::this_thread::sleep_for(300ms);
  const auto t0 = std::chrono::steady_clock::now();
  a.close("node 0 gave up: a test");
  try {
    waiting.get();
    FAIL() << "next_round must throw once the rendezvous is closed";
  } catch (const RendezvousClosed& e) {
    EXPECT_STREQ(e.what(), "node 0 gave up: a test");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_THROW(a.next_round(never), RendezvousClosed);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!b.status().closed && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(b.status().closed);
  EXPECT_FALSE(b.status().finished);
}

// A round that cannot form ends after the join timeout with how far it got; a stop request
// ends the wait at once, with no round.
TEST(NodeRendezvous, AJoinTimeoutSaysHowFarItGotAndAStopEndsTheWait) {
  const int port = xdino::distributed::free_tcp_port();
  auto o = node(port, 0);
  o.join_timeout = 1;
  NodeRendezvous a(o);
  try {
    join(a);
    FAIL() << "a round of 2 with 1 node must time out";
  } catch (const RendezvousTimeout& e) {
    EXPECT_NE(std::string(e.what()).find("did not form within --rdzv_timeout 1 s: 1 of 2 nodes "
                                         "joined round 0"),
              std::string::npos)
        << e.what();
  }
  // Giving up in a forming round closed it for everyone.
  EXPECT_THROW(a.next_round(never), RendezvousClosed);

  const int other = xdino::distributed::free_tcp_port();
  NodeRendezvous c(node(other, 0));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.next_round([&] { return std::chrono::steady_clock::now() - t0 > 300ms; }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

// A port another program holds is named with the fix; bad options are usage errors.
TEST(NodeRendezvous, ABusyPortAndBadOptionsAreUsageErrors) {
  const int port = xdino::distributed::free_tcp_port();
  NodeRendezvous holder(node(port, 0));
  try {
    NodeRendezvous second(node(port, 0));
    FAIL() << "two hosts on one port";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("is already in use on this host"), std::string::npos)
        << e.what();
  }
  auto bad = node(port, 5);
  EXPECT_THROW(NodeRendezvous{bad}, xdino::UsageError);
  auto two_without_port = node(0, 0);
  EXPECT_THROW(NodeRendezvous{two_without_port}, xdino::UsageError);
}

// No store operation keeps its caller past its timeout, whatever the connection does.
TEST(TimedStore, AnOperationThatHangsOrFailsIsOneErrorInTime) {
  using xdino::distributed::TimedStore;
  TimedStore hangs(
      [](std::chrono::milliseconds) -> xdino::distributed::TcpStorePtr {
        std::this_thread::sleep_for(3s);
        throw std::runtime_error("too late");
      },
      200ms);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    hangs.add("k", 1);
    FAIL() << "no answer must be an error";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("store add had no answer within 200 ms"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);

  TimedStore fails(
      [](std::chrono::milliseconds) -> xdino::distributed::TcpStorePtr { throw std::bad_alloc(); },
      1s);
  try {
    fails.get("k");
    FAIL() << "a failing connection must be an error";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("store get failed: std::bad_alloc"), std::string::npos)
        << e.what();
  }
}
