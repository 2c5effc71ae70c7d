// The launchers' rendezvous (distributed/rendezvous/node_rendezvous.h) over the c10d store one
// launcher serves, in one process, several "nodes" on threads over loopback: what only that
// backend does (ranks without --node_rank put the store's host first, the workers' port held from
// the moment it is published, a node that left dropped at once, a busy port named), and the store
// operations that never block for longer than their timeout (distributed/rendezvous/store.h).
// What a round is on either backend is test_rendezvous_backends.cpp's.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "core/check.h"
#include "core/compat.h"
#include "core/json.h"
#include "distributed/launcher_env.h"
#include "distributed/rendezvous/node_rendezvous.h"
#include "distributed/rendezvous/store.h"
#include "tests/support/rendezvous.h"

using namespace std::chrono_literals;
using xdino::distributed::NodeRendezvous;
using xdino::distributed::NodeRendezvousOptions;
using xdino::distributed::NodeRound;
using xdino::distributed::RendezvousClosed;
using xdino::distributed::RendezvousTimeout;
using xdino::testing::join_round;

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

}  // namespace

#if XDINO_TORCH_AT_LEAST(2, 4)
// LibTorch 2.x's store server names each client by reverse DNS on its one thread, and on its
// own dual-stack socket a loopback client is ::ffff:127.0.0.1, which /etc/hosts does not
// answer: 5 s a client without a DNS server (distributed/rendezvous/store.cpp, listen_ipv4). Our
// servers listen on an IPv4 socket of their own, so the port is in /proc/net/tcp, not tcp6.
TEST(Store, TheServerListensOnAnIpv4SocketOfItsOwn) {
  const auto [store, port] = xdino::distributed::serve_free_port(std::chrono::seconds(10));
  const auto listening = [port = port](const char* table) {
    std::ifstream in(table);
    char hex[8];
    std::snprintf(hex, sizeof hex, ":%04X", port);
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      fields >> slot >> local >> remote >> state;
      if (state == "0A" && local.size() >= 5 && local.substr(local.size() - 5) == hex) return true;
    }
    return false;
  };
  EXPECT_TRUE(listening("/proc/net/tcp")) << "no IPv4 listener on port " << port;
  EXPECT_FALSE(listening("/proc/net/tcp6")) << "a dual-stack listener on port " << port;
  // And it serves: a client on loopback reads what the server wrote.
  store->set("k", {'v'});
  const auto client = xdino::distributed::make_tcp_store("127.0.0.1", port, false, std::nullopt,
                                                         std::chrono::seconds(10));
  EXPECT_EQ(client->get("k"), std::vector<uint8_t>{'v'});
}
#endif

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
    return join_round(b);
  });
  EXPECT_EQ(join_round(a).group_rank, 0);
  EXPECT_EQ(b_round.get().group_rank, 1);
}

// The workers' port a node publishes is held by its launcher from the moment it is chosen:
// while the round forms (minutes, on a cluster), no other process can take it, and the round's
// group rank 0 keeps serving it for the workers (TORCHELASTIC_USE_AGENT_STORE).
TEST(NodeRendezvous, TheWorkersPortIsHeldFromTheMomentItIsPublished) {
  const int port = xdino::distributed::free_tcp_port();
  NodeRendezvous a(node(port, 0));
  auto a_round = std::async(std::launch::async, [&] { return join_round(a); });
  // Read what a published from the store, as another launcher would.
  auto client = xdino::distributed::connect_tcp_store("127.0.0.1", port, 5s, "");
  int published = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (published == 0 && std::chrono::steady_clock::now() < deadline) {
    const std::string key = "xdino.rendezvous.test/state";
    if (client->check({key})) {
      const auto state =
          xdino::Json::parse(xdino::distributed::text(client->get(key)))["participants"];
      for (const auto& [n, p] : state.items()) {
        const std::string master = p["master"];
        published = std::stoi(master.substr(master.rfind(':') + 1));
      }
    }
    if (published == 0) std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(published, 0) << "node 0 never published its workers' port";
  // Another program asks for that port now: it is taken.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(published));
  const int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int why = errno;
  close(fd);
  EXPECT_EQ(bound, -1) << "port " << published << " was free while the round formed";
  EXPECT_EQ(why, EADDRINUSE);

  NodeRendezvous b(node(port, 1));
  const NodeRound rb = join_round(b);
  const NodeRound ra = a_round.get();
  EXPECT_EQ(ra.master_port, published);
  EXPECT_EQ(rb.master_port, published);
  ASSERT_TRUE(ra.workers_store) << "group rank 0 holds the workers' store";
  EXPECT_FALSE(rb.workers_store);
  // It serves: a worker's client reaches it there.
  auto worker = xdino::distributed::connect_tcp_store("127.0.0.1", published, 5s, "");
  worker->set("k", xdino::distributed::bytes("v"));
  EXPECT_EQ(xdino::distributed::text(ra.workers_store->get("k")), "v");
}

// A launcher that exits cleanly marks itself as left: it is out of the state at once, so a
// launcher started again with its --node_rank joins without waiting out the heartbeats of the
// one before it (3 x 5 s here; the join timeout is 10 s). The margin is for LibTorch 2.x's store
// server, which names each new client by a reverse lookup of its address (getnameinfo, on its
// one thread): on a machine whose DNS does not answer, every client of that server waits the
// resolver's 5 s.
TEST(NodeRendezvous, ANodeThatLeftIsDroppedAtOnce) {
  const int port = xdino::distributed::free_tcp_port();
  const auto slow_beats = [&](int64_t rank, double join_timeout) {
    auto o = node(port, rank, 3);
    o.keep_alive_interval = 5;
    o.join_timeout = join_timeout;
    return o;
  };
  NodeRendezvous a(slow_beats(0, 20));
  auto a_round = std::async(std::launch::async, [&] { return join_round(a); });
  {
    NodeRendezvous b(slow_beats(1, 20));
    std::atomic<bool> stop{false};
    auto b_round =
        std::async(std::launch::async, [&] { return b.next_round([&] { return stop.load(); }); });
    // b is a participant of the forming round (2 of 3), then its launcher exits.
    auto client = xdino::distributed::connect_tcp_store("127.0.0.1", port, 5s, "");
    const std::string key = "xdino.rendezvous.test/state";
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (
        std::chrono::steady_clock::now() < deadline &&
        !(client->check({key}) &&
          xdino::Json::parse(xdino::distributed::text(client->get(key)))["participants"].size() ==
              2))
      std::this_thread::sleep_for(50ms);
    stop = true;
    EXPECT_FALSE(b_round.get());
  }
  NodeRendezvous b_again(slow_beats(1, 10));
  NodeRendezvous c(slow_beats(2, 20));
  auto c_round = std::async(std::launch::async, [&] { return join_round(c); });
  const NodeRound rb = join_round(b_again);
  EXPECT_EQ(rb.group_rank, 1);
  EXPECT_EQ(c_round.get().group_rank, 2);
  EXPECT_EQ(a_round.get().group_rank, 0);
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
