#include "distributed/rendezvous/node_rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <tuple>

#include "core/json.h"
#include "core/log.h"
#include "distributed/launcher_env.h"
#include "distributed/rendezvous/rendezvous_rules.h"

namespace xdino::distributed {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

milliseconds ms(double seconds) {
  return milliseconds(static_cast<int64_t>(std::ceil(std::max(0.0, seconds) * 1000)));
}

// "node02/4242/0" -> "node02 (launcher pid 4242)".
std::string describe(const std::string& node) {
  const size_t a = node.find('/'), b = node.find('/', a + 1);
  if (a == std::string::npos || b == std::string::npos) return node;
  return node.substr(0, a) + " (launcher pid " + node.substr(a + 1, b - a - 1) + ")";
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Whether `host` names an address of this machine: one of its addresses can be bound.
bool is_local_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool local = false;
  for (addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_STREAM, 0);
    if (fd < 0) continue;
    local = bind(fd, a->ai_addr, a->ai_addrlen) == 0;  // port 0: any
    close(fd);
  }
  freeaddrinfo(found);
  return local;
}

std::atomic<int64_t> g_nodes_made{0};

}  // namespace

struct NodeRendezvous::Read {
  RoundState state;
  std::string token;       // what the next compare-and-set presents (RoundStore::read)
  bool sanitized = false;  // dead nodes were removed from `state`: it needs writing
};

RendezvousBackend parse_rendezvous_backend(const std::string& name) {
  if (name == "c10d" || name == "static") return RendezvousBackend::kC10d;
  if (name == "etcd" || name == "etcd-v2") return RendezvousBackend::kEtcd;
  XDINO_FAIL_ARG("--rdzv_backend ", name,
                 " is not supported: give c10d (or static: a store that node 0's launcher "
                 "serves) or etcd (an etcd cluster at --rdzv_endpoint)");
}

NodeRendezvous::NodeRendezvous(NodeRendezvousOptions o) : options_(std::move(o)) {
  const auto& o_ = options_;
  XDINO_CHECK_ARG(o_.nnodes >= 1, "--nnodes must be at least 1, got ", o_.nnodes);
  XDINO_CHECK_ARG(o_.node_rank >= -1 && o_.node_rank < o_.nnodes,
                  "--node_rank must be in [0, --nnodes), got ", o_.node_rank, " of ", o_.nnodes);
  const auto seconds = [](const char* name, double v) {
    XDINO_CHECK_ARG(std::isfinite(v) && v > 0 && v <= kMaxSeconds, name,
                    " must be a number of seconds in (0, ", kMaxSeconds, "], got ", v);
  };
  seconds("--rdzv_timeout (join_timeout)", o_.join_timeout);
  seconds("keep_alive_interval", o_.keep_alive_interval);
  seconds("read_timeout", o_.read_timeout);
  seconds("heartbeat_timeout", o_.heartbeat_timeout);
  seconds("last_call_timeout", o_.last_call_timeout);
  seconds("close_timeout", o_.close_timeout);
  seconds("exit_barrier_timeout", o_.exit_barrier_timeout);
  seconds("the poll interval", o_.poll_interval);
  XDINO_CHECK_ARG(o_.keep_alive_max_attempt >= 1 && o_.keep_alive_max_attempt <= 1000000,
                  "keep_alive_max_attempt must be in [1, 1000000], got ",
                  o_.keep_alive_max_attempt);
  XDINO_CHECK_ARG(!o_.run_id.empty() && o_.run_id.find('/') == std::string::npos,
                  "--rdzv_id must be a non-empty name without '/', got '", o_.run_id, "'");
  addr_ = o_.local_addr.empty() ? host_name() : o_.local_addr;
  node_ = addr_ + "/" + std::to_string(getpid()) + "/" + std::to_string(g_nodes_made++);
  const milliseconds op_timeout = ms(std::min(o_.read_timeout, o_.join_timeout));
  if (o_.backend == RendezvousBackend::kEtcd)
    connect_etcd(op_timeout);
  else
    serve_or_connect(op_timeout);
  beat_thread_ = std::thread([this] { beat_loop(); });
  watch_thread_ = std::thread([this] { watch_loop(); });
}

