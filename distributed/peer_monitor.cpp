#include "distributed/peer_monitor.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <future>
#include <map>
#include <set>
#include <sstream>

namespace xdino::distributed {
namespace {

constexpr auto kHeartbeat = std::chrono::milliseconds(500);
constexpr int kPeerCheckBeats = 10;  // peers' counters are read every 10 beats (5 s) at most
constexpr auto kWatch = std::chrono::seconds(1);
constexpr auto kProbeDeadline = kHeartbeat * 5 + std::chrono::seconds(5);

// IPv4 address of a network interface, "" when it has none.
std::string interface_address(const char* ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string address;
  for (ifaddrs* a = list; a != nullptr && address.empty(); a = a->ifa_next)
    if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET &&
        a->ifa_name == std::string(ifname)) {
      char text[INET_ADDRSTRLEN] = {};
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) address = text;
    }
  freeifaddrs(list);
  return address;
}

// What a user calls this host: SLURM's node name or the hostname, plus the address of the
// interface the collectives use when one was chosen (simulated hosts share a hostname).
std::string host_label() {
  std::string name;
  if (const char* node = std::getenv("SLURMD_NODENAME")) {
    name = node;
  } else {
    char buf[256] = {};
    name = gethostname(buf, sizeof buf - 1) == 0 ? buf : "?";
  }
  for (const char* var : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"})
    if (const char* ifname = std::getenv(var)) {
      const std::string address = interface_address(ifname);
      if (!address.empty()) return name + " " + address;
    }
  return name;
}

std::string join_ranks(const std::vector<int>& ranks) {
  std::ostringstream s;
  for (size_t i = 0; i < ranks.size(); ++i) s << (i ? ", " : "") << ranks[i];
  return s.str();
}

int64_t whole_seconds(std::chrono::milliseconds d) { return (d.count() + 999) / 1000; }

// "rank 2, 3 on host b 10.0.0.2" (grouped by host, in rank order).
std::string ranks_on_hosts(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  std::map<std::string, std::vector<int>> by_host;
  std::vector<std::string> order;
  for (int r : ranks) {
    auto& list = by_host[hosts[r]];
    if (list.empty()) order.push_back(hosts[r]);
    list.push_back(r);
  }
  std::string out;
  for (const auto& host : order)
    out += (out.empty() ? "" : "; ") + std::string("rank ") + join_ranks(by_host[host]) +
           " on host " + host;
  return out;
}

// Reads every rank's heartbeat twice, kHeartbeat * 5 apart, after a collective failed. Throws
// if the store is gone.
std::string probe(c10d::Store& store, const DistConfig& config,
                  const std::vector<std::string>& hosts) {
  std::vector<int64_t> beats0(config.world_size), beats1(config.world_size), seq(config.world_size);
  for (int r = 0; r < config.world_size; ++r) beats0[r] = store.add(store_key("beat", r), 0);
  std::this_thread::sleep_for(kHeartbeat * 5);
  for (int r = 0; r < config.world_size; ++r) {
    beats1[r] = store.add(store_key("beat", r), 0);
    seq[r] = store.add(store_key("seq", r), 0);
  }
  std::ostringstream hung;
  std::vector<int> dead;
  const int64_t max_seq = *std::max_element(seq.begin(), seq.end());
  for (int r = 0; r < config.world_size; ++r) {
    if (r == config.rank) continue;
    if (store.add(store_key("done", r), 0) > 0) continue;
    if (beats1[r] == beats0[r])
      dead.push_back(r);
    else if (seq[r] < max_seq)
      hung << (hung.tellp() > 0 ? ", " : "") << r << " (at collective " << seq[r] << " of "
           << max_seq << ")";
  }
  if (!dead.empty())
    return "lost rank " + join_ranks(dead) + ": the process died or is stopped (no heartbeat; " +
           ranks_on_hosts(dead, hosts) + ")";
  if (hung.tellp() > 0) return "lost rank " + hung.str() + ": the process is alive but hung";
  return "a peer failed, but every rank still answers (network trouble?)";
}

}  // namespace

std::string store_key(const char* what, int rank) {
  return std::string("xdino/") + what + "/" + std::to_string(rank);
}

// Every store connection is made here, while all ranks are alive. A TCPStore connected after
// a failure can reach a rank 0 that is still dying: the kernel accepts it into the backlog of
// the listening socket, then resets it when that socket closes, and LibTorch 1.13's TCPStore
// callback thread lets the reset escape (std::terminate instead of our one-line error; seen
// once in about 20 kills of rank 0 under load). Connections made earlier only ever see an
// orderly close.
PeerMonitor::PeerMonitor(const DistConfig& config, const StoreFactory& connect_store)
    : config_(config) {
  beat_store_ = connect_store();
  probe_store_ = connect_store();
  const std::string mine = host_label();
  beat_store_->set(store_key("host", config_.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  for (int r = 0; r < config_.world_size; ++r) {
    const auto bytes = beat_store_->get(store_key("host", r));  // waits for rank r to publish
    hosts_.emplace_back(bytes.begin(), bytes.end());
  }
  // Read the peers' counters at least 4 times per window: a counter is only seen to move at a
  // read, so reads further apart than the window would call a beating peer silent.
  check_every_ = static_cast<int>(
      std::clamp<int64_t>(config_.heartbeat_timeout / (4 * kHeartbeat), 1, kPeerCheckBeats));
  last_round_trip_ = Clock::now();
  last_beat_.assign(config_.world_size, -1);
  last_moved_.assign(config_.world_size, last_round_trip_);
  beat_thread_ = std::thread([this] { beat_loop(); });
  watch_thread_ = std::thread([this] { watch_loop(); });
}

PeerMonitor::~PeerMonitor() { stop(); }

void PeerMonitor::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  cv_.notify_all();
  if (beat_thread_.joinable()) beat_thread_.join();
  if (watch_thread_.joinable()) watch_thread_.join();
}

std::string PeerMonitor::verdict() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return verdict_;
}

