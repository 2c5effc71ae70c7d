// `dino launch --nproc_per_node N [--nnodes M --node_rank R] [--master_addr A --master_port P |
// --rdzv_endpoint HOST[:PORT]] [--rdzv_id ID --rdzv_conf k=v,...] [--max_restarts K
// --rdzv_timeout S] [--] <subcommand ...>`: this node's processes, like torchrun, on one node or
// on each of M. The flags are torchrun's, with underscores or hyphens (and
// torch.distributed.launch's --use_env, a no-op: the rank always travels in the environment);
// --nproc is our older spelling of --nproc_per_node. The rendezvous is
// distributed/rendezvous/node_rendezvous.h's: --rdzv_backend c10d (or static, the same) keeps it in
// a store node 0's launcher serves; --rdzv_backend etcd (or torchrun's etcd-v2) in an etcd cluster,
// --rdzv_endpoint naming its members (host:2379,host2:2379,...).
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <utility>

#include "core/check.h"
#include "core/log.h"
#include "core/paths.h"
#include "distributed/rendezvous/endpoint.h"
#include "launch/command.h"
#include "launch/local_launcher.h"

namespace xdino::launch {
namespace {

// A timeout's seconds: a finite number in (0, kMaxSeconds] ("inf" or 1e300 would overflow the
// milliseconds it becomes).
double seconds_of(const std::string& what, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  XDINO_CHECK_ARG(end != value.c_str() && *end == '\0' && std::isfinite(v) && v > 0 &&
                      v <= distributed::kMaxSeconds,
                  what, "=", value, ": expected a number of seconds in (0, ",
                  distributed::kMaxSeconds, "]");
  return v;
}

// torchrun's --rdzv_conf "key=value,...": the keys its c10d rendezvous reads, and for etcd the
// TLS keys of its etcd backends (both spellings) and a user/password, each where it maps here
// (node_rendezvous.h, distributed/rendezvous/etcd.h); any other key, or one of the other backend,
// is refused by name. The etcd password where a command line does not show it: a file's first line,
// or this variable (read when --rdzv_conf names no password).
constexpr const char* kPasswordVariable = "XDINO_RDZV_PASSWORD";

std::string password_from_file(const std::string& path) {
  const std::string problem = file_problem(path);
  XDINO_CHECK_ARG(problem.empty(), "--rdzv_conf password_file ", quote(path), " ", problem);
  std::ifstream in(path);
  std::string line;
  XDINO_CHECK_ARG(std::getline(in, line) && !line.empty(), "--rdzv_conf password_file ",
                  quote(path), " holds no password on its first line");
  if (line.back() == '\r') line.pop_back();
  return line;
}

void apply_rdzv_conf(const std::string& conf, distributed::NodeRendezvousOptions& r) {
  const bool etcd = r.backend == distributed::RendezvousBackend::kEtcd;
  const auto etcd_only = [&](const std::string& key) {
    XDINO_CHECK_ARG(etcd, "--rdzv_conf ", key, " is for --rdzv_backend etcd");
  };
  size_t start = 0;
  bool password_on_command_line = false;
  std::string previous;  // the key before this item
  while (start < conf.size()) {
    const size_t comma = std::min(conf.find(',', start), conf.size());
    const std::string item = conf.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    // After a password, an item without '=' is the rest of it, cut at a ','. Never print it.
    XDINO_CHECK_ARG(eq != std::string::npos || previous != "password",
                    "--rdzv_conf: the item after password= is not key=value (a password cannot "
                    "hold ','): give it in password_file=FILE or the environment variable ",
                    kPasswordVariable);
    XDINO_CHECK_ARG(eq != std::string::npos, "--rdzv_conf ", quote(item), " is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    previous = key;
    const std::string what = "--rdzv_conf " + key;
    if (key == "join_timeout") {
      r.join_timeout = seconds_of(what, value);
    } else if (key == "last_call_timeout") {
      r.last_call_timeout = seconds_of(what, value);
    } else if (key == "close_timeout") {
      r.close_timeout = seconds_of(what, value);
    } else if (key == "read_timeout") {
      r.read_timeout = seconds_of(what, value);
    } else if (key == "heartbeat_timeout") {
      r.heartbeat_timeout = seconds_of(what, value);
    } else if (key == "keep_alive_interval") {
      r.keep_alive_interval = seconds_of(what, value);
    } else if (key == "keep_alive_max_attempt") {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      XDINO_CHECK_ARG(end != value.c_str() && *end == '\0' && v >= 1 && v <= 1000000, what, "=",
                      value, ": expected a whole number in [1, 1000000]");
      r.keep_alive_max_attempt = static_cast<int64_t>(v);
    } else if (key == "protocol") {
      etcd_only(key);
      XDINO_CHECK_ARG(value == "http" || value == "https", what, "=", value,
                      ": expected http or https");
      r.etcd.protocol = value;
    } else if (key == "ca_cert" || key == "cacert") {
      etcd_only(key);
      r.etcd.ca_cert = value;
    } else if (key == "ssl_cert" || key == "cert") {
      etcd_only(key);
      r.etcd.cert = value;
    } else if (key == "ssl_cert_key" || key == "key") {
      etcd_only(key);
      r.etcd.key = value;
    } else if (key == "user" || key == "username") {
      etcd_only(key);
      r.etcd.user = value;
    } else if (key == "password") {
      etcd_only(key);
      // Every process's command line shows it (ps, /proc/<pid>/cmdline): said once all is
      // parsed, so that a refused --rdzv_conf stays one line.
      password_on_command_line = true;
      r.etcd.password = value;
    } else if (key == "password_file") {
      etcd_only(key);
      r.etcd.password = password_from_file(value);
    } else if (key == "is_host") {
      XDINO_CHECK_ARG(!etcd, "--rdzv_conf is_host: with etcd no launcher serves the store");
      XDINO_CHECK_ARG(value == "true" || value == "false" || value == "1" || value == "0", what,
                      "=", value, ": expected true or false");
      r.is_host = value == "true" || value == "1";
    } else if (key == "store_type") {
      XDINO_CHECK_ARG(!etcd, "--rdzv_conf store_type: with etcd the store is the cluster");
      XDINO_CHECK_ARG(value == "tcp", what, "=", value,
                      ": only tcp (node 0's launcher serves the store)");
    } else if (key == "timeout") {
      XDINO_FAIL_ARG(
          "--rdzv_conf timeout: torchrun's c10d rendezvous does not read it either "
          "(it is the old etcd backend's key); give join_timeout");
    } else {
      XDINO_FAIL_ARG("--rdzv_conf: unknown key ", quote(key),
                     "; known: join_timeout, last_call_timeout, close_timeout, read_timeout, "
                     "heartbeat_timeout, keep_alive_interval, keep_alive_max_attempt, is_host, "
                     "store_type; with etcd also protocol, ca_cert, ssl_cert, ssl_cert_key, "
                     "user, password, password_file");
    }
  }
  if (password_on_command_line)
    log::warn(
        "--rdzv_conf password= shows in this process's command line; prefer "
        "password_file=FILE or the environment variable ",
        kPasswordVariable);
  if (const char* env = std::getenv(kPasswordVariable);
      etcd && r.etcd.password.empty() && env != nullptr && *env != '\0')
    r.etcd.password = env;
}

// What this machine can run side by side: its cores, or its GPUs where it has more.
int64_t slots_of_this_machine() {
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::max<int64_t>(cores, torch::cuda::device_count());
}

// "N" or torchrun's "MIN:MAX" with MIN == MAX.
int64_t parse_nnodes(const std::string& s) {
  const size_t colon = s.find(':');
  const auto number = [&](const std::string& part) {
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    XDINO_CHECK_ARG(end != part.c_str() && *end == '\0' && v >= 1 && v <= 100000, "--nnodes '", s,
                    "': expected N or MIN:MAX, positive whole numbers");
    return static_cast<int64_t>(v);
  };
  if (colon == std::string::npos) return number(s);
  const int64_t lo = number(s.substr(0, colon)), hi = number(s.substr(colon + 1));
  XDINO_CHECK_ARG(lo == hi, "--nnodes ", s,
                  ": elastic sizes are not supported. A run's global batch, and with it the "
                  "learning rate and the schedules, follow from its world size, so every round "
                  "has the same nodes; give --nnodes N");
  return lo;
}

class LaunchCommand : public Command {
 public:
  void declare(Flags& f) override {
    auto& r = opt_.rendezvous;
    f.add("nproc_per_node", &opt_.nproc, "processes to start on this machine")
        .alias("nproc", "nproc_per_node")
        .alias("nproc-per-node", "nproc_per_node")
        .add("nnodes", &nnodes_,
             "machines of the run, each running this command (N, or torchrun's N:N; elastic "
             "sizes are not supported)")
        .add("node_rank", &r.node_rank,
             "this machine's index in [0, nnodes): its ranks are node_rank * nproc + "
             "0..nproc-1 (-1: the rendezvous gives one, the store's host first)")
        .alias("node-rank", "node_rank")
        .add("master_addr", &master_addr_,
             "host of the rendezvous store, node 0's launcher (as the other nodes reach it)")
        .alias("master-addr", "master_addr")
        .add("master_port", &master_port_,
             "port of the rendezvous store (0: a free one; with --nnodes > 1: required)")
        .alias("master-port", "master_port")
        .add("rdzv_endpoint", &endpoint_,
             "torchrun's HOST[:PORT] of the rendezvous store (port 29400 if none), instead of "
             "--master_addr/--master_port; the launcher on that machine serves it. With "
             "--rdzv_backend etcd: the cluster's members, HOST[:PORT],... (port 2379 if none)")
        .alias("rdzv-endpoint", "rdzv_endpoint")
        .add("rdzv_backend", &backend_,
             "c10d or static: a store node 0's launcher serves; etcd (or etcd-v2): an etcd "
             "cluster, so that any host, node 0's included, can die and come back")
        .alias("rdzv-backend", "rdzv_backend")
        .add("rdzv_id", &r.run_id, "the run's name in the store: the same on every node")
        .alias("rdzv-id", "rdzv_id")
        .add("rdzv_conf", &conf_,
             "torchrun's key=value,...: join_timeout, last_call_timeout (nothing to wait for "
             "with fixed sizes), close_timeout, read_timeout, heartbeat_timeout, "
             "keep_alive_interval, keep_alive_max_attempt (dead after interval x attempts), "
             "is_host, store_type=tcp; with etcd: protocol, ca_cert, ssl_cert, ssl_cert_key, "
             "user, password (or password_file=FILE, or XDINO_RDZV_PASSWORD in the "
             "environment: a command line shows to every user of the host)")
        .alias("rdzv-conf", "rdzv_conf")
        .add("local_addr", &r.local_addr,
             "how the other nodes reach this machine (its host name if empty)")
        .alias("local-addr", "local_addr")
        .add_switch("standalone", &standalone_,
                    "torchrun's single-node mode: a rendezvous on this machine (the default "
                    "with --nnodes 1)")
        .add("grace_seconds", &opt_.grace_seconds,
             "after one process fails, how long the others get to exit on their own")
        .add("max_restarts", &opt_.max_restarts,
             "when a process fails or a peer is lost, start this node's processes again up to "
             "this many times; they resume from the last checkpoint (torchrun's flag)")
        .alias("max-restarts", "max_restarts")
        .add("rdzv_timeout", &r.join_timeout,
             "seconds a rendezvous has to form, the nodes' and then the processes', before the "
             "launcher gives up (torchrun's --rdzv_conf join_timeout)")
        .alias("rdzv-timeout", "rdzv_timeout")
        .add_switch("oversubscribe", &oversubscribe_,
                    "start more processes than this machine has cores or GPUs (refused "
                    "otherwise: --nproc_per_node is usually a typo then)")
        .add_switch("use_env", &use_env_,
                    "ignored (torch.distributed.launch's): the processes always read their rank "
                    "from the environment");
    f.allow_trailing();
  }

  int run(const Flags& f) override {
    auto& r = opt_.rendezvous;
    r.nnodes = parse_nnodes(nnodes_);
    r.backend = distributed::parse_rendezvous_backend(backend_);
    XDINO_CHECK_ARG(!standalone_ || r.nnodes == 1, "--standalone runs one node; drop --nnodes ",
                    nnodes_);
    XDINO_CHECK_ARG(r.node_rank >= -1 && r.node_rank < r.nnodes,
                    "--node_rank must be in [0, --nnodes), got ", r.node_rank, " of ", r.nnodes);
    const bool master_given = f.is_set("master_addr") || f.is_set("master_port");
    XDINO_CHECK_ARG(endpoint_.empty() || !master_given,
                    "--rdzv_endpoint and --master_addr/--master_port both name the rendezvous "
                    "store; give one");
    if (r.backend == distributed::RendezvousBackend::kEtcd) {
      XDINO_CHECK_ARG(!endpoint_.empty() && !master_given,
                      "--rdzv_backend etcd needs --rdzv_endpoint HOST:PORT,HOST:PORT,... (the "
                      "cluster's client URLs), not --master_addr/--master_port");
      r.etcd.endpoints.clear();
      for (size_t start = 0; start <= endpoint_.size();) {
        const size_t comma = std::min(endpoint_.find(',', start), endpoint_.size());
        if (comma > start) r.etcd.endpoints.push_back(endpoint_.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (!endpoint_.empty()) {
      // torchrun's HOST[:PORT], an IPv6 address in brackets ([::1]:29400); port 29400 if none.
      const auto hp = distributed::parse_host_port(endpoint_, 29400, "--rdzv_endpoint");
      r.endpoint_host = hp.host;
      r.endpoint_port = hp.port;
    } else {
      r.endpoint_host = master_addr_;
      r.endpoint_port = static_cast<int>(master_port_);
      XDINO_CHECK_ARG(master_port_ >= 0 && master_port_ < 65536, "--master_port ", master_port_,
                      " is not a TCP port");
      if (r.nnodes > 1) {
        XDINO_CHECK_ARG(master_port_ > 0, "--nnodes ", r.nnodes,
                        " needs --master_port (or --rdzv_endpoint): every node's launcher must "
                        "name the same port of node 0's host");
        XDINO_CHECK_ARG(f.is_set("master_addr"), "--nnodes ", r.nnodes,
                        " needs --master_addr (or --rdzv_endpoint): the address of node 0 that "
                        "the other nodes reach (not ",
                        master_addr_, ")");
      }
    }
    apply_rdzv_conf(conf_, r);
    XDINO_CHECK_ARG(std::isfinite(r.join_timeout) && r.join_timeout > 0 &&
                        r.join_timeout <= distributed::kMaxSeconds,
                    "--rdzv_timeout must be a number of seconds in (0, ", distributed::kMaxSeconds,
                    "], got ", r.join_timeout);
    XDINO_CHECK_ARG(std::isfinite(opt_.grace_seconds) && opt_.grace_seconds >= 0 &&
                        opt_.grace_seconds <= distributed::kMaxSeconds,
                    "--grace_seconds must be a number of seconds in [0, ", distributed::kMaxSeconds,
                    "], got ", opt_.grace_seconds);
    const int64_t slots = slots_of_this_machine();
    XDINO_CHECK_ARG(opt_.nproc <= slots || oversubscribe_, "--nproc_per_node ", opt_.nproc,
                    " is more than this machine runs side by side (", slots,
                    " cores or GPUs); give --oversubscribe to start them anyway");
    return launch_local(opt_, f.trailing());
  }

 private:
  LocalLaunchOptions opt_;
  std::string nnodes_ = "1";
  std::string master_addr_ = "127.0.0.1";
  int64_t master_port_ = 0;
  std::string endpoint_;
  std::string backend_ = "static";  // torchrun's default
  std::string conf_;
  bool standalone_ = false;
  bool oversubscribe_ = false;
  bool use_env_ = false;
};

}  // namespace

std::unique_ptr<Command> make_launch_command() { return std::make_unique<LaunchCommand>(); }

}  // namespace xdino::launch
