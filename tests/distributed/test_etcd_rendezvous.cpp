// The etcd backend of the launchers' rendezvous: the client of etcd's v3 JSON gateway
// (distributed/rendezvous/etcd.h) against real members on loopback (tests/support/etcd_cluster.h),
// and NodeRendezvous over it (distributed/rendezvous/node_rendezvous.h, round_store.h) where
// etcd differs from the c10d store: a node that dies (its process killed) dropped when its lease
// expires and replaced, a member lost without the run noticing, quorum lost as one error in time,
// and the mistakes a user can make as one line each. The rounds themselves are
// test_rendezvous_backends.cpp's cases, typed over both backends, and the rules
// test_rendezvous_rules.cpp's tables.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "core/check.h"
#include "distributed/rendezvous/etcd.h"
#include "distributed/rendezvous/node_rendezvous.h"
#include "tests/support/etcd_cluster.h"
#include "tests/support/rendezvous.h"
#include "tests/support/require.h"

using namespace std::chrono_literals;
using xdino::distributed::base64_decode;
using xdino::distributed::base64_encode;
using xdino::distributed::EtcdClient;
using xdino::distributed::EtcdUnavailable;
using xdino::distributed::NodeRendezvous;
using xdino::distributed::NodeRendezvousOptions;
using xdino::distributed::NodeRound;
using xdino::testing::EtcdCluster;
using xdino::testing::join_round;
using Clock = std::chrono::steady_clock;

namespace {

#define XDINO_REQUIRE_ETCD()                 \
  if (xdino::testing::etcd_binary().empty()) \
  XDINO_SKIP_MISSING() << "needs etcd-server (scripts/setup.sh --tests installs it)"

// Node `rank` of an `nnodes` job whose round lives in `cluster` (fast heartbeats: a silent
// node's lease, 2 s at least, expires about 2 s after its last renewal).
NodeRendezvousOptions etcd_node(const EtcdCluster& cluster, int64_t rank, int64_t nnodes = 2,
                                const std::string& run_id = "job") {
  NodeRendezvousOptions o;
  o.backend = xdino::distributed::RendezvousBackend::kEtcd;
  o.etcd = cluster.options();
  o.nnodes = nnodes;
  o.node_rank = rank;
  o.run_id = run_id;
  o.local_addr = "127.0.0.1";
  o.join_timeout = 30;
  o.read_timeout = 10;  // a request met by a leader election waits up to 7 s inside etcd
  o.keep_alive_interval = 0.5;
  o.keep_alive_max_attempt = 3;
  o.poll_interval = 0.1;
  return o;
}

// An HTTP server on a loopback port of its own that is not etcd: each request's path goes to
// `answer`, which gives the status and body sent back (one request per connection). It serves
// until destroyed, counts what it served, and polls in 50 ms steps, so it never outlives its
// test. Only 127.0.0.1.
class NotEtcdServer {
 public:
  using Answer = std::function<std::pair<int, std::string>(const std::string& path)>;
  explicit NotEtcdServer(Answer answer) : answer_(std::move(answer)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(fd_, 16) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("NotEtcdServer: no loopback socket");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~NotEtcdServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  int served() const { return served_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string request;
      char buf[4096];
      // Headers, then the body its Content-Length announces (curl sends both at once here).
      for (int waits = 0; waits < 40; ++waits) {
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 50) <= 0) {
          if (request.find("\r\n\r\n") != std::string::npos) break;
          continue;
        }
        const ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
        const size_t head = request.find("\r\n\r\n");
        const size_t cl = request.find("Content-Length: ");
        if (head != std::string::npos && cl != std::string::npos &&
            request.size() >= head + 4 + std::stoul(request.substr(cl + 16)))
          break;
      }
      const size_t sp = request.find(' ');
      const std::string path = request.substr(sp + 1, request.find(' ', sp + 1) - sp - 1);
      const auto [status, body] = answer_(path);
      const std::string reply = "HTTP/1.1 " + std::to_string(status) +
                                " X\r\nContent-Length: " + std::to_string(body.size()) +
                                "\r\nConnection: close\r\n\r\n" + body;
      ++served_;  // before the answer: the caller may count as soon as it has it
      (void)!send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      close(c);
    }
  }
  Answer answer_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

}  // namespace

