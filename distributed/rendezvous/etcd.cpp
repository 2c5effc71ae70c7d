#include "distributed/rendezvous/etcd.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "core/paths.h"
#include "distributed/rendezvous/endpoint.h"

namespace xdino::distributed {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

std::once_flag g_curl_init;

std::string short_line(const std::string& s);
std::string short_json(const Json& j);

// An answer no etcd gives (a body that is not its JSON, a number that is not one): what
// call() turns into the one line saying the endpoint is not etcd.
struct NotEtcd : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One libcurl handle per thread, reused by every call it makes (its connections and DNS
// answers with it); reset before each request, so nothing of the last one carries over. A
// forked child makes its own: the handle's connections are its parent's sockets too, and two
// processes talking HTTP on one socket read each other's answers.
CURL* thread_handle() {
  thread_local std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(nullptr,
                                                                          curl_easy_cleanup);
  thread_local pid_t owner = 0;
  if (owner != getpid()) {
    (void)handle.release();  // the parent's: never closed from here
    handle.reset(curl_easy_init());
    owner = getpid();
  }
  if (handle) curl_easy_reset(handle.get());
  return handle.get();
}

size_t append_to(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// "host:port", "host", "[v6]:port" or "scheme://host:port" -> "scheme://host:port".
std::string url_of(const std::string& endpoint, const std::string& protocol) {
  std::string scheme = protocol, rest = endpoint;
  if (const size_t s = endpoint.find("://"); s != std::string::npos) {
    scheme = endpoint.substr(0, s);
    rest = endpoint.substr(s + 3);
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  XDINO_CHECK_ARG(scheme == "http" || scheme == "https", "etcd endpoint ", quote(endpoint),
                  ": the protocol must be http or https, not ", quote(scheme));
  const HostPort hp = parse_host_port(rest, 2379, "etcd endpoint");  // etcd's client port
  const bool v6 = hp.host.find(':') != std::string::npos;
  return scheme + "://" + (v6 ? "[" + hp.host + "]" : hp.host) + ":" + std::to_string(hp.port);
}

// The gateway writes 64-bit integers as JSON strings and leaves out those that are 0. Anything
// else is not etcd's: one line naming the field (never std::stoll's bare "stoll").
int64_t int_of(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    const std::string text = it->get<std::string>();
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (!text.empty() && *end == '\0' && errno != ERANGE) return static_cast<int64_t>(v);
  }
  throw NotEtcd(
      detail::concat("its field ", quote(name), " is ", short_json(*it), ", not a 64-bit integer"));
}

// gRPC codes the gateway passes on (etcd's rpctypes): worth another member, or not.
constexpr int64_t kUnknown = 2, kDeadlineExceeded = 4, kNotFound = 5, kUnavailable = 14,
                  kUnauthenticated = 16;

// An answer's first line, cut at 300 bytes (a proxy's HTML page is not a message).
std::string short_line(const std::string& s) {
  const std::string line = first_line(s);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

std::string short_json(const Json& j) { return short_line(j.dump()); }

}  // namespace

EtcdClient::EtcdClient(EtcdOptions options) : options_(std::move(options)) {
  XDINO_CHECK_ARG(!options_.endpoints.empty(),
                  "the etcd rendezvous needs at least one endpoint "
                  "(--rdzv_endpoint host:2379,host2:2379,...)");
  for (const std::string& e : options_.endpoints) urls_.push_back(url_of(e, options_.protocol));
  for (const std::string* file : {&options_.ca_cert, &options_.cert, &options_.key}) {
    // A regular file: a folder or a device (/dev/zero) would be read as PEM by libcurl.
    const std::string problem = file->empty() ? "" : file_problem(*file);
    XDINO_CHECK_ARG(problem.empty(), "etcd TLS file ", quote(*file), " ", problem);
  }
  XDINO_CHECK_ARG(options_.cert.empty() == options_.key.empty(),
                  "etcd TLS: give the client certificate and its key together (ssl_cert and "
                  "ssl_cert_key)");
  XDINO_CHECK_ARG(options_.password.empty() || !options_.user.empty(),
                  "etcd: a password without a user; give user= too");
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string EtcdClient::where() const {
  std::string out = "etcd at ";
  for (size_t i = 0; i < urls_.size(); ++i) {
    std::string u = urls_[i];
    if (options_.protocol == "http" && u.rfind("http://", 0) == 0) u = u.substr(7);
    out += (i ? "," : "") + u;
  }
  return out;
}

EtcdClient::Answer EtcdClient::post(const std::string& url, const std::string& path,
                                    const std::string& body, const std::string& token,
                                    Timeout timeout) const {
  Answer a;
  CURL* c = thread_handle();
  if (c == nullptr) {
    a.error = "libcurl could not make a handle";
    return a;
  }
  const std::string target = url + path;
  const long ms = static_cast<long>(std::max<int64_t>(1, timeout.count()));
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  const std::string auth = "Authorization: " + token;
  if (!token.empty()) headers = curl_slist_append(headers, auth.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_list(headers,
                                                                          curl_slist_free_all);
  curl_easy_setopt(c, CURLOPT_URL, target.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms);
  // A member whose host is gone (no route, a dropped link) must not hold the call: another
  // member may answer within what is left.
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::min(ms, 2000L));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // the rendezvous calls from several threads
  curl_easy_setopt(c, CURLOPT_PROXY, "");     // the cluster is reached directly, never via
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");  // an http_proxy of the environment
  if (!options_.ca_cert.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_cert.c_str());
  if (!options_.cert.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, options_.cert.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, options_.key.c_str());
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_to);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &a.body);
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    a.error = curl_easy_strerror(rc);
    return a;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
  return a;
}

std::string EtcdClient::authenticate(const std::string& url, Timeout timeout) {
  const Json body = {{"name", options_.user}, {"password", options_.password}};
  const Answer a = post(url, "/v3/auth/authenticate", body.dump(), "", timeout);
  if (a.status == 0) return "";  // the caller moves on to the next member
  Json j;
  try {
    j = parse_json(a.body, "etcd's answer");
  } catch (const std::exception&) {
  }
  if (a.status == 200 && j.is_object() && j.contains("token"))
    return j.at("token").get<std::string>();
  if (a.status >= 500) return "";  // no leader, a timeout inside etcd: another member may do
  XDINO_FAIL_ARG(where(), ": user ", quote(options_.user), " could not authenticate: ",
                 short_line(j.is_object() ? j.value("message", a.body) : a.body),
                 " (--rdzv_conf user, password)");
}

Json EtcdClient::call(const std::string& path, const Json& body, Timeout timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string text = body.dump();
  size_t start = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    start = current_;
  }
  std::string last = "no member was asked";
  bool reauthenticated = false;
  for (size_t attempt = 0;; ++attempt) {
    // After every member refused at once, a pause before the next round of them.
    if (attempt > 0 && attempt % urls_.size() == 0)
      std::this_thread::sleep_for(
          std::min<Clock::duration>(milliseconds(200), deadline - Clock::now()));
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    const size_t i = (start + attempt) % urls_.size();
    std::string token;
    if (!options_.user.empty()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (i == current_) token = token_;
      }
      // Simple tokens are a member's own: a new member needs its own.
      if (token.empty()) token = authenticate(urls_[i], left);
      if (token.empty()) {
        last = urls_[i] + ": no answer to authenticate";
        continue;
      }
    }
    // A member that accepts the connection and never answers (a stopped process, a hung
    // host) must not take the whole call: each member gets a third of it (at least 1 s), and
    // the next one the rest. A write cut short may still be applied: callers guard writes.
    const auto remaining = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    const Answer a =
        post(urls_[i], path, text, token,
             urls_.size() == 1 ? remaining
                               : std::min(remaining, std::max(milliseconds(1000), timeout / 3)));
    if (a.status == 0) {
      last = urls_[i] + ": " + a.error;
      continue;
    }
    Json j;
    try {
      j = parse_json(a.body, "etcd's answer");
    } catch (const std::exception&) {
      j = Json();  // null: not JSON
    }
    // etcd's gateway answers every 200 with a JSON object; anything else (a web server's page,
    // another service at that port) is not etcd, and retrying cannot make it so.
    if (a.status == 200 && !j.is_object())
      not_etcd(urls_[i], path,
               "HTTP 200 with a body that is not etcd's JSON: " + short_line(a.body));
    // A stream (lease keepalive) reports its errors inside a 200: {"error":{"grpc_code":..}}.
    int64_t code = 0;
    std::string message = short_line(a.body);
    try {
      if (j.is_object() && j.contains("error") && j["error"].is_object()) {
        code = int_of(j["error"], "grpc_code");
        message = j["error"].value("message", message);
      } else if (a.status != 200 && j.is_object()) {
        code = int_of(j, "code");
        message = j.value("message", j.value("error", message));
      }
    } catch (const NotEtcd& e) {
      not_etcd(urls_[i], path, e.what());
    } catch (const Json::exception&) {  // a message that is not a string
      not_etcd(urls_[i], path, "an error that is not etcd's: " + short_line(a.body));
    }
    if (a.status == 200 && code == 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      current_ = i;
      if (!options_.user.empty()) token_ = token;
      return j;
    }
    if (code == kUnavailable || code == kDeadlineExceeded || code == kUnknown || a.status == 503 ||
        a.status == 502 || a.status == 504) {
      last = urls_[i] + ": " + message;
      continue;
    }
    if (code == kUnauthenticated && !options_.user.empty() && !reauthenticated) {
      reauthenticated = true;
      std::lock_guard<std::mutex> lock(mutex_);
      token_.clear();
      current_ = i;
      --attempt;  // the same member again, with a new token
      continue;
    }
    XDINO_FAIL(where(), ": ", path, " was refused: ", message, " (HTTP ", a.status, ")");
  }
  throw EtcdUnavailable(detail::concat(where(), ": no member answered within ",
                                       timeout.count() / 1000.0, " s (last: ", last, ")"));
}

