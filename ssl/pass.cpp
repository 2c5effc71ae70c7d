#include "ssl/pass.h"

#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"
#include "train/cuda_graph.h"

namespace xdino::ssl {
namespace {

// The numbers the host needs from one pass, kept on the device for the step's read-back
// (ssl/step_numbers.h): the loss, its terms, and whether each network's output went non-finite.
torch::Tensor pass_numbers(const torch::Tensor& loss, const torch::Tensor& dino,
                           const RecipeLosses& terms, const torch::Tensor& student_out,
                           const torch::Tensor& teacher_out) {
  torch::NoGradGuard no_grad;
  const auto number = [&](const torch::Tensor& v) {
    return v.defined() ? v.detach().to(torch::kDouble)
                       : torch::zeros({}, dino.options().dtype(torch::kDouble));
  };
  const auto nonfinite = [&](const torch::Tensor& v) {
    return v.isfinite().all().logical_not().to(torch::kDouble);
  };
  std::vector<torch::Tensor> n(PassNumber::kCount);
  n[PassNumber::kLoss] = number(loss);
  n[PassNumber::kDino] = number(dino);
  for (size_t i = 0; i < kTermCount; ++i) n[PassNumber::kTerms + i] = number(terms[i]);
  n[PassNumber::kStudentNonfinite] = nonfinite(student_out);
  n[PassNumber::kTeacherNonfinite] = nonfinite(teacher_out);
  return torch::stack(n);
}

// One replica's forward, loss and backward of one micro-batch. Replica 0 alone writes the
// times. Nothing here waits for the device.
torch::Tensor replica_pass(const PassContext& c, const std::vector<torch::Tensor>& crops, int r,
                           const MicroBatch& mb, PassSums& sums, Pass::Clock::time_point& t) {
  const DinoOptions& o = *c.options;
  DINOLoss dino_loss = c.loss;  // the holder shares the module
  MultiCropWrapper& student = c.networks->student;
  MultiCropWrapper& teacher = c.networks->teacher;
  std::vector<torch::Tensor> mine;
  for (const auto& crop : crops)
    mine.push_back(mb.replicas == 1 ? crop : crop.narrow(0, r * mb.share, mb.share));
  torch::Tensor student_out, teacher_out, loss;
  CropOutputs student_outputs, teacher_outputs;  // with KoLeo or iBOT (c.recipe)
  BatchMasks masks;
  {
    compat::AutocastGuard autocast(c.plan->device.type(), c.plan->autocast_dtype, c.plan->autocast);
    if (c.recipe) {
      masks = c.recipe->share(*mb.masks, r, mb.replicas, mb.share);
      CropPass pass;
      pass.masks = masks.masks;
      pass.mask_indices = masks.indices;
      {
        torch::NoGradGuard no_grad;
        teacher_outputs = teacher->forward_pass({mine[0], mine[1]}, pass);
      }
      pass.mask_input = true;
      pass.global_features = o.recipe.koleo();
      student_outputs = student->forward_pass(mine, pass);
      student_out = student_outputs.logits;
      teacher_out = teacher_outputs.logits;
    } else {
      {
        // The teacher has no trainable parameters; no graph is recorded either way.
        torch::NoGradGuard no_grad;
        teacher_out = teacher->forward({mine[0], mine[1]});
      }
      student_out = student->forward(mine);
    }
    if (c.hooks->after_forward && r == 0)
      c.hooks->after_forward(mb.iteration, student_out, teacher_out);
    loss = dino_loss->forward_micro(student_out, teacher_out, mb.epoch, sums.center);
  }
  // DINOv2's terms outside autocast: both compute in float32 (ssl/recipe_terms.h).
  const RecipeLosses terms = c.recipe
                                 ? c.recipe->terms(student_outputs, teacher_outputs, masks,
                                                   dino_loss->teacher_temp(mb.epoch), sums.ibot)
                                 : RecipeLosses{};
  const torch::Tensor dino = loss;
  for (const torch::Tensor& term : terms)
    if (term.defined()) loss = loss + term;
  if (mb.last) {
    dino_loss->update_center(sums.center);
    if (c.recipe) c.recipe->update_center(sums.ibot);
  }
  const torch::Tensor numbers = pass_numbers(loss, dino, terms, student_out, teacher_out);
  if (r == 0) c.times->forward += seconds_since(t);
  torch::Tensor objective = c.scaler ? c.scaler->scale(loss) : loss;
  // The step's loss is the mean of the replicas' and micro-batches' (each a mean over its
  // images).
  const int64_t parts = mb.replicas * mb.count;
  if (parts > 1) objective = objective / static_cast<double>(parts);
  objective.backward();
  return numbers;
}

class EagerPass final : public Pass {
 public:
  explicit EagerPass(const PassContext& context) : c_(context) {}

  std::vector<torch::Tensor> run(const std::vector<torch::Tensor>& crops, const MicroBatch& mb,
                                 std::vector<PassSums>& sums, Clock::time_point& t) override {
    std::vector<torch::Tensor> on_device;
    for (const auto& crop : crops)
      on_device.push_back(crop.to(c_.plan->device, /*non_blocking=*/true));
    std::vector<torch::Tensor> numbers(static_cast<size_t>(mb.replicas));
    const auto pass = [&](int r) {
      const auto i = static_cast<size_t>(r);
      numbers[i] = replica_pass(c_, on_device, r, mb, sums[i], t);
    };
    if (c_.networks->replicas)
      c_.networks->replicas->run(pass, mb.share);
    else
      pass(0);
    return numbers;
  }

