// One micro-batch's forward, loss and backward on every replica of this process: the first
// act of the training step (ssl/dino_step.h). Two implementations behind one interface:
//  - eager (the default): every replica (distributed/replicas.h) runs its share of the images
//    through both networks, the DINO loss and the recipe's terms, and its backward; gradients
//    add up in the shared .grad;
//  - graphed (--cuda_graph, docs/dino.md "The step as a CUDA graph"): one replica on one GPU;
//    kGraphEagerSteps passes run eagerly on the graph's stream, then one is captured once for the
//    run (train/cuda_graph.h) and every later pass is a replay: the crops are copied from the
//    loader's memory straight into the tensors the graph reads, each parameter's .grad gets
//    the graph's tensor back. A capture CUDA refuses leaves the step eager, with one warning
//    naming the cause. Not yet run on a card: make_pass says so in one warning line.
//
// Contract:
//  - make_pass(context, trainable) returns the graphed pass when options.cuda_graph, else the
//    eager one. The graphed pass refuses with xdino::UsageError, naming the fix, what one
//    captured pass cannot hold: accum_iter > 1, iBOT, several processes or replicas, a device
//    that is not CUDA.
//  - run(crops, micro_batch, sums, t) takes the crops where the loader left them (host memory,
//    pinned on a CUDA machine), puts them on the device, runs the pass of every replica and
//    returns each one's
//    PassNumber::kCount float64 numbers (ssl/step_numbers.h), still on the device. `sums` holds
//    one PassSums per replica, which the micro-batches of a step add to; the step's last
//    micro-batch (micro_batch.last) updates the centers from them. Nothing here waits for the
//    device. `t` is the phase clock (ssl/step_times.h): forward time goes to context.times.
//  - The objective each replica differentiates is its loss / (replicas x micro-batches), scaled
//    by the fp16 scaler when there is one: the step's loss is their mean.
//  - captures() is how many times the graphed pass has captured (0 for the eager one).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "ssl/dino_options.h"
#include "ssl/ibot_loss.h"
#include "ssl/loss.h"
#include "ssl/masking.h"
#include "ssl/networks.h"
#include "ssl/recipe_terms.h"
#include "ssl/step_numbers.h"
#include "ssl/step_times.h"
#include "train/grad_scaler.h"
#include "train/precision.h"

namespace xdino::ssl {

// Test and benchmark hooks; empty by default.
struct TrainerHooks {
  // After both forwards, before the loss (may edit the outputs or raise a signal).
  std::function<void(int64_t iteration, torch::Tensor& student_out, torch::Tensor& teacher_out)>
      after_forward;
  // At the end of every iteration (after the EMA update).
  std::function<void(int64_t iteration)> after_step;
};

struct MicroBatch {  // what every replica's pass of one micro-batch shares
  int64_t epoch = 0, iteration = 0;
  const BatchMasks* masks = nullptr;  // iBOT's masks of the process's global rows
  int replicas = 1;
  int64_t share = 0, count = 1;  // images per replica; micro-batches per step
  bool last = false;             // the step's last micro-batch: the center is updated
};

// One replica's center sums, over the micro-batches of a step.
struct PassSums {
  CenterSums center;
  IbotCenterSums ibot;
};

// What every pass reads and writes; the step owns it all.
struct PassContext {
  const DinoOptions* options = nullptr;
  DinoNetworks* networks = nullptr;
  DINOLoss loss{nullptr};
  RecipeTerms* recipe = nullptr;  // KoLeo and iBOT, or null
  train::GradScaler* scaler = nullptr;
  const train::PrecisionPlan* plan = nullptr;
  const TrainerHooks* hooks = nullptr;
  StepTimes* times = nullptr;
  int processes = 1;  // of the run (a graph holds no collective yet)
};

class Pass {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~Pass() = default;
  virtual std::vector<torch::Tensor> run(const std::vector<torch::Tensor>& crops,
                                         const MicroBatch& micro_batch, std::vector<PassSums>& sums,
                                         Clock::time_point& t) = 0;
  virtual int64_t captures() const { return 0; }
};

// The graphed pass's eager steps before its capture (the capture is the next one).
inline constexpr int64_t kGraphEagerSteps = 3;

std::unique_ptr<Pass> make_pass(const PassContext& context, std::vector<torch::Tensor> trainable);

}  // namespace xdino::ssl
