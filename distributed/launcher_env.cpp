#include "distributed/launcher_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"

namespace xdino::distributed {
namespace {

int int_var(const EnvLookup& env, const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  XDINO_CHECK_ARG(*end == '\0' && x >= 0 && x < (1L << 30), "environment variable ", name, "='", v,
                  "' is not a non-negative integer");
  return static_cast<int>(x);
}

std::string str_var(const EnvLookup& env, const char* name, const std::string& fallback) {
  const char* v = env(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets.
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == ',' && depth == 0) break;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    entry += c;
  }
  // Each bracket group contributes its first item: "rack[1-2]-n[07,9]" -> "rack1-n07".
  std::string host;
  for (size_t i = 0; i < entry.size();) {
    if (entry[i] != '[') {
      host += entry[i++];
      continue;
    }
    const size_t close = entry.find(']', i);
    XDINO_CHECK_ARG(close != std::string::npos, "malformed SLURM node list '", nodelist, "'");
    const std::string group = entry.substr(i + 1, close - i - 1);
    host += group.substr(0, group.find_first_of(",-"));
    i = close + 1;
  }
  return host;
}

DistConfig dist_config_from_env(const EnvLookup& env) {
  DistConfig c;
  if (env("RANK") != nullptr && env("WORLD_SIZE") != nullptr) {
    c.launcher = "torchrun";
    c.rank = int_var(env, "RANK", 0);
    c.world_size = int_var(env, "WORLD_SIZE", 1);
    c.local_rank = int_var(env, "LOCAL_RANK", 0);
    c.local_world_size = int_var(env, "LOCAL_WORLD_SIZE", c.world_size);
    c.master_addr = str_var(env, "MASTER_ADDR", "127.0.0.1");
    c.master_port = int_var(env, "MASTER_PORT", 29500);
    if (env(kRoundVariable) != nullptr) c.round = int_var(env, kRoundVariable, 0);
    // torchrun's spelling: "True" or "1" (its agent serves the workers' store).
    const std::string agent = str_var(env, "TORCHELASTIC_USE_AGENT_STORE", "");
    c.agent_store = agent == "True" || agent == "true" || agent == "1";
    // torchrun's agent store lives across restarts: each attempt writes under its own prefix,
    // as torch.distributed's workers do (docs/distributed.md, "Under torchrun"). `dino launch`
    // (XDINO_RDZV_ROUND set) serves a new store every round, and its launchers' restart counts
    // differ once a host has come back (a new launcher counts from 0): no prefix there, or the
    // returning node's workers would wait under another attempt's keys.
    if (c.agent_store && c.round < 0)
      c.store_prefix =
          "/worker/attempt_" + std::to_string(int_var(env, "TORCHELASTIC_RESTART_COUNT", 0));
  } else if (env("SLURM_PROCID") != nullptr) {
    c.launcher = "slurm";
    c.rank = int_var(env, "SLURM_PROCID", 0);
    c.world_size = int_var(env, "SLURM_NTASKS", 1);
    c.local_rank = int_var(env, "SLURM_LOCALID", 0);
    // "8" or "8(x2)": the count before any parenthesis.
    c.local_world_size = std::atoi(str_var(env, "SLURM_NTASKS_PER_NODE", "1").c_str());
    c.local_world_size = std::max(1, c.local_world_size);
    std::string nodes = str_var(env, "SLURM_JOB_NODELIST", str_var(env, "SLURM_NODELIST", ""));
    c.master_addr =
        str_var(env, "MASTER_ADDR", nodes.empty() ? "127.0.0.1" : first_slurm_host(nodes));
    c.master_port = int_var(env, "MASTER_PORT", 20000 + int_var(env, "SLURM_JOB_ID", 9500) % 20000);
  } else if (env("OMPI_COMM_WORLD_RANK") != nullptr) {
    c.launcher = "mpi";
    c.rank = int_var(env, "OMPI_COMM_WORLD_RANK", 0);
    c.world_size = int_var(env, "OMPI_COMM_WORLD_SIZE", 1);
    c.local_rank = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    c.local_world_size = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE", c.world_size);
    const char* addr = env("MASTER_ADDR");
    XDINO_CHECK_ARG(addr != nullptr || c.local_world_size == c.world_size,
                    "mpirun across nodes: set MASTER_ADDR to rank 0's host (mpirun -x "
                    "MASTER_ADDR=<host> ...)");
    c.master_addr = str_var(env, "MASTER_ADDR", "127.0.0.1");
    c.master_port = int_var(env, "MASTER_PORT", 29500);
  }
  XDINO_CHECK_ARG(c.world_size >= 1 && c.rank < c.world_size, "rank ", c.rank,
                  " is not below the world size ", c.world_size, " (", c.launcher, " environment)");
  XDINO_CHECK_ARG(c.master_port > 0 && c.master_port < 65536, "MASTER_PORT ", c.master_port,
                  " is not a TCP port");
  if (compat::cuda_available()) c.device = torch::Device(torch::kCUDA, c.local_rank);
  return c;
}

DistConfig dist_config_from_env() {
  return dist_config_from_env([](const char* name) { return std::getenv(name); });
}

DistConfig dist_config_from_env(const DistOptions& o) {
  XDINO_CHECK_ARG(o.dist_timeout > 0, "--dist_timeout must be positive (seconds), got ",
                  o.dist_timeout);
  XDINO_CHECK_ARG(o.dist_url == "env://", "--dist_url ", o.dist_url,
                  " is not supported: only env:// (torchrun, SLURM or MPI variables)");
  XDINO_CHECK_ARG(o.dist_heartbeat_timeout > 0,
                  "--dist_heartbeat_timeout must be positive (seconds), got ",
                  o.dist_heartbeat_timeout);
  DistConfig c = dist_config_from_env();
  c.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(o.dist_timeout * 1000)));
  c.heartbeat_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::ceil(o.dist_heartbeat_timeout * 1000)));
  return c;
}

namespace {
int g_launcher_fd = -1;  // the launcher's pipe, once tell_launcher_joined() has read it
}  // namespace

void tell_launcher_joined() {
  const char* text = std::getenv(kReadyFdVariable);
  if (text == nullptr) return;
  char* end = nullptr;
  const long fd = std::strtol(text, &end, 10);
  unsetenv(kReadyFdVariable);
  if (end == text || *end != '\0' || fd <= 2) return;
  g_launcher_fd = static_cast<int>(fd);
  const char byte = 'J';
  if (write(g_launcher_fd, &byte, 1) != 1)
    log::warn("could not tell the launcher that the rendezvous formed: ", std::strerror(errno));
}

void tell_launcher_stopped(bool own_signal) {
  if (g_launcher_fd < 0) return;
  const char byte = own_signal ? 'T' : 'S';
  if (write(g_launcher_fd, &byte, 1) != 1)
    log::warn("could not tell the launcher that this process stopped: ", std::strerror(errno));
}

}  // namespace xdino::distributed
