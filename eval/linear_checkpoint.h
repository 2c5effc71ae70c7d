// checkpoint.pth of the linear probe, in eval_linear.py's layout, so Python's torch.load and
// the official restart code read it, and official linear-weight files load here.
//
// Contract:
//  - save_linear_checkpoint() writes atomically {epoch: next epoch, state_dict:
//    {module.linear.weight [labels, dim], module.linear.bias [labels]}, optimizer:
//    torch.optim.SGD state_dict (param_groups with initial_lr, as a scheduler leaves it),
//    scheduler: CosineAnnealingLR state_dict (T_max, eta_min, base_lrs, last_epoch,
//    _step_count, verbose, _get_lr_called_within_step, _last_lr), best_acc}, plus our keys
//    best_epoch, best_acc5 (NaN: unknown), protocol and features (what the probe was trained
//    on: LinearCheckpointInfo::features). Tensors are saved from the CPU.
//  - load_linear_weights() copies a state_dict's linear weight and bias into the classifier,
//    from any of: our/official checkpoint ({state_dict: ...}), or a bare state dict; key
//    prefixes "module." are accepted or not. Shape mismatches throw xdino::Error naming both.
//  - restore_linear_checkpoint() additionally restores the optimizer state and returns the
//    epoch to start from and the best so far.
//  - linear_checkpoint_features() returns the file's "features" entry, "" when it has none
//    (eval_linear.py's files, ours before it was written).
#pragma once

#include <filesystem>
#include <string>

#include "eval/linear.h"
#include "train/optim.h"

namespace xdino::eval {

struct LinearCheckpointInfo {
  int64_t epochs = 100;  // T_max of the schedule
  double base_lr = 0.0;  // the scaled lr of epoch 0
  std::string protocol;
  // The features the probe learns from: the backbone (arch, weights file by size and CRC-32,
  // checkpoint key, block and pooling choice) or the --load_features file. A rerun on other
  // features must not resume this probe (eval/linear_eval.cpp).
  std::string features;
};

void save_linear_checkpoint(const std::filesystem::path& path, LinearClassifier& classifier,
                            const train::Optimizer& optimizer, int64_t next_epoch,
                            const LinearOutcome& best, const LinearCheckpointInfo& info);

void load_linear_weights(const std::filesystem::path& path, LinearClassifier& classifier);

// Returns the epoch to resume from; `best` receives best_acc (and best_epoch/best_acc5 when
// the file has them).
int64_t restore_linear_checkpoint(const std::filesystem::path& path, LinearClassifier& classifier,
                                  train::Optimizer& optimizer, LinearOutcome& best);

std::string linear_checkpoint_features(const std::filesystem::path& path);

}  // namespace xdino::eval
