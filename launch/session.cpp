#include "launch/session.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/blas.h"
#include "core/ini.h"
#include "core/log.h"
#include "distributed/launcher_env.h"

namespace xdino::launch {

Session start_session(const distributed::DistOptions& options, const std::string& device) {
  Session s;
  s.config = distributed::dist_config_from_env(options);
  if (device == "cpu") s.config.device = torch::kCPU;
  const distributed::DistConfig& c = s.config;
  // Processes sharing a node would otherwise each start one thread per core.
  if (c.local_world_size > 1 && std::getenv("OMP_NUM_THREADS") == nullptr)
    at::set_num_threads(std::max<int>(
        1, static_cast<int>(std::thread::hardware_concurrency()) / c.local_world_size));
  log::set_rank(c.rank, c.world_size);
  s.comm = distributed::connect(c);
  s.device = c.device;
  log::info(blas_summary(), "; ", at::get_num_threads(), " intra-op threads");
  if (c.world_size > 1)
    log::info("process ", c.rank, " of ", c.world_size, " (", c.launcher, "), device ",
              s.device.str());
  return s;
}

int64_t auto_replicas(const Session& session, int64_t batch_size_per_process) {
  if (!session.device.is_cpu() || batch_size_per_process < 1) return 1;
  int64_t cores = 0;
  if (const char* env = std::getenv("OMP_NUM_THREADS")) cores = std::atoll(env);
  if (cores < 1)
    cores = static_cast<int64_t>(std::thread::hardware_concurrency()) /
            std::max(1, session.config.local_world_size);
  int64_t replicas = std::clamp<int64_t>(cores, 1, batch_size_per_process);
  while (batch_size_per_process % replicas != 0) --replicas;
  return replicas;
}

namespace {

// The command whose record `ini` is: the name of its first section ("[knn:dino]" -> "knn"),
// "" when there is none or it does not read as INI (not a file Flags::to_ini wrote).
std::string recorded_command(const std::filesystem::path& ini) {
  try {
    const std::string section = read_ini(ini).section_of_first();
    return section.substr(0, section.find(':'));
  } catch (const UsageError&) {
    return "";
  }
}

}  // namespace

std::string config_record(const Flags& flags, const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path folder = dir.empty() ? fs::path(".") : fs::path(dir);
  const fs::path ini = folder / "config.ini";
  std::error_code ec;
  if (!fs::exists(ini, ec) || recorded_command(ini) == flags.command()) return ini.string();
  return (folder / ("config." + flags.command() + ".ini")).string();
}

void write_config(const Flags& flags, const std::string& file, const Communicator& comm) {
  if (!comm.is_main()) return;
  const std::filesystem::path path(file);
  if (!path.parent_path().empty()) std::filesystem::create_directories(path.parent_path());
  write_file_atomically(path, flags.to_ini());
}

int run_in_session(const Flags& flags, const distributed::DistOptions& options,
                   const std::string& config_file, const SessionBody& body) {
  Session s = start_session(options);
  bool written = false;
  const std::function<void()> checks_passed = [&] {
    if (written || config_file.empty()) return;
    // Decided now, not when the command started: what the folder holds at this moment.
    write_config(flags, config_file, *s.comm);
    written = true;
  };
  body(*s.comm, s.device, checks_passed);
  s.comm->finalize();
  return 0;
}

}  // namespace xdino::launch