// The c10d backend: node 0's launcher (or the endpoint's machine's) serves the store, the
// others connect to it.
void NodeRendezvous::serve_or_connect(milliseconds op_timeout) {
  const auto& o_ = options_;
  const bool explicit_host = o_.is_host.has_value() || o_.node_rank >= 0;
  is_host_ = o_.is_host.value_or(o_.node_rank >= 0 ? o_.node_rank == 0
                                                   : is_local_address(o_.endpoint_host));
  // --node_rank 0 serves the store; the others look for it at the endpoint. Elsewhere than
  // there, they would wait out their join timeout for a store nobody serves.
  XDINO_CHECK_ARG(o_.is_host.has_value() || o_.node_rank != 0 || o_.endpoint_port == 0 ||
                      is_local_address(o_.endpoint_host),
                  "--node_rank 0 serves the rendezvous store, but ", quote(o_.endpoint_host),
                  " (--rdzv_endpoint or --master_addr) is not an address of this host: the other "
                  "nodes would look for the store there. Run node 0 on that host, or name this "
                  "host's address (--rdzv_conf is_host=true if it is this host behind a NAT)");
  int port = o_.endpoint_port;
  if (port == 0) {
    XDINO_CHECK_ARG(o_.nnodes == 1, "--nnodes ", o_.nnodes,
                    " needs a rendezvous port every node names (--master_port or "
                    "--rdzv_endpoint host:port)");
    is_host_ = true;
    port = free_tcp_port();
  }
  XDINO_CHECK_ARG(port > 0 && port < 65536, "rendezvous port ", port, " is not a TCP port");
  endpoint_ = o_.endpoint_host + ":" + std::to_string(port);

  if (is_host_) {
    try {
      server_ = make_tcp_store("127.0.0.1", port, true, std::nullopt, op_timeout);
    } catch (const std::exception& e) {
      const std::string cause = first_line(e.what());
      const bool in_use = cause.find("already in use") != std::string::npos ||
                          cause.find("EADDRINUSE") != std::string::npos;
      // Chosen by address alone, another launcher on this machine may serve it: join that one.
      if (!(in_use && !explicit_host)) {
        if (in_use)
          XDINO_FAIL_ARG("the rendezvous port ", port,
                         " is already in use on this host (Address already in use): another run "
                         "holds it; pick another port (--master_port or --rdzv_endpoint)");
        XDINO_FAIL_ARG("cannot serve the rendezvous store on port ", port, ": ", cause);
      }
      is_host_ = false;
    }
  }
  const std::string host = is_host_ ? "127.0.0.1" : o_.endpoint_host;
  const auto connect = [host, port](milliseconds timeout) {
    return connect_tcp_store(host, port, timeout, "");  // next_round() says it once
  };
  // Waits for the store's host (it may start later), then keeps to op_timeout per operation.
  TimedStore(connect, ms(o_.join_timeout)).check(key("state"));
  store_ = std::make_unique<TcpRoundStore>(connect, endpoint_, key(""), node_, times(op_timeout));
  if (is_host_) {
    RoundState initial;
    initial.host = node_;
    store_->compare_set(RoundStore::Use::kMain, "", initial.dump());
  }
}

