#include "distributed/rendezvous/round_store.h"

#include <algorithm>
#include <cmath>

namespace xdino::distributed {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds RoundStoreTimes::use(RoundStore::Use use) const {
  switch (use) {
    case RoundStore::Use::kMain:
      return main;
    case RoundStore::Use::kBeat:
      return beat;
    case RoundStore::Use::kWatch:
    case RoundStore::Use::kQuick:
      break;
  }
  return brief;
}

// ---- the c10d store ----------------------------------------------------------------------

TcpRoundStore::TcpRoundStore(TimedStore::Factory connect, std::string where, std::string prefix,
                             std::string node, RoundStoreTimes times)
    : where_(std::move(where)),
      prefix_(std::move(prefix)),
      node_(std::move(node)),
      times_(times),
      main_(connect, times.main),
      beat_(connect, times.beat),
      watch_(connect, times.brief),
      quick_(connect, times.brief) {
  main_.add(prefix_ + "hb/" + node_, 1);
}

TimedStore& TcpRoundStore::store(Use use) {
  switch (use) {
    case Use::kMain:
      return main_;
    case Use::kBeat:
      return beat_;
    case Use::kWatch:
      return watch_;
    case Use::kQuick:
      break;
  }
  return quick_;
}

RoundStore::State TcpRoundStore::read(Use use) {
  State s;
  s.blob = store(use).get(prefix_ + "state");
  s.token = s.blob;  // c10d compares values
  return s;
}

bool TcpRoundStore::compare_set(Use use, const std::string& token, const std::string& blob) {
  return store(use).compare_set(prefix_ + "state", token, blob) == blob;
}

void TcpRoundStore::beat() { beat_.add(prefix_ + "hb/" + node_, 1); }

bool TcpRoundStore::left(Use use, const std::string& node) {
  return store(use).check(prefix_ + "left/" + node);
}

void TcpRoundStore::leave() { quick_.set(prefix_ + "left/" + node_, "1"); }

bool TcpRoundStore::dead(Use use, const std::string& node) {
  const int64_t beats = store(use).add(prefix_ + "hb/" + node, 0);
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  Seen& seen = seen_[node];
  if (seen.beats != beats) {
    seen.beats = beats;
    seen.moved = now;
  }
  return now - seen.moved > times_.dead_after();
}

// ---- etcd --------------------------------------------------------------------------------
#ifdef XDINO_WITH_ETCD

namespace {
// A lease's TTL in whole seconds: the heartbeat's span, rounded up (etcd raises it to 2 s).
int64_t ttl_of(milliseconds span) {
  return std::max<int64_t>(2, static_cast<int64_t>(std::ceil(span.count() / 1000.0)));
}
}  // namespace

EtcdRoundStore::EtcdRoundStore(EtcdOptions options, std::string prefix, std::string node,
                               RoundStoreTimes times, milliseconds connect)
    : client_(std::move(options)),
      prefix_(std::move(prefix)),
      node_(std::move(node)),
      times_(times) {
  new_lease(connect);
}

EtcdRoundStore::~EtcdRoundStore() {
  // The heartbeat key goes with the lease at once: the others need not wait out its TTL.
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lease = lease_;
  }
  try {
    if (lease != 0) client_.revoke(lease, times_.brief);
  } catch (const std::exception&) {
    // Unreachable: the lease expires by itself.
  }
}

void EtcdRoundStore::new_lease(milliseconds timeout) {
  const int64_t lease = client_.grant(ttl_of(times_.dead_after()), timeout);
  client_.put(prefix_ + "hb/" + node_, "1", lease, timeout);
  std::lock_guard<std::mutex> lock(mutex_);
  lease_ = lease;
}

RoundStore::State EtcdRoundStore::read(Use use) {
  State s;
  const auto v = client_.get(prefix_ + "state", times_.use(use));
  s.token = std::to_string(v ? v->mod_revision : 0);  // 0: absent
  if (v) s.blob = v->value;
  return s;
}

bool EtcdRoundStore::compare_set(Use use, const std::string& token, const std::string& blob) {
  return client_.put_if(prefix_ + "state", std::stoll(token), blob, 0, times_.use(use));
}

void EtcdRoundStore::beat() {
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lease = lease_;
  }
  // A lease that expired while this node could not reach etcd (a partition longer than its
  // TTL) is gone for good: the others have judged this node dead. A new lease and key make
  // it alive again; the rendezvous loop finds whether it is still in the round.
  if (client_.keep_alive(lease, times_.beat) <= 0) new_lease(times_.beat);
}

bool EtcdRoundStore::left(Use use, const std::string& node) {
  return client_.get(prefix_ + "left/" + node, times_.use(use)).has_value();
}

void EtcdRoundStore::leave() {
  // Read by the others within their next keep-alive span; kept an hour, then gone by itself.
  const int64_t lease = client_.grant(3600, times_.brief);
  client_.put(prefix_ + "left/" + node_, "1", lease, times_.brief);
}

bool EtcdRoundStore::dead(Use use, const std::string& node) {
  return !client_.get(prefix_ + "hb/" + node, times_.use(use)).has_value();
}
#endif

}  // namespace xdino::distributed
