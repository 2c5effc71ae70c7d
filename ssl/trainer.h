// DINO pretraining, the training loop: main_dino.py's train_dino + train_one_epoch (docs/dino.md;
// one run traced from the command line: docs/architecture.md, "Follow one run").
//
// Contract:
//  - Trainer(options, make_backbone, data, comm) seeds torch with options.seed, builds student
//    and teacher backbones through `make_backbone` (student with drop_path_rate, teacher
//    without), their DINO heads, the loss, optimiser, loss scaler and schedules, and moves
//    them to the device (train/precision.h). Bad options throw xdino::UsageError. With
//    options.pretrained_weights the student starts from that file and the teacher copies it
//    (ssl/warm_start.h).
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
#include "distributed/grad_sync.h"
#include "distributed/replicas.h"
#include "models/registry.h"
#include "ssl/checkpoint.h"
#include "ssl/data_source.h"
#include "ssl/dino_options.h"
#include "ssl/head.h"
#include "ssl/loss.h"
#include "ssl/metrics.h"
#include "ssl/recipe_terms.h"
#include "ssl/scheduler.h"
#include "train/cuda_graph.h"
#include "train/grad_scaler.h"
#include "train/optim.h"
#include "train/precision.h"

namespace xdino::ssl {

using BackboneFactory =
    std::function<std::shared_ptr<models::Backbone>(const models::BackboneOptions&)>;

// Test and benchmark hooks; empty by default.
struct TrainerHooks {
  // After both forwards, before the loss (may edit the outputs or raise a signal).
  std::function<void(int64_t iteration, torch::Tensor& student_out, torch::Tensor& teacher_out)>
      after_forward;
  // At the end of every iteration (after the EMA update).
  std::function<void(int64_t iteration)> after_step;
};

// Wall-clock seconds spent per phase since construction (CPU-accurate; CUDA work is
// asynchronous and lands in whichever phase synchronises). grad_wait is the part of backward
// spent waiting for the gradient all-reduce after autograd is done: the communication that
// the bucketed overlap did not hide (0 in a single process).
// After each epoch rank 0 logs one line of them: the epoch's steps, wall time, images/s and the
// share of it the loop waited for the data loader (docs/dino.md, "Where the time goes").
struct StepTimes {
  double data = 0, forward = 0, backward = 0, optimizer = 0, ema = 0, grad_wait = 0;
  double checkpoint = 0;  // timed mid-epoch checkpoints (options.saveckp_minutes)
  int64_t steps = 0;
  // Phase by phase, what was spent between `earlier` and this.
  StepTimes since(const StepTimes& earlier) const;
};

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

class Trainer {
 public:
  Trainer(DinoOptions options, BackboneFactory make_backbone, std::shared_ptr<DataSource> data,
          std::shared_ptr<Communicator> comm = nullptr);
  ~Trainer();

  // Restores <output_dir>/checkpoint.pth when there is one, after checking it against the
  // options (a refusal throws xdino::UsageError before anything is written). train() calls it
  // unless the caller has: launch/ does first, so that a refused resume leaves the run's
  // config.ini as it was.
  // Returns whether there was a checkpoint to resume from.
  bool resume();
  TrainOutcome train();

  void set_hooks(TrainerHooks hooks) { hooks_ = std::move(hooks); }
  void set_epoch_callbacks(EpochCallbacks callbacks) { epoch_callbacks_ = std::move(callbacks); }
  const StepTimes& times() const { return times_; }
  const train::PrecisionPlan& precision() const { return plan_; }
  int64_t iterations_per_epoch() const { return niter_; }
  // Images per optimiser step over every process: the lr scaling's total batch.
  int64_t images_per_step() const {
    return o_.batch_size_per_gpu * o_.accum_iter * comm_->world_size();
  }

  MultiCropWrapper& student() { return student_; }
  MultiCropWrapper& teacher() { return teacher_; }
  DINOLoss& loss() { return loss_; }
  train::Optimizer& optimizer() { return *optimizer_; }
  train::GradScaler* scaler() { return scaler_.get(); }
  // --cuda_graph: how many times the step was captured so far (0 without it).
  int64_t cuda_graph_captures() const { return graphed_ ? graphed_->captures : 0; }

