// A client of an etcd 3.4+ cluster through its v3 JSON gateway (HTTP POST of JSON, libcurl),
// holding what the launchers' rendezvous keeps there (node_rendezvous.h, "--rdzv_backend
// etcd"): one key changed by compare-and-swap on its revision, keys bound to leases that expire
// with the launcher that renews them. docs/distributed.md, "The rendezvous in etcd", says why v3
// and why these calls; the gateway's traps it handles are listed there too (64-bit numbers as JSON
// strings, fields left out at their default value, base64 keys and values, a gateway that talks
// only to its own member).
//
// Contract:
//  - EtcdClient(options) checks the options (xdino::UsageError: no endpoint, a malformed one,
//    a TLS file that is not a regular file, a password without a user) and connects to
//    nothing yet.
//    Endpoints are "host:port", "host" (port 2379), "[v6]:port" or "http(s)://host:port";
//    options.protocol applies to those given without a scheme.
//  - Every call takes `timeout`, the longest it may block in all. It asks the member it last
//    reached first and moves on to the next (in the order given, wrapping) when one refuses,
//    does not answer within a third of `timeout` (at least 1 s), or answers "unavailable" (no
//    leader, a request timed out inside etcd): a gateway never fails over by itself. When no member
//    answered within `timeout` it throws EtcdUnavailable, one line naming the endpoints and the
//    last cause; an answer that is an error of the request itself (a bad lease, a malformed key)
//    throws xdino::Error. A member whose answer no etcd gives (a 200 whose body is not a JSON
//    object, a number that is not one, a lease grant without an ID: a web server or another
//    service at that port) throws xdino::UsageError at once, one line saying the endpoint is
//    not etcd. Thread-safe: each thread keeps one libcurl handle, reused by its calls.
//  - With options.user, the client authenticates (/v3/auth/authenticate) before its first call
//    and again when a token expires; TLS files go to libcurl as given.
//  - get(key): the key's value and revision, or nullopt (linearizable: decisions are made on
//    what the cluster has agreed, never on a cut-off member's stale copy).
//  - put_if(key, revision, value, lease): one transaction that writes only when the key's
//    mod_revision is still `revision` (0: only when the key does not exist); true when it
//    wrote. A write whose answer was lost may still have happened: callers re-read.
//  - put(key, value, lease) writes unconditionally; lease 0: none.
//  - grant(ttl): a new lease of `ttl` seconds (etcd raises anything under 2 s to 2 s).
//    keep_alive(lease) renews it and returns its TTL, 0 when the lease is gone (expired or
//    revoked: etcd answers 200 with no TTL). revoke(lease) deletes it and its keys.
//  - Lease IDs are int64 (above 2^53: never through a double).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/json.h"

namespace xdino::distributed {

// No member of the cluster answered within a call's timeout.
class EtcdUnavailable : public Error {
 public:
  using Error::Error;
};

struct EtcdOptions {
  std::vector<std::string> endpoints;  // see the contract; at least one
  std::string protocol = "http";       // for endpoints without a scheme: http or https
  std::string ca_cert;                 // PEM file of the CA that signed the members' certificates
  std::string cert, key;               // this client's certificate and key (mutual TLS)
  std::string user, password;          // etcd's authentication, when the cluster has it on
};

struct EtcdValue {
  std::string value;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

class EtcdClient {
 public:
  using Timeout = std::chrono::milliseconds;

  explicit EtcdClient(EtcdOptions options);

  std::optional<EtcdValue> get(const std::string& key, Timeout timeout);
  bool put_if(const std::string& key, int64_t revision, const std::string& value, int64_t lease,
              Timeout timeout);
  void put(const std::string& key, const std::string& value, int64_t lease, Timeout timeout);
  int64_t grant(int64_t ttl_seconds, Timeout timeout);
  int64_t keep_alive(int64_t lease, Timeout timeout);
  void revoke(int64_t lease, Timeout timeout);

  // "etcd at h1:2379,h2:2379": how lines name the cluster.
  std::string where() const;
  // The URLs the endpoints became, in order ("http://h1:2379").
  const std::vector<std::string>& urls() const { return urls_; }

  // One gateway call: POST `body` to `path` ("/v3/kv/range"); its JSON answer. Public for the
  // tests, which set a cluster up through it.
  Json call(const std::string& path, const Json& body, Timeout timeout);

 private:
  struct Answer {
    long status = 0;  // HTTP status; 0: no answer (the transport's error is in `error`)
    std::string body, error;
  };
  Answer post(const std::string& url, const std::string& path, const std::string& body,
              const std::string& token, Timeout timeout) const;
  std::string authenticate(const std::string& url, Timeout timeout);
  [[noreturn]] void not_etcd(const std::string& url, const std::string& path,
                             const std::string& what) const;
  // read(): what a call's answer says; an answer etcd would not give becomes not_etcd.
  template <typename Read>
  auto reading(const std::string& path, Read read) const;
  size_t current_member() const;

  EtcdOptions options_;
  std::vector<std::string> urls_;
  mutable std::mutex mutex_;  // below
  size_t current_ = 0;        // the member that answered last
  std::string token_;         // authentication token, when options_.user is set
};

// Standard base64 (RFC 4648, padded), as the gateway carries keys and values. Our own 30 lines
// rather than OpenSSL's EVP_EncodeBlock: libcurl may be built on GnuTLS, and the decoder must
// refuse what is not base64 with our one-line error.
std::string base64_encode(const std::string& bytes);
std::string base64_decode(const std::string& text);

}  // namespace xdino::distributed