[[noreturn]] void EtcdClient::not_etcd(const std::string& url, const std::string& path,
                                       const std::string& what) const {
  XDINO_FAIL_ARG(url, " is not etcd: it answered ", path, " with ", what,
                 "; check --rdzv_endpoint (etcd's client port, 2379 by default)");
}

template <typename Read>
auto EtcdClient::reading(const std::string& path, Read read) const {
  try {
    return read();
  } catch (const NotEtcd& e) {
    not_etcd(urls_[current_member()], path, e.what());
  } catch (const Json::exception& e) {
    not_etcd(urls_[current_member()], path,
             std::string("JSON etcd does not write (") + e.what() + ")");
  }
}

size_t EtcdClient::current_member() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_;
}

std::optional<EtcdValue> EtcdClient::get(const std::string& key, Timeout timeout) {
  const Json j = call("/v3/kv/range", {{"key", base64_encode(key)}}, timeout);
  return reading("/v3/kv/range", [&]() -> std::optional<EtcdValue> {
    const auto kvs = j.find("kvs");
    if (kvs == j.end() || kvs->empty()) return std::nullopt;
    const Json& kv = kvs->at(0);
    EtcdValue v;
    v.value = base64_decode(kv.value("value", std::string()));
    v.mod_revision = int_of(kv, "mod_revision");
    v.lease = int_of(kv, "lease");
    return v;
  });
}

