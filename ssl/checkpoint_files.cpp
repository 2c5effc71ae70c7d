#include "ssl/checkpoint_files.h"

#include <cstdio>

#include "core/atomic_file.h"
#include "core/log.h"
#include "core/pth.h"

namespace xdino::ssl {
namespace fs = std::filesystem;

void save_checkpoint(const fs::path& dir, const CheckpointParts& parts, const DinoOptions& options,
                     int64_t next_epoch, int64_t next_iteration, int64_t iterations_per_epoch,
                     const EpochMeters& meters, Communicator& comm, const torch::Device& device,
                     const std::string& log_line) {
  TrainingState state = TrainingState::capture(next_epoch, next_iteration, iterations_per_epoch,
                                               meters, comm, device);
  state.log_line = log_line;
  if (!comm.is_main()) return;
  save_pth(dir / "checkpoint.pth", make_checkpoint(parts, options, state));
}

TrainingState::Position resume_checkpoint(const fs::path& dir, const CheckpointParts& parts,
                                          int64_t iterations_per_epoch, Communicator& comm,
                                          const torch::Device& device, EpochMeters& meters,
                                          std::string& log_line) {
  const fs::path path = dir / "checkpoint.pth";
  if (comm.is_main() && fs::is_directory(dir)) remove_stale_temporaries(dir);
  if (!fs::exists(path)) return {};
  log::info("Found checkpoint at ", path.string());
  const TrainingState state = restore_checkpoint(load_pth(path), parts, path.string());
  log_line = state.log_line;
  return state.resume_position(iterations_per_epoch, comm, device, meters);
}

void write_epoch_files(const fs::path& dir, int64_t epoch, int64_t saveckp_freq,
                       const std::string& log_line, bool resuming) {
  char name[32];
  std::snprintf(name, sizeof name, "checkpoint%04ld.pth", static_cast<long>(epoch));
  const fs::path numbered = dir / name;
  if (saveckp_freq > 0 && epoch % saveckp_freq == 0 && !(resuming && fs::exists(numbered))) {
    if (resuming) log::info("Writing ", numbered.string(), ", which the interrupted run did not");
    copy_file_atomically(dir / "checkpoint.pth", numbered);
  }
  if (log_line.empty()) return;
  const fs::path log_path = dir / "log.txt";
  std::string text = fs::exists(log_path) ? read_file(log_path) : std::string();
  if (resuming) {
    if (text.find(log_line + "\n") != std::string::npos) return;
    log::info("Adding epoch ", epoch, "'s line to ", log_path.string(),
              ", which the interrupted run did not write");
  }
  if (!text.empty() && text.back() != '\n') text += '\n';
  write_file_atomically(log_path, text + log_line + "\n");
}

}  // namespace xdino::ssl