TEST(Base64, IsRfc4648sVectorsBothWaysAndRefusesWhatIsNot) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    EXPECT_EQ(base64_encode(plain), coded);
    EXPECT_EQ(base64_decode(coded), plain);
  }
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes);
  for (const char* bad : {"Zg=", "Z===", "Zm9v!A==", "Zg==Zm8=", "=Zm8"})
    EXPECT_THROW(base64_decode(bad), xdino::Error) << bad;
}

// The blob's compare-and-swap: by revision, 0 meaning "absent"; a loser learns nothing
// changed; values are bytes (a NUL survives).
TEST(EtcdClient, CompareAndSwapByRevision) {
  XDINO_REQUIRE_ETCD();
  EtcdCluster cluster(1);
  EtcdClient client(cluster.options());
  EXPECT_FALSE(client.get("/t/state", 5s).has_value());
  EXPECT_TRUE(client.put_if("/t/state", 0, std::string("a\0b", 3), 0, 5s));
  EXPECT_FALSE(client.put_if("/t/state", 0, "again", 0, 5s)) << "created twice";
  const auto first = client.get("/t/state", 5s);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->value, std::string("a\0b", 3));
  EXPECT_GT(first->mod_revision, 0);
  EXPECT_TRUE(client.put_if("/t/state", first->mod_revision, "second", 0, 5s));
  EXPECT_FALSE(client.put_if("/t/state", first->mod_revision, "stale", 0, 5s));
  const auto second = client.get("/t/state", 5s);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->value, "second");
  EXPECT_GT(second->mod_revision, first->mod_revision);
}

// A key on a lease lives while the lease is renewed and goes when it is revoked or expires; a
// renewal of a lease that is gone answers 0 (etcd's 200 without a TTL), and an ID above 2^53
// makes the round trip exactly (a double would round it, and etcd would not know the lease).
TEST(EtcdClient, LeasesKeepKeysAliveAndTakeThemAlong) {
  XDINO_REQUIRE_ETCD();
  EtcdCluster cluster(1);
  EtcdClient client(cluster.options());
  // A TTL of 5 s renewed every second for 6 s: a loaded machine's late renewal (a 2 s lease
  // renewed every 0.75 s lapsed under load) still comes well within the lease.
  const int64_t lease = client.grant(5, 5s);
  client.put("/t/hb", "1", lease, 5s);
  for (int i = 0; i < 6; ++i) {
    EXPECT_GT(client.keep_alive(lease, 5s), 0);
    std::this_thread::sleep_for(1s);
  }
  EXPECT_TRUE(client.get("/t/hb", 5s).has_value());
  EXPECT_EQ(client.get("/t/hb", 5s)->lease, lease);
  client.revoke(lease, 5s);
  EXPECT_FALSE(client.get("/t/hb", 5s).has_value());
  EXPECT_EQ(client.keep_alive(lease, 5s), 0);
  client.revoke(lease, 5s);  // gone already: nothing to do
  const int64_t short_lived = client.grant(2, 5s);
  client.put("/t/gone", "1", short_lived, 5s);
  const auto deadline = Clock::now() + 8s;
  while (client.get("/t/gone", 5s).has_value() && Clock::now() < deadline)
    std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(client.get("/t/gone", 5s).has_value()) << "an unrenewed lease never expired";
  EXPECT_THROW(client.put("/t/x", "1", short_lived, 5s), xdino::Error);  // lease not found
}

// A gateway talks only to its own member: the client moves on when one is down, and says
// within its timeout when no quorum answers; the cluster restarted, it writes again.
TEST(EtcdClient, MovesToAnotherMemberAndReportsALostQuorumInTime) {
  XDINO_REQUIRE_ETCD();
  EtcdCluster cluster(3);
  auto options = cluster.options();
  options.endpoints.insert(options.endpoints.begin(),
                           "127.0.0.1:" + std::to_string(xdino::distributed::free_tcp_port()));
  EtcdClient client(options);
  client.put("/t/k", "0", 0, 5s);  // past the dead endpoint
  cluster.kill(0);
  client.put("/t/k", "1", 0, 10s);
  EXPECT_EQ(client.get("/t/k", 10s)->value, "1");
  const int64_t before = client.get("/t/k", 10s)->mod_revision;
  cluster.kill(1);  // 1 of 3 left: no quorum
  // Against the call's budget: it ends once its 3 s are spent (each request is cut at what is
  // left); the 5 s beyond are for a loaded machine's scheduling, not for the client.
  const auto budget = 3s;
  const auto t0 = Clock::now();
  try {
    client.put_if("/t/k", before, "2", 0, budget);
    FAIL() << "a write without a quorum succeeded";
  } catch (const EtcdUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("etcd at 127.0.0.1:"), std::string::npos) << e.what();
  }
  EXPECT_GE(Clock::now() - t0, budget - 500ms) << "gave up before its budget";
  EXPECT_LT(Clock::now() - t0, budget + 5s);
  cluster.start(0);
  cluster.start(1);
  cluster.wait_until_it_writes(20s);
  // The write that timed out may have been applied once the quorum came back (its proposal
  // waited in the member's log): its outcome is unknown, which is why every write of the state
  // is guarded on the revision it read. Guarded, it applies at most once.
  const std::string now = client.get("/t/k", 10s)->value;
  EXPECT_TRUE(now == "1" || now == "2") << now;
  EXPECT_EQ(client.put_if("/t/k", before, "3", 0, 10s), now == "1")
      << "a guarded write must apply exactly when the revision read is still the key's";
}

