// The learning monitor of `dino train --knn_every N` (docs/dino.md, "Watching it learn"): the
// online k-NN of eval/online_knn.h and curves.png (eval/curves.h), wired into the trainer's
// end-of-epoch callbacks (ssl::EpochCallbacks, ssl/trainer.h).
//
// In launch/ because it is the one tier that may see both sides: eval/ never links ssl/
// (docs/architecture.md, "Tiers"), and ssl/ knows nothing of evaluations, so the trainer
// offers callbacks and this class fills them.
//
// Contract:
//  - MonitorOptions are the monitor's flags (ours). knn_every is here, not in
//    ssl::DinoOptions: the monitor owns its "when" (measure after epoch e when (e + 1) is a
//    multiple of knn_every, and after the last epoch; 0: never). The trainer calls
//    EpochCallbacks::measure after every epoch and does not read it, the measurement does not
//    change the training (same trajectory with and without), and ssl/ must not know that a
//    k-NN exists.
//  - LearningMonitor(o, m, comm, device) checks knn_every >= 0 (xdino::UsageError) and, when
//    it is > 0, opens the labelled subsets (eval::OnlineKnn::open; none for unlabelled data).
//  - measure_reference(teacher): before a run that starts from scratch (no checkpoint.pth),
//    the initial teacher, a copy of it with the BatchNorm statistics of the train subset
//    (eval::OnlineKnn::measure_with_data_batch_norm: the reference for learning,
//    docs/evaluation.md) and raw pixels on the same subsets, into knn_reference.json (rank
//    0): knn_top1_random, knn_top1_random_bn (null when the backbone has no BatchNorm: the
//    log says so, and knn_top1_random is that reference), knn_top1_pixels, k, knn_train,
//    knn_val. The teacher is only read (the trainer's run is the same with and without it).
//  - callbacks(): `measure` adds knn_top1/knn_top5/knn_train/knn_val to the epoch's log.txt
//    line when it measures (every process calls it); `logged` redraws curves.png on rank 0.
//    The callbacks hold `this`: the monitor must outlive the trainer's train().
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "eval/online_knn.h"
#include "models/backbone.h"
#include "models/registry.h"
#include "ssl/dino_options.h"
#include "ssl/trainer.h"

namespace xdino::launch {

struct MonitorOptions {
  int64_t knn_every = 0;
  int64_t knn_train_samples = 5000;
  int64_t knn_val_samples = 1000;
  std::string knn_data_path;  // "": --data_path
  bool tensorboard = true;    // event files beside log.txt (launch/training_board.h)
};

class LearningMonitor {
 public:
  LearningMonitor(const ssl::DinoOptions& o, const MonitorOptions& m, Communicator& comm,
                  torch::Device device);

  void measure_reference(models::Backbone& teacher);
  ssl::EpochCallbacks callbacks();

 private:
  using Clock = std::chrono::steady_clock;
  MonitorOptions m_;
  int64_t epochs_;
  models::BackboneOptions teacher_options_;  // the teacher's, for its copy
  Communicator& comm_;
  torch::Device device_;
  std::filesystem::path dir_;
  std::unique_ptr<eval::OnlineKnn> knn_;
  Clock::time_point last_ = Clock::now();
};

}  // namespace xdino::launch
