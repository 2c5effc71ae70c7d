// The TensorBoard files of `dino train` (core/tensorboard.h), beside log.txt in --output_dir,
// so that `tensorboard --logdir runs` shows the run as it goes; `--tensorboard false` turns
// them off. Rank 0 writes; the other processes do nothing.
//
// Contract: attach(callbacks) chains onto the trainer's callbacks (ssl::EpochCallbacks; those
// already there still run first) and writes:
//  - every print_every iterations (main_dino.py's print frequency, 10) and at each epoch's
//    last: train/loss, train/lr, train/wd, train/momentum, train/teacher_temp and
//    train/images_per_second (over the iterations since the last write), at the global
//    iteration; with loss_terms (DINOv2's KoLeo or iBOT on) also train/dino_loss,
//    train/koleo_loss and train/ibot_loss, the terms of train/loss;
//  - after each epoch, every number of its log.txt line as epoch/<key> at step = epoch (the
//    averaged statistics, teacher entropy and KL figures, the online k-NN), and with an online
//    k-NN point also knn/teacher beside the reference rows of knn_reference.json
//    (knn/random_init, knn/random_init_data_bn, knn/pixels), so one chart holds all four.
//  - A run that resumes first removes from the files every iteration step from the one it
//    resumes at, and every epoch step from its epoch: the curves continue without a step twice.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/tensorboard.h"
#include "distributed/communicator.h"
#include "ssl/trainer.h"

namespace xdino::launch {

class TrainingBoard {
 public:
  TrainingBoard(const std::filesystem::path& dir, bool enabled, int64_t images_per_step,
                int64_t iterations_per_epoch, const Communicator& comm, bool loss_terms = false);
  void attach(ssl::EpochCallbacks& callbacks);

  static constexpr int64_t kPrintEvery = 10;

 private:
  void started(int64_t epoch, int64_t iteration);
  void iteration(int64_t it, const ssl::IterationStats& stats);
  void logged(int64_t epoch);

  using Clock = std::chrono::steady_clock;
  std::filesystem::path dir_;
  bool on_;
  bool loss_terms_;
  int64_t images_per_step_, iterations_per_epoch_;
  std::unique_ptr<tensorboard::EventWriter> writer_;
  int64_t first_epoch_ = 0;    // epochs before it are in the files already
  int64_t last_written_ = -1;  // the iteration of the last train/ write
  Clock::time_point last_time_ = Clock::now();
};

}  // namespace xdino::launch