bool EtcdClient::put_if(const std::string& key, int64_t revision, const std::string& value,
                        int64_t lease, Timeout timeout) {
  const std::string k = base64_encode(key);
  Json compare = {{"key", k}, {"result", "EQUAL"}};
  if (revision == 0) {
    compare["target"] = "VERSION";  // version 0: the key does not exist
    compare["version"] = "0";
  } else {
    compare["target"] = "MOD";
    compare["mod_revision"] = std::to_string(revision);
  }
  Json put = {{"key", k}, {"value", base64_encode(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  const Json body = {{"compare", Json::array({compare})},
                     {"success", Json::array({Json{{"request_put", put}}})},
                     {"failure", Json::array()}};
  const Json j = call("/v3/kv/txn", body, timeout);
  return reading("/v3/kv/txn", [&] { return j.value("succeeded", false); });  // absent: false
}

void EtcdClient::put(const std::string& key, const std::string& value, int64_t lease,
                     Timeout timeout) {
  Json body = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  call("/v3/kv/put", body, timeout);
}

int64_t EtcdClient::grant(int64_t ttl_seconds, Timeout timeout) {
  const Json j = call("/v3/lease/grant", {{"TTL", std::to_string(ttl_seconds)}}, timeout);
  return reading("/v3/lease/grant", [&] {
    XDINO_CHECK(j.value("error", std::string()).empty(), where(),
                ": no lease granted: ", j.value("error", std::string()));
    const int64_t id = int_of(j, "ID");
    // etcd always grants an ID (or says why not): an answer without one is not etcd's.
    if (id == 0) throw NotEtcd("a lease grant without an ID: " + short_line(j.dump()));
    return id;
  });
}

int64_t EtcdClient::keep_alive(int64_t lease, Timeout timeout) {
  const Json j = call("/v3/lease/keepalive", {{"ID", std::to_string(lease)}}, timeout);
  return reading("/v3/lease/keepalive", [&]() -> int64_t {
    // An expired or unknown lease still answers 200, without a TTL.
    const auto result = j.find("result");
    if (result == j.end() || !result->is_object()) return 0;
    return std::max<int64_t>(0, int_of(*result, "TTL"));
  });
}

void EtcdClient::revoke(int64_t lease, Timeout timeout) {
  try {
    call("/v3/lease/revoke", {{"ID", std::to_string(lease)}}, timeout);
  } catch (const EtcdUnavailable&) {
    throw;
  } catch (const Error& e) {
    // "requested lease not found": expired already, which is what revoking wants.
    if (std::string(e.what()).find("not found") == std::string::npos) throw;
  }
}

std::string base64_encode(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k)
      v = (v << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? alphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

std::string base64_decode(const std::string& text) {
  const auto value = [&](char ch) -> int {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
  };
  XDINO_CHECK(text.size() % 4 == 0, "not base64 (length ", text.size(), " is not a multiple of 4)");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char ch = text[i + k];
      const bool last_group = i + 4 == text.size();
      if (ch == '=' && last_group && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
        continue;
      }
      const int d = value(ch);
      XDINO_CHECK(d >= 0 && pad == 0, "not base64 (character ", static_cast<int>(ch), " at ", i + k,
                  ")");
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    for (int k = 0; k < 3 - pad; ++k) out += static_cast<char>((v >> (16 - 8 * k)) & 255);
  }
  return out;
}

}  // namespace xdino::distributed