void PeerMonitor::wait_until(const std::function<bool()>& done) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done() || !verdict_.empty(); });
}

void PeerMonitor::wake() {
  // Taking the lock orders this notification after the waiter's predicate check.
  mutex_.lock();
  mutex_.unlock();
  cv_.notify_all();
}

void PeerMonitor::set_verdict(std::string verdict) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!verdict_.empty()) return;
    verdict_ = std::move(verdict);
  }
  cv_.notify_all();
}

std::string PeerMonitor::diagnose() const {
  const std::string store_host = "lost rank 0: its rendezvous store at " + config_.master_addr +
                                 ":" + std::to_string(config_.master_port);
  try {
    {
      const std::string v = verdict();
      if (!v.empty()) return v;
    }
    auto answer = std::make_shared<std::promise<std::string>>();
    auto future = answer->get_future();
    std::thread([store = probe_store_, config = config_, hosts = hosts_, answer, store_host] {
      try {
        answer->set_value(probe(*store, config, hosts));
      } catch (const std::exception&) {
        answer->set_value(store_host + " no longer answers (the process died)");
      }
    }).detach();
    if (future.wait_for(kProbeDeadline) == std::future_status::ready) return future.get();
    return store_host + " does not answer (the process is stopped or hung)";
  } catch (const std::exception& e) {
    return std::string("a peer failed (no diagnosis: ") + e.what() + ")";
  }
}

void PeerMonitor::beat_loop() {
  int64_t published = 0;  // the store's counter only grows, so publish the difference
  auto last_pass = Clock::now();
  for (int beat = 0;; ++beat) {
    if (was_frozen(last_pass)) {
      // This process was stopped (SIGSTOP, a debugger): its peers went unread, not silent.
      std::lock_guard<std::mutex> lock(mutex_);
      std::fill(last_moved_.begin(), last_moved_.end(), Clock::now());
    }
    try {
      beat_store_->add(store_key("beat", config_.rank), 1);
      const int64_t now = sequence_.load();
      if (now != published) beat_store_->add(store_key("seq", config_.rank), now - published);
      published = now;
      if (beat % check_every_ == 0) check_peers(*beat_store_);
      std::lock_guard<std::mutex> lock(mutex_);
      last_round_trip_ = Clock::now();
    } catch (const std::exception&) {
      // The store host is gone; the main thread finds out at its next collective.
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, kHeartbeat, [this] { return stopped_; })) return;
  }
}

void PeerMonitor::check_peers(c10d::Store& store) {
  std::vector<int64_t> beats(config_.world_size);
  for (int r = 0; r < config_.world_size; ++r) beats[r] = store.add(store_key("beat", r), 0);
  const auto now = Clock::now();
  std::vector<int> silent, still;  // still: no beat since the previous check
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int r = 0; r < config_.world_size; ++r) {
      if (beats[r] != last_beat_[r]) {
        last_beat_[r] = beats[r];
        last_moved_[r] = now;
      } else if (r != config_.rank) {
        still.push_back(r);
        if (now - last_moved_[r] > config_.heartbeat_timeout) silent.push_back(r);
      }
    }
  }
  const auto finished = [&](int r) { return store.add(store_key("done", r), 0) != 0; };
  std::set<std::string> lost_hosts;
  for (int r : silent)  // a rank that finished stops beating: not lost
    if (!finished(r)) lost_hosts.insert(hosts_[r]);
  if (lost_hosts.empty()) return;
  // A host that goes away silences all its ranks at once, but each rank's last beat is seen at
  // a check, up to check_every_ beats apart: a host-mate of a lost rank that has not beaten
  // since the previous check is lost with it, so the verdict names the host's ranks together.
  std::vector<int> lost;
  for (int r : still)
    if (lost_hosts.count(hosts_[r]) && !finished(r)) lost.push_back(r);
  if (!lost.empty())
    set_verdict("lost " + ranks_on_hosts(lost, hosts_) + ": no heartbeat for " +
                std::to_string(whole_seconds(config_.heartbeat_timeout)) +
                " s (the host is unreachable, or the process died or is stopped)");
}

// A pass of a thread's loop that comes half a window after the previous one means this
// process did not run meanwhile: what it measured in that time says nothing about its peers.
bool PeerMonitor::was_frozen(Clock::time_point& last_pass) const {
  const auto now = Clock::now();
  const bool frozen = now - last_pass > config_.heartbeat_timeout / 2;
  last_pass = now;
  return frozen;
}

void PeerMonitor::watch_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  auto last_pass = Clock::now();
  while (!cv_.wait_for(lock, kWatch, [this] { return stopped_; })) {
    if (was_frozen(last_pass)) last_round_trip_ = Clock::now();
    if (!verdict_.empty() || Clock::now() - last_round_trip_ <= config_.heartbeat_timeout) continue;
    std::vector<int> there;
    for (int r = 0; r < config_.world_size; ++r)
      if (hosts_[r] == hosts_[0] && r != config_.rank) there.push_back(r);
    verdict_ = "lost " + ranks_on_hosts(there, hosts_) + ": rank 0's rendezvous store at " +
               config_.master_addr + ":" + std::to_string(config_.master_port) +
               " has not answered for " + std::to_string(whole_seconds(config_.heartbeat_timeout)) +
               " s (that host is unreachable from here, or rank 0 is stopped)";
    cv_.notify_all();
  }
}

}  // namespace xdino::distributed