// The etcd backend: every launcher is a client of the cluster; none serves the round.
void NodeRendezvous::connect_etcd(milliseconds op_timeout) {
  const auto& o_ = options_;
#ifndef XDINO_WITH_ETCD
  XDINO_FAIL_ARG(
      "this build of dino has no etcd rendezvous: libcurl's headers were missing "
      "when it was built (install libcurl4-openssl-dev and build again)");
#endif
  // An endpoint list that no member answers is a mistake to report at once, not to wait out:
  // the cluster outlives every job, so it is there before any launcher starts. 15 s, not less:
  // a request that reaches etcd while it elects a leader waits up to 7 s there
  // (docs/distributed.md, "The rendezvous in etcd").
#ifdef XDINO_WITH_ETCD
  try {
    store_ =
        std::make_unique<EtcdRoundStore>(o_.etcd, "/xdino/rendezvous/" + o_.run_id + "/", node_,
                                         times(op_timeout), ms(std::min(o_.join_timeout, 15.0)));
  } catch (const EtcdUnavailable& e) {
    XDINO_FAIL_ARG("the rendezvous cannot reach etcd: ", e.what(),
                   "; check --rdzv_endpoint (host:port of the cluster's client URLs)");
  }
#endif
  endpoint_ = store_->where();
  // A rendezvous closed in etcd stays closed: starting it again would mix two jobs' rounds.
  const RoundState state = RoundState::parse(store_->read(RoundStore::Use::kMain).blob);
  XDINO_CHECK_ARG(!state.closed, "--rdzv_id ", quote(o_.run_id), " names a rendezvous that ",
                  state.finished ? "finished" : "was closed (" + state.reason + ")", " in ",
                  endpoint_, "; give a new --rdzv_id to start a job");
}

RoundStoreTimes NodeRendezvous::times(milliseconds op_timeout) const {
  RoundStoreTimes t;
  t.main = op_timeout;
  // The threads' and the way out's: a launcher whose link is down must still exit promptly.
  t.brief = std::min(op_timeout, milliseconds(5000));
  t.beat = std::min(op_timeout, ms(options_.heartbeat_timeout));
  t.keep_alive_interval = ms(options_.keep_alive_interval);
  t.keep_alive_max_attempt = options_.keep_alive_max_attempt;
  return t;
}

NodeRendezvous::~NodeRendezvous() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (beat_thread_.joinable()) beat_thread_.join();
  if (watch_thread_.joinable()) watch_thread_.join();
  try {
    store_->leave();
  } catch (const std::exception&) {
    // The store is gone or unreachable: nobody waits for this node there.
  }
  if (!is_host_) return;
  // The store lives in this process: hold it until the others have read what they need.
  const auto deadline = Clock::now() + ms(options_.exit_barrier_timeout);
  std::vector<std::string> others;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& n : last_nodes_)
      if (n != node_) others.push_back(n);
  }
  while (!others.empty() && Clock::now() < deadline) {
    try {
      std::vector<std::string> still;
      for (const auto& n : others)
        if (!store_->left(RoundStore::Use::kMain, n) && !store_->dead(RoundStore::Use::kMain, n))
          still.push_back(n);
      others = std::move(still);
    } catch (const std::exception&) {
      break;
    }
    if (!others.empty()) std::this_thread::sleep_for(milliseconds(100));
  }
}

std::string NodeRendezvous::name() const { return describe(node_); }

std::string NodeRendezvous::key(const std::string& what) const {
  return "xdino.rendezvous." + options_.run_id + "/" + what;
}

bool NodeRendezvous::sleep_for(milliseconds d) {
  std::unique_lock<std::mutex> lock(mutex_);
  return !stop_cv_.wait_for(lock, d, [this] { return stopping_; });
}

NodeRendezvous::Read NodeRendezvous::read(RoundStore::Use use, bool sanitize_now) {
  Read r;
  RoundStore::State got = store_->read(use);
  r.token = std::move(got.token);
  r.state = RoundState::parse(got.blob);
  if (sanitize_now) r.sanitized = sanitize(use, r.state);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!got.blob.empty()) last_nodes_ = r.state.nodes();
  return r;
}

bool NodeRendezvous::write(RoundStore::Use use, const std::string& token, const RoundState& state) {
  return store_->compare_set(use, token, state.dump());
}

