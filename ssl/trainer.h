// DINO pretraining, the training loop: main_dino.py's train_dino + train_one_epoch (docs/dino.md;
// one run traced from the command line: docs/architecture.md, "Follow one run").
//
// Contract:
//  - Trainer(options, make_backbone, data, comm) checks the options, builds student and teacher
//    through `make_backbone` (ssl/networks.h: the seed, the draws in main_dino.py's order, the
//    warm start), the step that trains them (ssl/dino_step.h: loss, optimiser, loss scaler,
//    pass) and the schedules (ssl/scheduler.h), on the device of train/precision.h. Bad
//    options throw xdino::UsageError.
//  - An iteration is one optimiser step over options.accum_iter micro-batches of the data
//    source (docs/dino.md, "Gradient accumulation"): iterations_per_epoch() is
//    batches_per_epoch() / accum_iter.
//  - train() resumes from <output_dir>/checkpoint.pth when it exists (our own checkpoints
//    exactly, official ones at the start of their epoch), runs the remaining epochs and
//    returns kCompleted. Per epoch it writes checkpoint.pth (and checkpointNNNN.pth every
//    saveckp_freq epochs) and appends one JSON line to log.txt (ssl/metrics.h), on rank 0,
//    with the fields EpochCallbacks::measure adds.
//  - With options.saveckp_minutes > 0, once that many minutes have passed (rank 0's clock)
//    since the last save, checkpoint.pth is also replaced after the iteration in progress,
//    mid-epoch, with the same content a stop would write; training goes on. A crash after it
//    resumes from that iteration as exactly as after a stop (docs/dino.md, "Timed checkpoints").
//  - SIGTERM / SIGUSR1 during train(): the iteration in progress completes (its optimiser and
//    EMA steps included), checkpoint.pth is written with the index of the next iteration, and
//    train() returns kStopped. Rerunning the same command continues from that iteration with
//    the same batches, RNG states and epoch statistics, so the result equals an uninterrupted
//    run. A stop that lands on an epoch's last iteration finishes that epoch normally first.
//  - A non-finite loss is found at the step's one read-back, after that step's backward,
//    update and EMA have run (the host does not wait for the loss mid-step): train() then
//    throws xdino::Error with one line naming the iteration, the micro-batch and which of
//    student output, teacher output or loss went non-finite. Nothing is saved, so
//    checkpoint.pth stays as it was; the in-memory networks and optimiser hold the bad update,
//    so this Trainer cannot train on (a new one resumes from the checkpoint).
//  - Processes agree through `comm` (gradients, center, stop/non-finite flags, statistics).
//  - options.replicas > 1 (CPU): the process's batch is split over that many threads
//    (distributed/replicas.h) that share the networks; the step computes the same function
//    (BatchNorm statistics, drop-path masks, center and loss of the whole batch).
//    hooks.after_forward then sees replica 0's outputs.
//  - options.recipe (ssl/recipe.h): DINOv2's KoLeo, Sinkhorn-Knopp centering and iBOT, each off
//    by default. With iBOT both backbones get the mask token (and, with a separate head, both
//    networks an ibot_head); each micro-batch's masks are drawn from (seed, iteration, micro-
//    batch, rank), so a resume draws the same; the step's loss is DINO's + the weighted KoLeo
//    and iBOT terms (ssl/recipe_terms.h), each logged on its own (ssl/metrics.h). A resume
//    whose recipe differs from the checkpoint's is refused in one line (ssl/checkpoint.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "core/json.h"
#include "distributed/communicator.h"
#include "ssl/checkpoint.h"
#include "ssl/data_source.h"
#include "ssl/dino_options.h"
#include "ssl/dino_step.h"
#include "ssl/metrics.h"
#include "ssl/networks.h"
#include "ssl/pass.h"
#include "ssl/scheduler.h"
#include "ssl/step_times.h"
#include "train/precision.h"

