#include "ssl/checkpoint_files.h"

#include <cstdio>

#include "core/atomic_file.h"
#include "core/log.h"
#include "core/pth.h"

namespace xdino::ssl {
namespace fs = std::filesystem;

void save_checkpoint(const fs::path& dir, const CheckpointParts& parts,
                     const TrainOptions& options, int64_t next_epoch, int64_t next_iteration,
                     int64_t iterations_per_epoch, const EpochMeters& meters, Communicator& comm,
                     const torch::Device& device) {
  const TrainingState state = TrainingState::capture(next_epoch, next_iteration,
                                                     iterations_per_epoch, meters, comm, device);
  if (!comm.is_main()) return;
  save_pth(dir / "checkpoint.pth", make_checkpoint(parts, options, state));
}

TrainingState::Position resume_checkpoint(const fs::path& dir, const CheckpointParts& parts,
                                          int64_t iterations_per_epoch, Communicator& comm,
                                          const torch::Device& device, EpochMeters& meters) {
  const fs::path path = dir / "checkpoint.pth";
  if (!fs::exists(path)) return {};
  log::info("Found checkpoint at ", path.string());
  const TrainingState state = restore_checkpoint(load_pth(path), parts, path.string());
  return state.resume_position(iterations_per_epoch, comm, device, meters);
}

void keep_numbered_checkpoint(const fs::path& dir, int64_t epoch) {
  char name[32];
  std::snprintf(name, sizeof name, "checkpoint%04ld.pth", static_cast<long>(epoch));
  write_atomically(dir / name, [&](const fs::path& tmp) {
    fs::copy_file(dir / "checkpoint.pth", tmp, fs::copy_options::overwrite_existing);
  });
}

}  // namespace xdino::ssl