 private:
  using Position = TrainingState::Position;
  std::optional<Position> start_;  // where train() starts: resume()'s answer
  // What every process agreed on during an iteration: a stop was requested, or a timed
  // checkpoint is due (rank 0's clock).
  struct StepEnd {
    bool stop = false, save_due = false;
  };
  StepEnd train_step(int64_t epoch, int64_t batch);
  // train_step's acts (trainer.cpp).
  using Clock = std::chrono::steady_clock;
  struct MicroBatch {  // what every replica's pass of one micro-batch shares
    int64_t epoch = 0, iteration = 0;
    const BatchMasks* masks = nullptr;  // iBOT's masks of the process's global rows
    int replicas = 1;
    int64_t share = 0, count = 1;  // images per replica; micro-batches per step
    bool last = false;             // the step's last micro-batch: the center is updated
  };
  // The step's (or one replica's micro-batch's) loss, and its terms (ssl/metrics.h).
  struct Losses {
    double total = 0, dino = 0, koleo = 0, ibot = 0;
    void add_part(const Losses& o, double parts) {  // o is one of `parts` equal shares
      total += o.total / parts;
      dino += o.dino / parts;
      koleo += o.koleo / parts;
      ibot += o.ibot / parts;
    }
  };
  // One replica's pass over one micro-batch leaves its numbers on the device until the step's
  // one read-back: kPassNumbers float64, the loss, its dino, koleo and ibot terms, then 1 where
  // the student's and the teacher's outputs hold a non-finite value.
  static constexpr size_t kPassNumbers = 6;
  // What a step leaves on the device for its read-back: every pass's numbers, micro-batch by
  // micro-batch (replicas inside), and the flags summed over every process (a non-finite loss,
  // a stop signal, a timed save due on rank 0).
  struct PendingStep {
    std::vector<torch::Tensor> passes;
    torch::Tensor flags;
  };
  void set_schedules(int64_t iteration);
  PendingStep accumulate_gradients(int64_t epoch, int64_t iteration, Clock::time_point& t);
  torch::Tensor replica_pass(const std::vector<torch::Tensor>& crops, int replica,
                             const MicroBatch& micro_batch, CenterSums& sums,
                             IbotCenterSums& ibot_sums, Clock::time_point& t);
  torch::Tensor graphed_pass(const std::vector<torch::Tensor>& crops, const MicroBatch& micro_batch,
                             CenterSums& sums, IbotCenterSums& ibot_sums, Clock::time_point& t);
  void update_student(int64_t epoch, Clock::time_point& t);
  void update_teacher(int64_t iteration, Clock::time_point& t);
  StepEnd read_back(int64_t epoch, int64_t iteration, const PendingStep& pending);
  void save(int64_t next_epoch, int64_t next_iteration);
  void save_timed(int64_t next_iteration);
  void finish_epoch(int64_t epoch);
  // `passes`: the read-back's numbers of every pass (kPassNumbers each), `count` passes.
  [[noreturn]] void fail_nonfinite(int64_t iteration, const double* passes, size_t count);
  CheckpointParts parts();

  DinoOptions o_;
  std::shared_ptr<DataSource> data_;
  std::shared_ptr<Communicator> comm_;
  train::PrecisionPlan plan_;
  int64_t niter_ = 0;
  MultiCropWrapper student_{nullptr}, teacher_{nullptr};
  DINOLoss loss_{nullptr};
  std::unique_ptr<RecipeTerms> recipe_;  // KoLeo and iBOT, or null
  std::unique_ptr<train::Optimizer> optimizer_;
  std::unique_ptr<train::GradScaler> scaler_;
  std::unique_ptr<distributed::GradientSynchronizer> grad_sync_;
  std::unique_ptr<distributed::ReplicaGroup> replicas_;  // null for one replica
  // --cuda_graph: the pass recorded once and replayed every step (trainer.cpp, graphed_pass).
  struct GraphedPass {
    static constexpr int64_t kEagerSteps = 3;  // on the graph's stream, before the capture
    train::CudaGraph graph;
    std::vector<torch::Tensor> params;  // the student's trainable parameters
    std::vector<torch::Tensor> crops;   // the inputs the graph reads
    torch::Tensor numbers;              // what its pass leaves for the read-back
    std::vector<torch::Tensor> grads;   // what it writes into each parameter's .grad
    double teacher_temp = -1;           // the captured pass's: a host number inside the graph
    int64_t eager_steps = 0, captures = 0;
  };
  std::unique_ptr<GraphedPass> graphed_;
  std::shared_ptr<Communicator> step_comm_;  // comm_, or the replicas' (BatchNorm, loss)
  std::vector<double> lr_schedule_, wd_schedule_, momentum_schedule_;
  torch::OrderedDict<std::string, torch::Tensor> student_params_;
  bool teacher_ddp_prefix_ = true;
  EpochMeters meters_;
  IterationStats last_;
  std::string last_log_line_;  // log.txt's line of the last completed epoch (TrainingState)
  TrainerHooks hooks_;
  EpochCallbacks epoch_callbacks_;
  StepTimes times_;
  StepTimes epoch_start_times_;  // times_ when this epoch's first step began
  std::chrono::steady_clock::time_point epoch_start_;
  Scheduler scheduler_{ScheduleOptions{}};  // when to save, stop and warn (ssl/scheduler.h)
};

}  // namespace xdino::ssl