// A member that holds its port and never answers (SIGSTOP: a hung host) costs a call a third of
// its time, not all of it: the next member answers.
TEST(EtcdClient, AHungMemberIsPassedOver) {
  XDINO_REQUIRE_ETCD();
  EtcdCluster cluster(3);
  EtcdClient client(cluster.options());
  client.put("/t/h", "0", 0, 5s);  // member 0 answered: it is asked first next time
  cluster.pause(0);
  // That the call succeeds within its budget is the test: waiting on the stopped member for
  // all of it would have thrown EtcdUnavailable.
  client.put("/t/h", "1", 0, 9s);
  EXPECT_EQ(client.get("/t/h", 9s)->value, "1");
  cluster.resume(0);
}

// What no etcd answers is not retried as if etcd were busy: a web page with 200, a body that
// is not a JSON object, a number that is not one, a lease grant without an ID. Each is one
// usage error at the first call saying the endpoint is not etcd (before: an empty answer, a
// bare "stoll", "answered no ID: {}").
TEST(EtcdClient, AnEndpointThatIsNotEtcdIsSaidAtOnce) {
  const std::vector<std::pair<std::string, std::string>> answers = {
      {"<html><body>It works!</body></html>", "a body that is not etcd's JSON: <html>"},
      {"[1, 2]", "a body that is not etcd's JSON: [1, 2]"},
      {R"({"ID": "abc", "TTL": "5"})", "its field 'ID' is \"abc\", not a 64-bit integer"},
      {R"({"ID": "99999999999999999999"})", "not a 64-bit integer"},
      {"{}", "a lease grant without an ID"},
  };
  for (const auto& [body, says] : answers) {
    SCOPED_TRACE(body);
    NotEtcdServer server([&](const std::string&) { return std::make_pair(200, body); });
    xdino::distributed::EtcdOptions o;
    o.endpoints = {server.endpoint()};
    EtcdClient client(o);
    try {
      client.grant(5, 5s);
      ADD_FAILURE() << "granted a lease";
    } catch (const xdino::UsageError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("is not etcd"), std::string::npos) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_EQ(server.served(), 1) << "asked again what cannot change";
  }
}

// A member that grants leases and then answers web pages: the launcher's rendezvous stops at
// its first read in one line (it spun 12 407 requests in 20 s before "did not form").
TEST(EtcdRendezvous, AMemberThatGrantsThenAnswersHtmlEndsTheRendezvousAtOnce) {
  NotEtcdServer server([](const std::string& path) {
    if (path == "/v3/lease/grant") return std::make_pair(200, std::string(R"({"ID": "7"})"));
    if (path == "/v3/kv/put") return std::make_pair(200, std::string("{}"));
    return std::make_pair(200, std::string("<html>maintenance</html>"));
  });
  NodeRendezvousOptions o;
  o.backend = xdino::distributed::RendezvousBackend::kEtcd;
  o.etcd.endpoints = {server.endpoint()};
  o.nnodes = 1;
  o.node_rank = 0;
  o.run_id = "job";
  o.local_addr = "127.0.0.1";
  o.join_timeout = 20;
  try {
    NodeRendezvous r(o);
    join_round(r);
    ADD_FAILURE() << "a round formed";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("is not etcd"), std::string::npos) << e.what();
  }
  EXPECT_LT(server.served(), 10);
}