namespace xdino::ssl {

// What launch/ adds to the loop: the online k-NN monitor and curves.png at the end of an epoch
// (launch/learning_monitor.h), the TensorBoard files (launch/training_board.h). Every process
// calls them; each may be empty.
struct EpochCallbacks {
  // When train() starts: the epoch and global iteration it starts from (0, 0, or a resume's).
  std::function<void(int64_t epoch, int64_t iteration)> started;
  // After every iteration: its global index and statistics.
  std::function<void(int64_t iteration, const IterationStats& stats)> iteration;
  // After the epoch's checkpoint is saved, before its log.txt line: extra fields for that line,
  // measured on the teacher's backbone (every process calls it; rank 0's fields are written).
  std::function<Json(models::Backbone& teacher_backbone, int64_t epoch)> measure;
  // After rank 0 has written the line (every process calls it).
  std::function<void(int64_t epoch)> logged;
  // After checkpoint.pth was replaced (every process calls it): a timed save, a stop's, an
  // epoch's.
  std::function<void()> saved;
};

enum class TrainOutcome { kCompleted, kStopped };

// The loop, as marian's Train::run: resume, then per iteration the step (ssl/dino_step.h) and
// the Scheduler's answer (ssl/scheduler.h): go on, save, or stop; per epoch its statistics,
// log.txt's line and the checkpoint.
class Trainer {
 public:
  Trainer(DinoOptions options, BackboneFactory make_backbone, std::shared_ptr<DataSource> data,
          std::shared_ptr<Communicator> comm = nullptr);
  ~Trainer();

  // Restores <output_dir>/checkpoint.pth when there is one, after checking it against the
  // options (a refusal throws xdino::UsageError before anything is written). train() calls it
  // unless the caller has: launch/ does first, so that a refused resume leaves the run's
  // config.ini as it was. Returns whether there was a checkpoint to resume from.
  bool resume();
  TrainOutcome train();

  void set_hooks(TrainerHooks hooks) { step_->set_hooks(std::move(hooks)); }
  void set_epoch_callbacks(EpochCallbacks callbacks) { epoch_callbacks_ = std::move(callbacks); }
  const StepTimes& times() const { return step_->times(); }
  const train::PrecisionPlan& precision() const { return plan_; }
  int64_t iterations_per_epoch() const { return niter_; }
  // Images per optimiser step over every process: the lr scaling's total batch.
  int64_t images_per_step() const {
    return o_.batch_size_per_gpu * o_.accum_iter * comm_->world_size();
  }

  MultiCropWrapper& student() { return networks_.student; }
  MultiCropWrapper& teacher() { return networks_.teacher; }
  DINOLoss& loss() { return step_->loss(); }
  train::Optimizer& optimizer() { return step_->optimizer(); }
  train::GradScaler* scaler() { return step_->scaler(); }
  // --cuda_graph: how many times the step was captured so far (0 without it).
  int64_t cuda_graph_captures() const { return step_->captures(); }

 private:
  using Clock = std::chrono::steady_clock;
  using Position = TrainingState::Position;
  // The epoch's iterations from `first`; false when a signal stopped the run mid-epoch (it
  // saved first). `stop`: a signal came during the epoch.
  bool run_epoch(int64_t epoch, int64_t first, bool& stop);
  void save(int64_t next_epoch, int64_t next_iteration);
  void save_timed(int64_t next_iteration);
  void finish_epoch(int64_t epoch);
  CheckpointParts parts();

  DinoOptions o_;
  std::shared_ptr<DataSource> data_;
  std::shared_ptr<Communicator> comm_;
  train::PrecisionPlan plan_;
  int64_t niter_ = 0;
  DinoNetworks networks_;
  std::unique_ptr<DinoStep> step_;
  Scheduler scheduler_{ScheduleOptions{}};  // schedules; when to save, stop and warn
  std::optional<Position> start_;           // where train() starts: resume()'s answer
  EpochMeters meters_;
  IterationStats last_;
  std::string last_log_line_;  // log.txt's line of the last completed epoch (TrainingState)
  EpochCallbacks epoch_callbacks_;
  StepTimes epoch_start_times_;  // the step's times when this epoch's first step began
  Clock::time_point epoch_start_;
};

}  // namespace xdino::ssl