 private:
  PassContext c_;
};

// A few passes run eagerly on the graph's stream, then one is captured (recorded, not run) and
// replayed. Each later pass copies its crops, from the loader's pinned memory, straight into
// the tensors the graph reads and replays it; the gradients land in the tensors the capture's
// backward made, which every parameter's .grad is given back (zero_grad and the last layer's
// freeze drop them). Everything that changes between steps is a device tensor rewritten in
// place outside the graph: parameters, buffers and the center by the update, the fp16 scale
// by the scaler, the teacher temperature by the step (DINOLoss::set_epoch), so one capture
// serves the whole run. A capture that fails leaves the step eager, with one warning.
class GraphedPass final : public Pass {
 public:
  GraphedPass(const PassContext& context, std::vector<torch::Tensor> trainable)
      : c_(context), params_(std::move(trainable)) {}

  std::vector<torch::Tensor> run(const std::vector<torch::Tensor>& crops, const MicroBatch& mb,
                                 std::vector<PassSums>& sums, Clock::time_point& t) override {
    if (failed_ || eager_steps_ < kGraphEagerSteps) {
      ++eager_steps_;
      torch::Tensor numbers;
      const std::vector<torch::Tensor> on_device = to_device(crops);
      if (failed_) return {replica_pass(c_, on_device, 0, mb, sums[0], t)};
      graph_.run_eagerly([&] { numbers = replica_pass(c_, on_device, 0, mb, sums[0], t); });
      return {numbers};
    }
    if (crops_.empty()) {
      crops_ = to_device(crops);
    } else {
      for (size_t i = 0; i < crops.size(); ++i) crops_[i].copy_(crops[i], /*non_blocking=*/true);
    }
    if (captures_ == 0 && !capture(mb, sums, t)) return run(crops, mb, sums, t);
    graph_.replay();
    for (size_t i = 0; i < params_.size(); ++i) params_[i].mutable_grad() = grads_[i];
    c_.times->forward += seconds_since(t);
    return {numbers_};
  }

  int64_t captures() const override { return captures_; }

 private:
  std::vector<torch::Tensor> to_device(const std::vector<torch::Tensor>& crops) const {
    std::vector<torch::Tensor> out;
    for (const auto& crop : crops) out.push_back(crop.to(c_.plan->device, /*non_blocking=*/true));
    return out;
  }

  // False when CUDA refused the capture: the step then runs eagerly from this pass on, the
  // center sums and gradients the capture recorded dropped.
  bool capture(const MicroBatch& mb, std::vector<PassSums>& sums, Clock::time_point& t) {
    try {
      graph_.capture([&] { numbers_ = replica_pass(c_, crops_, 0, mb, sums[0], t); });
    } catch (const Error& e) {
      log::warn(first_line(e.what()), "; the step runs without a graph from now on");
      failed_ = true;
      sums[0] = PassSums{};
      for (auto& p : params_) p.mutable_grad() = torch::Tensor();
      return false;
    }
    ++captures_;
    for (const auto& p : params_) grads_.push_back(p.grad());
    log::info("the step's forward and backward are captured as a CUDA graph (iteration ",
              mb.iteration, "); every later step replays it");
    return true;
  }

  PassContext c_;
  train::CudaGraph graph_;
  std::vector<torch::Tensor> params_;  // the student's trainable parameters
  std::vector<torch::Tensor> crops_;   // the inputs the graph reads
  torch::Tensor numbers_;              // what its pass leaves for the read-back
  std::vector<torch::Tensor> grads_;   // what it writes into each parameter's .grad
  int64_t eager_steps_ = 0, captures_ = 0;
  bool failed_ = false;  // the capture failed: eager from then on
};

// What the graph cannot hold: several passes per step, a data-dependent shape, collectives
// (NCCL inside a graph is left for later), and then a device that is not a GPU.
void check_graphable(const PassContext& c) {
  const DinoOptions& o = *c.options;
  XDINO_CHECK_ARG(o.accum_iter == 1,
                  "--cuda_graph captures one micro-batch per step: use --accum_iter 1");
  XDINO_CHECK_ARG(!o.recipe.ibot(),
                  "--cuda_graph cannot capture iBOT (a different number of masked patches "
                  "each step): drop --ibot_loss_weight or --cuda_graph");
  XDINO_CHECK_ARG(c.processes == 1,
                  "--cuda_graph runs in one process for now; drop it, or run 1 process instead "
                  "of ",
                  c.processes);
  XDINO_CHECK_ARG(!c.networks->replicas,
                  "--cuda_graph captures one replica: drop it, or set --replicas 1 (got ",
                  o.replicas, ")");
  XDINO_CHECK_ARG(c.plan->device.is_cuda(), "--cuda_graph needs a CUDA device (got ",
                  c.plan->device.str(), "): drop it, or use --device cuda");
}

}  // namespace

std::unique_ptr<Pass> make_pass(const PassContext& context, std::vector<torch::Tensor> trainable) {
  if (!context.options->cuda_graph) return std::make_unique<EagerPass>(context);
  check_graphable(context);
  // Until Cuda.GraphedStepMatchesEagerStep has passed on a card (README, "Building against a
  // CUDA LibTorch 2.x"), the user is told.
  log::warn(
      "--cuda_graph has not been validated on a GPU yet: compare a short run against one "
      "without it before you rely on it");
  return std::make_unique<GraphedPass>(context, std::move(trainable));
}

}  // namespace xdino::ssl
