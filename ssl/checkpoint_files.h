// A DINO run's checkpoint files in its output directory: checkpoint.pth, which a stop or the
// end of an epoch writes and a restart resumes from, and its numbered copies
// checkpointNNNN.pth. The dict inside is ssl/checkpoint.h's layout; what a resume restores
// beyond the modules is ssl/training_state.h's TrainingState. The trainer calls these; they
// know nothing of its loop.
//
// Contract:
//  - save_checkpoint(dir, parts, options, next_epoch, next_iteration, ..., log_line) is
//    collective (every process calls it, in step): TrainingState::capture gathers every
//    rank's generators and the epoch statistics `meters`, then rank 0 alone writes
//    dir/checkpoint.pth atomically (core/pth.h) with `log_line`, log.txt's line of the last
//    completed epoch. Other ranks return after the capture.
//  - resume_checkpoint(dir, parts, ..., log_line) returns {0, 0} and touches nothing when
//    dir/checkpoint.pth does not exist. Otherwise (collective too) it loads the file into
//    `parts` (restore_checkpoint), sets `log_line` from it and returns
//    TrainingState::resume_position(...): the (epoch, batch) to continue from, with this
//    rank's generators and, on rank 0 mid-epoch, `meters` restored. Load errors throw as
//    restore_checkpoint and load_pth do. Rank 0 first removes the temporary files of writers
//    that were killed (core/atomic_file.h).
//  - write_epoch_files(dir, epoch, saveckp_freq, log_line, resuming) writes what follows from
//    dir/checkpoint.pth at the end of `epoch`: its numbered copy
//    dir/checkpoint<epoch, 4 digits>.pth (when saveckp_freq divides epoch) and `log_line`
//    appended to dir/log.txt, both atomically; rank 0 only, after save_checkpoint. With
//    `resuming` it writes only what is missing: a run killed between replacing
//    checkpoint.pth and these writes left them out, and both follow from the checkpoint.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <string>

#include "distributed/communicator.h"
#include "ssl/checkpoint.h"
#include "ssl/dino_options.h"
#include "ssl/metrics.h"
#include "ssl/training_state.h"

namespace xdino::ssl {

void save_checkpoint(const std::filesystem::path& dir, const CheckpointParts& parts,
                     const DinoOptions& options, int64_t next_epoch, int64_t next_iteration,
                     int64_t iterations_per_epoch, const EpochMeters& meters, Communicator& comm,
                     const torch::Device& device, const std::string& log_line);

TrainingState::Position resume_checkpoint(const std::filesystem::path& dir,
                                          const CheckpointParts& parts,
                                          int64_t iterations_per_epoch, Communicator& comm,
                                          const torch::Device& device, EpochMeters& meters,
                                          std::string& log_line);

void write_epoch_files(const std::filesystem::path& dir, int64_t epoch, int64_t saveckp_freq,
                       const std::string& log_line, bool resuming);

}  // namespace xdino::ssl
