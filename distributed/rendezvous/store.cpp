#include "distributed/rendezvous/store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"

namespace xdino::distributed {
namespace {

using Clock = std::chrono::steady_clock;

#if XDINO_TORCH_AT_LEAST(2, 4)
// The store server's socket, made here rather than by LibTorch 2.x: an IPv4 socket on every
// interface. LibTorch's own is dual-stack, so a client on loopback arrives as
// ::ffff:127.0.0.1, and the server names each new client with getnameinfo (no
// NI_NUMERICHOST) on its one event-loop thread: /etc/hosts does not answer for that address,
// so where no DNS server answers every client waits out the resolver (5 s). 127.0.0.1 is in
// /etc/hosts. The store owns the descriptor once it is given (compat.h).
int listen_ipv4(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  XDINO_CHECK(fd >= 0, "cannot open a socket for the store on port ", port, ": ",
              std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    close(fd);
    // Worded as LibTorch words it, and thrown as it throws (not an xdino::Error, which callers
    // pass on as said), so that callers read and wrap one message on every version (the
    // rendezvous names the port and the flag that moves it, distributed.cpp).
    throw std::runtime_error("cannot serve the store on port " + std::to_string(port) + ": " +
                             (err == EADDRINUSE ? "Address already in use" : std::strerror(err)));
  }
  return fd;
}
#endif

}  // namespace

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

StorePtr with_prefix(TcpStorePtr store, const std::string& prefix) {
  if (prefix.empty()) return store;
  return c10::make_intrusive<c10d::PrefixStore>(prefix, std::move(store));
}

TcpStorePtr make_tcp_store(const std::string& host, int port, bool server,
                           std::optional<size_t> workers, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(port);
  opts.isServer = server;
  opts.numWorkers = server && workers ? c10::optional<std::size_t>(*workers) : c10::nullopt;
  opts.waitWorkers = false;
  // LibTorch 1.13 connects within whole seconds (it truncates: 999 ms is "0 s", an immediate
  // timeout): round up.
  opts.timeout = std::chrono::ceil<std::chrono::seconds>(timeout);
#if XDINO_TORCH_AT_LEAST(2, 4)
  // Since 2.4 the store asks for its libuv backend by default, and a LibTorch built without
  // libuv (Debian 13's 2.6) refuses it: fall back to the classic backend, which every build has.
  // Each attempt gets a socket of its own (a failed one may have closed what it was given).
  try {
    if (server) opts.masterListenFd = listen_ipv4(port);
    return c10::make_intrusive<c10d::TCPStore>(host, opts);
  } catch (const std::exception& e) {
    if (!opts.useLibUV || std::string(e.what()).find("libuv") == std::string::npos) throw;
    opts.useLibUV = false;
  }
  if (server) opts.masterListenFd = listen_ipv4(port);
#endif
  return c10::make_intrusive<c10d::TCPStore>(host, opts);
}

int free_tcp_port(bool any_interface) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  XDINO_CHECK(fd >= 0, "cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(any_interface ? INADDR_ANY : INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  XDINO_CHECK(ok, "cannot find a free TCP port on ", any_interface ? "this host" : "127.0.0.1");
  return ntohs(addr.sin_port);
}

std::pair<TcpStorePtr, int> serve_free_port(std::chrono::milliseconds timeout) {
  std::string last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int port = free_tcp_port(/*any_interface=*/true);
    try {
      return {make_tcp_store("127.0.0.1", port, true, std::nullopt, timeout), port};
    } catch (const std::exception& e) {
      last = first_line(e.what());  // taken between the probe and the bind: another port
    }
  }
  XDINO_FAIL("cannot serve a store on a free port of this host (20 tries; the last: ", last, ")");
}

bool unreachable(const std::string& message) {
  std::string lower = message;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower.find("failed to connect") != std::string::npos ||
         lower.find("no route to host") != std::string::npos ||
         lower.find("network is unreachable") != std::string::npos;
}

// c10d retries while the port is closed (the host's process not started yet) but fails at once
// when the host cannot be reached at all; that is waited out too, so that a run re-forms by
// itself once a host or link is back.
TcpStorePtr connect_tcp_store(const std::string& host, int port, std::chrono::milliseconds timeout,
                              const std::string& what) {
  const auto deadline = Clock::now() + timeout;
  bool told = false;
  for (;;) {
    try {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      return make_tcp_store(host, port, false, std::nullopt,
                            std::max(left, std::chrono::milliseconds(1)));
    } catch (const std::exception& e) {
      const std::string cause = first_line(e.what());
      if (!unreachable(cause) || Clock::now() + std::chrono::seconds(2) >= deadline) throw;
      if (!told && !what.empty())
        log::warn(what, " at ", host, ":", port, " cannot be reached (", cause,
                  "); retrying until the timeout");
      told = true;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
}

TimedStore::TimedStore(Factory connect, std::chrono::milliseconds op_timeout)
    : connect_(std::move(connect)), op_timeout_(op_timeout) {}

// `op` must hold copies of what it reads: on an overrun its thread outlives this call.
template <typename Result>
Result TimedStore::run(const char* what, const std::function<Result(c10d::TCPStore&)>& op) {
  struct Call {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::optional<Result> result;
    std::string error;
    TcpStorePtr store;
  };
  auto call = std::make_shared<Call>();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    call->store = store_;
  }
  std::thread([call, op, connect = connect_, timeout = op_timeout_] {
    std::optional<Result> result;
    std::string error;
    try {
      if (!call->store) call->store = connect(timeout);
      result = op(*call->store);
    } catch (const std::exception& e) {
      error = first_line(e.what());
    }
    std::lock_guard<std::mutex> lock(call->mutex);
    call->result = std::move(result);
    call->error = std::move(error);
    call->done = true;
    call->done_cv.notify_all();
  }).detach();

  std::unique_lock<std::mutex> lock(call->mutex);
  const bool finished = call->done_cv.wait_for(lock, op_timeout_, [&] { return call->done; });
  std::lock_guard<std::mutex> own(mutex_);
  if (!finished || !call->error.empty()) {
    store_.reset();  // the next operation connects afresh; a blocked one keeps its own
    // A plain Error: callers put the line in front of users, where a source location is noise.
    throw Error(detail::concat(
        "store ", what, " ",
        finished ? "failed: " + call->error
                 : "had no answer within " + std::to_string(op_timeout_.count()) + " ms"));
  }
  store_ = call->store;
  return *call->result;
}

int64_t TimedStore::add(const std::string& key, int64_t delta) {
  return run<int64_t>("add", [key, delta](c10d::TCPStore& s) { return s.add(key, delta); });
}

void TimedStore::set(const std::string& key, const std::string& value) {
  run<bool>("set", [key, value](c10d::TCPStore& s) {
    s.set(key, bytes(value));
    return true;
  });
}

bool TimedStore::check(const std::string& key) {
  return run<bool>("check", [key](c10d::TCPStore& s) { return s.check({key}); });
}

std::string TimedStore::get(const std::string& key) {
  return run<std::string>("get", [key](c10d::TCPStore& s) {
    return s.check({key}) ? text(s.get(key)) : std::string();
  });
}

std::string TimedStore::compare_set(const std::string& key, const std::string& expected,
                                    const std::string& desired) {
  return run<std::string>("compare_set", [key, expected, desired](c10d::TCPStore& s) {
    return text(s.compareSet(key, bytes(expected), bytes(desired)));
  });
}

}  // namespace xdino::distributed
