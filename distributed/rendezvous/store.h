// c10d TCPStores as this tier uses them: the workers' rendezvous store (distributed.cpp, one per
// round, hosted by rank 0) and the launchers' store (node_rendezvous.h, one per job, hosted by
// node 0's launcher). One place knows how LibTorch builds differ in making one, and which
// failures mean "the host cannot be reached yet".
//
// Contract:
//  - make_tcp_store(host, port, server, workers, timeout): a server on `port` of every
//    interface of this machine (server = true; it is also a client of itself) or a client of
//    host:port; `timeout` bounds the connection and each wait/get. Throws what c10d throws.
//  - serve_free_port(timeout): a server on a port of every interface that was free, returned
//    with the port; it holds the port for its whole life, so no other process can take it
//    between the moment a port is chosen and the moment it is used (a launcher's round may
//    take minutes to form). Retries another port when one is taken first; throws xdino::Error
//    after 20 tries.
//  - connect_tcp_store(...): a client that also waits out an unreachable host (no route, a link
//    down, a host rebooting), which c10d itself fails at once, up to `timeout` in all; `what`
//    names the store in the one warning it logs while it waits ("": no warning).
//  - unreachable(message): whether a c10d error says the host cannot be reached (as opposed to
//    refused, timed out or reset).
//  - TimedStore: store operations that can never block the caller for longer than
//    `op_timeout`. A c10d client has no deadline on add/set/compareSet: on a link that is down
//    a request waits for TCP to give up, which takes minutes. Each operation runs on a thread
//    of its own; when it overruns, the caller gets xdino::Error and the connection is abandoned
//    (its thread keeps it until the socket gives up), and the next operation connects afresh.
//    Thread-safe; the factory is called on the operation's thread.
//  - with_prefix(store, prefix): `store` itself when prefix is "", else a c10d::PrefixStore
//    over it (every key read or written as prefix + "/" + key; DistConfig::store_prefix).
//  - bytes()/text(): std::string <-> the store's byte vectors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

namespace xdino::distributed {

using TcpStorePtr = c10::intrusive_ptr<c10d::TCPStore>;
using StorePtr = c10::intrusive_ptr<c10d::Store>;

StorePtr with_prefix(TcpStorePtr store, const std::string& prefix);

TcpStorePtr make_tcp_store(const std::string& host, int port, bool server,
                           std::optional<size_t> workers, std::chrono::milliseconds timeout);

std::pair<TcpStorePtr, int> serve_free_port(std::chrono::milliseconds timeout);

// A TCP port that is free right now on 127.0.0.1 (a rendezvous on this machine) or, with
// any_interface, on every interface (a store that other machines reach); throws xdino::Error
// if the system gives none. Free now, not later: a port to hold, use serve_free_port().
int free_tcp_port(bool any_interface = false);

TcpStorePtr connect_tcp_store(const std::string& host, int port, std::chrono::milliseconds timeout,
                              const std::string& what);

bool unreachable(const std::string& message);

std::vector<uint8_t> bytes(const std::string& s);
std::string text(const std::vector<uint8_t>& b);

class TimedStore {
 public:
  // Makes a connection within the given time (the operation's timeout).
  using Factory = std::function<TcpStorePtr(std::chrono::milliseconds)>;
  TimedStore(Factory connect, std::chrono::milliseconds op_timeout);

  // Each runs its operation with a connection, made first if there is none; returns its result, or
  // throws xdino::Error (one line, naming `what`) when it fails or overruns.
  int64_t add(const std::string& key, int64_t delta);
  void set(const std::string& key, const std::string& value);
  bool check(const std::string& key);
  std::string get(const std::string& key);  // "" when the key does not exist
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired);

 private:
  template <typename Result>
  Result run(const char* what, const std::function<Result(c10d::TCPStore&)>& op);

  Factory connect_;
  std::chrono::milliseconds op_timeout_;
  std::mutex mutex_;  // store_
  TcpStorePtr store_;
};

}  // namespace xdino::distributed