// Removes the nodes that left or whose heartbeats stopped; true when it changed `state`.
// Counters are read at most twice per keep-alive interval, so a large job does not flood the
// store.
bool NodeRendezvous::sanitize(RoundStore::Use use, RoundState& state) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = Clock::now();
    if (now - last_sanitize_ < ms(options_.keep_alive_interval / 2)) return false;
    last_sanitize_ = now;
  }
  std::vector<std::string> gone;
  for (const auto& node : state.nodes()) {
    if (node == node_) continue;
    if (store_->left(use, node)) {
      log::info("rendezvous: ", describe(node), " has left; it is no longer counted in round ",
                state.round);
    } else if (store_->dead(use, node)) {
      log::warn("rendezvous: ", describe(node), " has sent no heartbeat for ",
                options_.keep_alive_interval * options_.keep_alive_max_attempt,
                " s; it is no longer counted in round ", state.round);
    } else {
      continue;
    }
    gone.push_back(node);
  }
  return drop_nodes(state, gone);
}

std::optional<NodeRound> NodeRendezvous::next_round(const std::function<bool()>& stop) {
  const auto deadline = Clock::now() + ms(options_.join_timeout);
  const int64_t n = options_.nnodes;
  // Where this round's workers would meet, should this node be group rank 0: a store this
  // launcher serves on a free port, held from now on (a new one each round), at the endpoint's
  // name for the store's host (every node reaches it by that name), else at this machine's.
  int port = 0;
  std::tie(workers_store_, port) = serve_free_port(ms(options_.read_timeout));
  master_ = (is_host_ ? options_.endpoint_host : addr_) + ":" + std::to_string(port);
  bool left = false;  // this node has left the round it was in
  bool told_holder = false;
  std::string last_error;
  RoundState last;
  const auto pause = [&](milliseconds d) {
    for (auto until = Clock::now() + d; Clock::now() < until;) {
      if (stop()) return false;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return !stop();
  };
  // The deadline is checked after a read: a node whose setup (the workers' store above, a slow
  // connection) outlasts the timeout still learns, and reports, where the round stands.
  bool read_once = false;
  for (;;) {
    if (stop()) return std::nullopt;
    if (read_once && Clock::now() >= deadline) {
      const bool forming = last.participants.count(node_) > 0 && !last.complete;
      std::string why = "the rendezvous at " + endpoint_ + " did not form within --rdzv_timeout " +
                        detail::concat(options_.join_timeout) + " s";
      if (!last_error.empty())
        why += " (its store cannot be reached: " + last_error + ")";
      else
        why += ": " + std::to_string(last.participants.size()) + " of " + std::to_string(n) +
               " nodes joined round " + std::to_string(last.round);
      if (forming) close(describe(node_) + " gave up: " + why);
      throw RendezvousTimeout(why);
    }
    Read r;
    read_once = true;
    try {
      r = read(RoundStore::Use::kMain, true);
      last_error.clear();
    } catch (const RendezvousClosed&) {
      throw;
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& e) {
      if (last_error.empty())
        log::warn("rendezvous: the store at ", endpoint_, " does not answer (", e.what(),
                  "); retrying until --rdzv_timeout");
      last_error = e.what();
      if (!pause(milliseconds(1000))) return std::nullopt;
      continue;
    }
    RoundState& s = r.state;
    last = s;
    const Decision d = decide(s, {node_, options_.node_rank, n, master_, left});
    left = d.left;
    switch (d.act) {
      case Decision::Act::kClosed:
        throw RendezvousClosed(s.finished ? "the run has finished (closed by " + s.closed_by + ")"
                                          : s.reason);
      case Decision::Act::kJoined: {
        const JoinedRound joined = round_of(s, node_);
        NodeRound round;
        round.round = joined.round;
        round.group_rank = joined.group_rank;
        round.nnodes = n;
        const size_t colon = joined.master.rfind(':');
        round.master_addr = joined.master.substr(0, colon);
        round.master_port = std::stoi(joined.master.substr(colon + 1));
        // Group rank 0's own store is the round's; any other node's port is free again.
        if (joined.group_rank == 0) round.workers_store = workers_store_;
        workers_store_.reset();
        return round;
      }
      case Decision::Act::kWrite:
      case Decision::Act::kWait:
        break;
    }
    // A write of the decision, or of the nodes dropped on reading when there is none.
    if (d.act == Decision::Act::kWrite || r.sanitized) {
      try {
        if (write(RoundStore::Use::kMain, r.token, d.act == Decision::Act::kWrite ? d.next : s) &&
            d.leaving)
          left = true;
      } catch (const UsageError&) {
        throw;  // the store is not one (an endpoint that is not etcd): retrying cannot help
      } catch (const std::exception& e) {
        if (last_error.empty())
          log::warn("rendezvous: a write to the store at ", endpoint_, " failed (", e.what(),
                    "); retrying until --rdzv_timeout");
        last_error = e.what();
        if (!pause(milliseconds(250))) return std::nullopt;
      }
      continue;  // decide again on what the store holds now
    }
    if (!d.holder.empty() && !told_holder) {
      log::warn("rendezvous: node_rank ", options_.node_rank, " is held by ", describe(d.holder),
                " (a launcher before this one?); waiting for it to leave or for its "
                "heartbeats to stop");
      told_holder = true;
    }
    if (!pause(milliseconds(250))) return std::nullopt;
  }
}

void NodeRendezvous::set_closed(const std::string& reason, bool finished) {
  const auto deadline = Clock::now() + ms(options_.close_timeout);
  while (Clock::now() < deadline) {
    try {
      Read r = read(RoundStore::Use::kQuick, false);
      if (r.state.closed) return;
      r.state.closed = true;
      r.state.finished = finished;
      r.state.closed_by = describe(node_);
      r.state.reason = reason;
      if (write(RoundStore::Use::kQuick, r.token, r.state)) return;
    } catch (const std::exception& e) {
      log::warn("rendezvous: could not close it at ", endpoint_, ": ", e.what());
      return;
    }
  }
}

void NodeRendezvous::close(const std::string& reason) { set_closed(reason, false); }
void NodeRendezvous::finish() { set_closed("", true); }

RendezvousStatus NodeRendezvous::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

void NodeRendezvous::beat_loop() {
  const milliseconds every = ms(options_.keep_alive_interval);
  bool told = false;
  do {
    try {
      store_->beat();
      told = false;
    } catch (const std::exception& e) {
      if (!told) log::warn("rendezvous: heartbeat to ", endpoint_, " failed: ", e.what());
      told = true;
    }
  } while (sleep_for(every));
}

void NodeRendezvous::watch_loop() {
  const milliseconds every = ms(options_.poll_interval);
  auto answered = Clock::now();
  while (sleep_for(every)) {
    try {
      Read r = read(RoundStore::Use::kWatch, true);
      if (r.sanitized)
        write(RoundStore::Use::kWatch, r.token, r.state);  // lost: the winner's read is fresher
      answered = Clock::now();
      const RoundState& s = r.state;
      RendezvousStatus st;
      st.round = s.round;
      st.in_round = s.complete && s.participants.count(node_) > 0;
      st.waiting = static_cast<int64_t>(s.waiting.size());
      if (!s.waiting.empty()) st.waiting_node = describe(s.waiting.front());
      st.closed = s.closed;
      st.finished = s.finished;
      st.closed_by = s.closed_by;
      st.reason = s.reason;
      std::lock_guard<std::mutex> lock(mutex_);
      st.reads = status_.reads + 1;
      status_ = st;
    } catch (const std::exception& e) {
      // Unreachable for now: the launcher learns it when its workers fail and it rejoins, or
      // from unreachable_for when the store stays away longer than it allows.
      std::lock_guard<std::mutex> lock(mutex_);
      status_.unreachable_for = std::chrono::duration<double>(Clock::now() - answered).count();
      status_.unreachable = e.what();
    }
  }
}

}  // namespace xdino::distributed