// A cluster with authentication on (--rdzv_conf user=...,password=...): the client gets a
// token before its first call; a wrong password is one usage error, and no user at all is
// refused by etcd.
TEST(EtcdClient, AuthenticatesWhereTheClusterAsks) {
  XDINO_REQUIRE_ETCD();
  EtcdCluster cluster(1);
  {
    EtcdClient admin(cluster.options());
    admin.call("/v3/auth/role/add", {{"name", "root"}}, 5s);
    admin.call("/v3/auth/user/add", {{"name", "root"}, {"password", "s3cret"}}, 5s);
    admin.call("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}}, 5s);
    admin.call("/v3/auth/enable", xdino::Json::object(), 5s);
  }
  auto options = cluster.options();
  options.user = "root";
  options.password = "s3cret";
  EtcdClient client(options);
  EXPECT_TRUE(client.put_if("/t/auth", 0, "in", 0, 5s));
  EXPECT_EQ(client.get("/t/auth", 5s)->value, "in");
  options.password = "wrong";
  EXPECT_THROW(EtcdClient(options).get("/t/auth", 5s), xdino::UsageError);
  EXPECT_THROW(EtcdClient(cluster.options()).get("/t/auth", 5s), xdino::Error);
}

// Node 0's launcher dies (its process killed: no leave, no revoke). Its lease expires, the
// running node drops it, and a new node 0 forms the next round with the survivor: nothing
// the dead launcher held was needed.
TEST(EtcdRendezvous, ADeadNodeZeroIsDroppedWhenItsLeaseExpiresAndReplaced) {
  XDINO_REQUIRE_ETCD();
  EtcdCluster cluster(3);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  // Node 0 in a process of its own, made before this process has threads.
  const pid_t zero = fork();
  if (zero == 0) {
    close(ready[0]);
    try {
      NodeRendezvous a(etcd_node(cluster, 0));
      join_round(a);
      const char one = 1;
      if (write(ready[1], &one, 1) != 1) _exit(3);
      for (;;) pause();
    } catch (...) {
      _exit(2);
    }
  }
  close(ready[1]);
  NodeRendezvous b(etcd_node(cluster, 1));
  EXPECT_EQ(join_round(b).round, 0);
  char one = 0;
  ASSERT_EQ(read(ready[0], &one, 1), 1) << "node 0 did not join";
  close(ready[0]);
  cluster.kill(0);  // its host's member goes too
  kill(zero, SIGKILL);
  waitpid(zero, nullptr, 0);
  NodeRendezvous again(etcd_node(cluster, 0));
  auto late = std::async(std::launch::async, [&] { return join_round(again); });
  const auto deadline = Clock::now() + 15s;
  while (b.status().waiting == 0 && Clock::now() < deadline) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(b.status().waiting, 1) << "the running node never saw the new node 0 waiting";
  const NodeRound rb = join_round(b);  // its launcher leaves the old round and rejoins
  const NodeRound r0 = late.get();
  EXPECT_EQ(rb.round, 1);
  EXPECT_EQ(r0.round, 1);
  EXPECT_EQ(r0.group_rank, 0);
  EXPECT_EQ(rb.group_rank, 1);
}

// A finished run's id is not reused by mistake, and an endpoint list nobody serves is said at
// once: each one line, a usage error (exit 2).
TEST(EtcdRendezvous, AnEndedRunIdAndNoClusterAreUsageErrors) {
  XDINO_REQUIRE_ETCD();
  EtcdCluster cluster(1);
  {
    NodeRendezvous solo(etcd_node(cluster, 0, 1, "done"));
    join_round(solo);
    solo.finish();
  }
  try {
    NodeRendezvous again(etcd_node(cluster, 0, 1, "done"));
    FAIL() << "a finished run id was joined";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("finished"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("give a new --rdzv_id"), std::string::npos) << e.what();
  }
  auto nowhere = etcd_node(cluster, 0, 1, "other");
  nowhere.etcd.endpoints = {"127.0.0.1:" + std::to_string(xdino::distributed::free_tcp_port())};
  nowhere.join_timeout = 2;  // how long a launcher tries to reach the cluster: min(this, 15 s)
  const auto budget = 2s;
  const auto t0 = Clock::now();
  try {
    NodeRendezvous lost(nowhere);
    FAIL() << "no cluster, and no error";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach etcd"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - t0, budget + 5s) << "against its budget, not --rdzv_timeout";
  auto bad = etcd_node(cluster, 0, 1, "x");
  bad.etcd.endpoints = {"127.0.0.1:99999"};
  EXPECT_THROW(NodeRendezvous{bad}, xdino::UsageError);
}
