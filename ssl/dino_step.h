// One iteration of DINO in three acts, as marian's SyncGraphGroup::update: the gradients of
// every micro-batch (ssl/pass.h), the student's update, the teacher's EMA; then the step's one
// read-back to the host (docs/dino.md, "Gradient accumulation"; docs/architecture.md, "Follow
// one run"). Until it, the host only queues work, so a GPU never drains in the middle of a
// step for a number (the clip coefficients and the fp16 scaler's found-inf flag aside: train/).
//
// Contract:
//  - DinoStep(options, networks, data, comm, plan) owns what the step changes besides the
//    networks: the DINO loss and its center, the recipe's terms (KoLeo, iBOT; ssl/recipe_terms.h),
//    the optimiser with DINO's parameter groups, the fp16 loss scaler, the gradient all-reduce
//    and the pass (eager or graphed). Bad options throw xdino::UsageError.
//  - update(epoch, batch, iteration, schedule, save_due_here): sets the optimiser's lr (every
//    group) and weight decay (group 0) from `schedule`, then: zero_grad; accum_iter micro-
//    batches from the data source, each the pass of every replica; the gradients all-reduced
//    over the processes; clipping (after unscaling), the frozen last layer, the optimiser step;
//    the EMA with schedule.momentum. The flags every process agrees on (a non-finite loss, this
//    process's stop signal, rank 0's save_due_here) are summed over the processes. Returns
//    whether a stop or a timed save was asked anywhere, and the iteration's statistics.
//  - A non-finite loss still runs its backward, update and EMA (every process runs the same
//    collectives); the read-back then throws xdino::Error with one line naming the iteration,
//    the micro-batch and which of student output, teacher output or loss went non-finite first.
//    Nothing is saved by the step; the networks in memory hold the bad update.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/grad_sync.h"
#include "ssl/data_source.h"
#include "ssl/dino_options.h"
#include "ssl/loss.h"
#include "ssl/metrics.h"
#include "ssl/networks.h"
#include "ssl/pass.h"
#include "ssl/recipe_terms.h"
#include "ssl/scheduler.h"
#include "ssl/step_numbers.h"
#include "ssl/step_times.h"
#include "train/grad_scaler.h"
#include "train/optim.h"
#include "train/precision.h"

namespace xdino::ssl {

struct StepResult {
  bool stop = false, save_due = false;  // asked on any process
  IterationStats stats;
};

class DinoStep {
 public:
  DinoStep(const DinoOptions& options, DinoNetworks& networks, std::shared_ptr<DataSource> data,
           std::shared_ptr<Communicator> comm, const train::PrecisionPlan& plan);
  ~DinoStep();

  StepResult update(int64_t epoch, int64_t batch, int64_t iteration, const StepSchedule& schedule,
                    bool save_due_here);

  DINOLoss& loss() { return loss_; }
  RecipeTerms* recipe() { return recipe_.get(); }
  train::Optimizer& optimizer() { return *optimizer_; }
  train::GradScaler* scaler() { return scaler_.get(); }
  int64_t captures() const { return pass_->captures(); }
  const StepTimes& times() const { return times_; }
  StepTimes& times() { return times_; }
  void set_hooks(TrainerHooks hooks) { hooks_ = std::move(hooks); }

 private:
  using Clock = std::chrono::steady_clock;
  // What a step leaves on the device for its read-back: every pass's numbers, micro-batch by
  // micro-batch (replicas inside), and the flags summed over every process.
  struct PendingStep {
    std::vector<torch::Tensor> passes;
    torch::Tensor flags;
  };
  PendingStep accumulate_gradients(int64_t epoch, int64_t iteration, bool save_due_here,
                                   Clock::time_point& t);
  void update_student(int64_t epoch, Clock::time_point& t);
  StepResult read_back(int64_t epoch, int64_t batch, int64_t iteration,
                       const StepSchedule& schedule, const PendingStep& pending);
  [[noreturn]] void fail_nonfinite(int64_t epoch, int64_t batch, int64_t iteration,
                                   const double* passes, size_t count) const;

  const DinoOptions& o_;
  DinoNetworks& networks_;
  std::shared_ptr<DataSource> data_;
  std::shared_ptr<Communicator> comm_;
  train::PrecisionPlan plan_;
  DINOLoss loss_{nullptr};
  std::unique_ptr<RecipeTerms> recipe_;  // KoLeo and iBOT, or null
  std::unique_ptr<train::Optimizer> optimizer_;
  std::unique_ptr<train::GradScaler> scaler_;
  std::unique_ptr<distributed::GradientSynchronizer> grad_sync_;
  std::unique_ptr<Pass> pass_;
  torch::OrderedDict<std::string, torch::Tensor> student_params_;
  TrainerHooks hooks_;
  StepTimes times_;
};

}  // namespace xdino::ssl
