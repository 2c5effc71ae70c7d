// When the training loop saves, stops and warns, apart from how it updates (marian's Scheduler
// decides when to save, validate and log; its graph groups update): ssl::Trainer asks, after
// each step and each epoch, and carries out the answer. Pure but for the clock, which the
// caller passes in, so each rule is a table test (tests/ssl/test_scheduler.cpp).
//
// Contract:
//  - Scheduler(options): the run's epochs, iterations per epoch and --saveckp_minutes.
//  - started(now) / saved(now): the time of the last checkpoint.
//  - timed_save_due(now): --saveckp_minutes is set and that long has passed since the last
//    save (rank 0's clock alone decides; the step's flags carry it to every rank).
//  - after_step(epoch, batch, stop, save_due): what follows a step at (epoch, batch): kStop
//    (a signal asked the run to stop mid-epoch: save before the next iteration and return),
//    kSaveTimed (a timed save mid-epoch), or kGoOn; the epoch's last step always goes on (the
//    epoch's end saves anyway).
//  - stop_after_epoch(epoch, stop): a signal came during the epoch and epochs remain.
//  - collapse_warnings(epoch, kl_uniform, teacher_entropy, out_dim): the DINO paper's
//    collapse heuristics (section 5.3) on an epoch's averages: one dimension dominating every
//    teacher output drives KL(mean p_t || uniform) to ln K (warned above 0.8 ln K); uniform
//    outputs drive H(p_t) to ln K (warned above 0.9 ln K). Each warning is one line.
//  - epoch_time_line(epoch, spent, wall, images_per_step): where the epoch's time went, one
//    line ("" when there was no step or no time).
//  - The three cosine schedules of main_dino.py (docs/dino.md, "Schedules"): dino_schedules(
//    options, iterations per epoch, total batch) builds them, at(iteration) reads them; an
//    iteration outside the run throws xdino::Error. A Scheduler built without them (the
//    save/stop rules' tests) throws there too.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ssl/step_times.h"

namespace xdino::ssl {

struct DinoOptions;

// What the schedules give one iteration.
struct StepSchedule {
  double lr = 0, wd = 0, momentum = 0;
};

struct Schedules {
  std::vector<double> lr, wd, momentum;  // one value per iteration of the run
};

// lr: linear warm-up to lr x total_batch / 256, then cosine to min_lr; weight decay: cosine
// from weight_decay to weight_decay_end; teacher momentum: cosine from momentum_teacher to 1.
Schedules dino_schedules(const DinoOptions& options, int64_t iterations_per_epoch,
                         int64_t total_batch);

struct ScheduleOptions {
  int64_t epochs = 1;
  int64_t iterations_per_epoch = 1;
  double saveckp_minutes = 0;  // 0: only at the end of each epoch
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  enum class AfterStep { kGoOn, kSaveTimed, kStop };

  explicit Scheduler(ScheduleOptions options, Schedules schedules = {})
      : o_(options), schedules_(std::move(schedules)) {}

  void started(Clock::time_point now) { last_save_ = now; }
  void saved(Clock::time_point now) { last_save_ = now; }
  Clock::time_point last_save() const { return last_save_; }
  bool timed_save_due(Clock::time_point now) const;
  AfterStep after_step(int64_t epoch, int64_t batch, bool stop, bool save_due) const;
  bool stop_after_epoch(int64_t epoch, bool stop) const;
  StepSchedule at(int64_t iteration) const;

 private:
  ScheduleOptions o_;
  Schedules schedules_;
  Clock::time_point last_save_{};
};

std::vector<std::string> collapse_warnings(int64_t epoch, double kl_uniform, double teacher_entropy,
                                           int64_t out_dim);

std::string epoch_time_line(int64_t epoch, const StepTimes& spent, double wall_seconds,
                            int64_t images_per_step);

}  // namespace xdino::ssl
