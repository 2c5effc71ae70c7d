#include "ssl/dino_step.h"

#include <cmath>

#include "core/check.h"
#include "core/host_reads.h"
#include "ssl/student_update.h"
#include "ssl/teacher.h"
#include "train/gradients.h"
#include "train/stop_signal.h"

namespace xdino::ssl {
namespace {

std::string nonfinite_parts(bool student_bad, bool teacher_bad) {
  if (student_bad && teacher_bad) return "student output and teacher output";
  if (student_bad) return "student output";
  if (teacher_bad) return "teacher output";
  return "loss (student and teacher outputs are finite)";
}

}  // namespace

DinoStep::DinoStep(const DinoOptions& options, DinoNetworks& networks,
                   std::shared_ptr<DataSource> data, std::shared_ptr<Communicator> comm,
                   const train::PrecisionPlan& plan)
    : o_(options),
      networks_(networks),
      data_(std::move(data)),
      comm_(std::move(comm)),
      plan_(plan) {
  const RecipeOptions& recipe = o_.recipe;
  DINOLossOptions lo;
  static_cast<DINOLossSettings&>(lo) = o_.loss;
  lo.out_dim = o_.head.out_dim;
  lo.ncrops = o_.local_crops_number + 2;
  lo.epochs = o_.epochs;
  lo.centering = recipe.centering_kind();
  lo.sinkhorn_knopp_iterations = recipe.sinkhorn_knopp_iterations;
  loss_ = DINOLoss(lo, networks_.step_comm);
  loss_->to(plan_.device);
  if (recipe.adds_terms()) {
    const MultiCropWrapper& student = networks_.student;
    const models::Backbone& b = *student->backbone;
    const int64_t crop = o_.global_crops_size;
    recipe_ = std::make_unique<RecipeTerms>(
        recipe, b.token_grid(crop, crop), max_num_patches_for(crop, b.patch_size()),
        student->ibot_head ? student->ibot_head->options().out_dim : o_.head.out_dim,
        networks_.step_comm,
        networks_.replicas ? networks_.replicas->process_communicator() : nullptr, plan_.device);
  }
  student_params_ = networks_.student->named_parameters();
  optimizer_ = train::make_optimizer(o_.optimizer, dino_param_groups(student_params_));
  optimizer_->set_update_path(o_.update_path);
  if (plan_.loss_scaling) scaler_ = std::make_unique<train::GradScaler>();
  std::vector<torch::Tensor> trainable;
  for (const auto& p : networks_.student->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  PassContext context;
  context.options = &o_;
  context.networks = &networks_;
  context.loss = loss_;
  context.recipe = recipe_.get();
  context.scaler = scaler_.get();
  context.plan = &plan_;
  context.hooks = &hooks_;
  context.times = &times_;
  context.processes = comm_->world_size();
  pass_ = make_pass(context, trainable);
  // Replicas and micro-batches sum their gradients in .grad; processes all-reduce them after
  // the last backward of the step (the overlapping hooks would see each replica's or each
  // micro-batch's gradient separately).
  grad_sync_ = std::make_unique<distributed::GradientSynchronizer>(
      std::move(trainable), comm_, 25 << 20,
      /*overlap=*/!networks_.replicas && o_.accum_iter == 1);
}

DinoStep::~DinoStep() = default;

StepResult DinoStep::update(int64_t epoch, int64_t batch, int64_t it, const StepSchedule& schedule,
                            bool save_due_here) {
  auto& groups = optimizer_->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].lr = schedule.lr;
    if (g == 0) groups[g].weight_decay = schedule.wd;
  }
  // Before the passes: the replicas share the loss, and a captured pass reads it in place.
  loss_->set_epoch(epoch, plan_.device);
  auto t = Clock::now();
  const PendingStep pending = accumulate_gradients(epoch, it, save_due_here, t);
  update_student(epoch, t);
  // Act 3. The teacher's EMA.
  ema_update(*networks_.student, *networks_.teacher, schedule.momentum, o_.update_path);
  times_.ema += seconds_since(t);
  ++times_.steps;
  return read_back(epoch, batch, it, schedule, pending);
}

// Act 1. Forward, loss and backward of each micro-batch (accum_iter of them), on every
// replica's share of its images at once. Gradients add up in .grad; the center is updated
// once, after the last micro-batch's loss; the gradients are all-reduced at the end, then the
// flags. A non-finite loss still runs its backward (every process runs the same collectives);
// read_back stops the run before anything is saved.
DinoStep::PendingStep DinoStep::accumulate_gradients(int64_t epoch, int64_t it, bool save_due_here,
                                                     Clock::time_point& t) {
  MicroBatch mb;
  mb.epoch = epoch;
  mb.iteration = it;
  mb.replicas = networks_.replica_count();
  mb.share = o_.batch_size_per_gpu / mb.replicas;
  mb.count = o_.accum_iter;
  std::vector<PassSums> sums(static_cast<size_t>(mb.replicas));
  PendingStep pending;
  optimizer_->zero_grad();
  grad_sync_->begin();
  t = Clock::now();
  for (int64_t micro = 0; micro < mb.count; ++micro) {
    std::vector<torch::Tensor> crops = data_->next_batch();
    XDINO_CHECK(static_cast<int64_t>(crops.size()) == o_.local_crops_number + 2,
                "the data source gave ", crops.size(), " crops, expected 2 global + ",
                o_.local_crops_number, " local");
    // The pass puts them on the device (ssl/pass.h): a graph copies them into its own.
    const BatchMasks masks =
        recipe_ ? recipe_->draw_masks(o_.seed, it, micro, comm_->rank(), 2 * o_.batch_size_per_gpu)
                : BatchMasks{};
    mb.masks = &masks;
    times_.data += seconds_since(t);
    mb.last = micro + 1 == mb.count;
    const std::vector<torch::Tensor> numbers = pass_->run(crops, mb, sums, t);
    pending.passes.insert(pending.passes.end(), numbers.begin(), numbers.end());
    if (!mb.last) times_.backward += seconds_since(t);
  }
  auto waiting = Clock::now();
  grad_sync_->finish();
  times_.grad_wait += seconds_since(waiting);
  times_.backward += seconds_since(t);
  // The flags, summed over every process, without a sync: the passes' non-finite losses
  // counted on the device, then this process's stop signal and rank 0's timed save.
  torch::NoGradGuard no_grad;
  const torch::Tensor losses = torch::stack(pending.passes).select(1, PassNumber::kLoss);
  // The host's two flags are written on the device by value (a fill is a kernel, not a copy
  // from pageable memory, which would wait for the whole backward).
  const auto flag = [&](bool on) {
    return torch::full({1}, on ? 1.0f : 0.0f, torch::TensorOptions(plan_.device));
  };
  pending.flags = torch::cat({losses.isfinite().logical_not().sum().to(torch::kFloat).view({1}),
                              flag(train::stop_requested()), flag(save_due_here)});
  comm_->all_reduce_sum(pending.flags);
  return pending;
}

// Act 2. The student's update: clipping (after unscaling), the frozen last layer, the
// optimiser step (through the loss scaler in fp16).
void DinoStep::update_student(int64_t epoch, Clock::time_point& t) {
  if (o_.clip_grad > 0) {
    if (scaler_) scaler_->unscale(*optimizer_);
    train::clip_gradients(student_params_, o_.clip_grad, o_.update_path);
  }
  cancel_gradients_last_layer(epoch, student_params_, o_.freeze_last_layer);
  if (scaler_) {
    scaler_->step(*optimizer_);
    scaler_->update();
  } else {
    optimizer_->step();
  }
  times_.optimizer += seconds_since(t);
}

// The step's one read-back: the flags, the center's statistics and every pass's numbers in
// one copy (ssl/step_numbers.h). A non-finite loss anywhere stops the run here, before the
// step could be saved; otherwise the iteration's statistics (the epoch's meters, log.txt).
StepResult DinoStep::read_back(int64_t epoch, int64_t batch, int64_t it,
                               const StepSchedule& schedule, const PendingStep& pending) {
  const auto& ls = loss_->last_stats();
  const torch::Tensor host =
      to_host(torch::cat({pending.flags.to(torch::kDouble),
                          torch::stack({ls.teacher_entropy, ls.kl_uniform}).to(torch::kDouble),
                          torch::cat(pending.passes)}));
  const double* h = host.data_ptr<double>();
  const double* passes = h + ReadBack::kCount;
  if (h[ReadBack::kNonfinite] > 0) fail_nonfinite(epoch, batch, it, passes, pending.passes.size());
  StepLosses loss;
  const double parts = static_cast<double>(pending.passes.size());
  for (size_t p = 0; p < pending.passes.size(); ++p)
    loss.add_pass(passes + p * PassNumber::kCount, parts);
  StepResult r;
  r.stop = h[ReadBack::kStop] > 0;
  r.save_due = h[ReadBack::kSaveDue] > 0;
  IterationStats& s = r.stats;
  s.loss = loss.total;
  s.dino_loss = loss.dino;
  s.terms = loss.terms;
  s.lr = schedule.lr;
  s.wd = schedule.wd;
  s.momentum = schedule.momentum;
  s.teacher_temp = loss_->teacher_temp(epoch);
  s.teacher_entropy = h[ReadBack::kTeacherEntropy];
  s.kl_uniform = h[ReadBack::kKlUniform];
  if (hooks_.after_step) hooks_.after_step(it);
  return r;
}

void DinoStep::fail_nonfinite(int64_t epoch, int64_t batch, int64_t iteration, const double* passes,
                              size_t count) const {
  const double* n = passes;
  for (size_t p = 0; p < count; ++p, n += PassNumber::kCount) {
    if (std::isfinite(n[PassNumber::kLoss])) continue;
    // The passes run micro-batch by micro-batch, replicas inside.
    const auto micro = static_cast<int64_t>(p * o_.accum_iter / count);
    const std::string where = o_.accum_iter > 1 ? " (micro-batch " + std::to_string(micro + 1) +
                                                      " of " + std::to_string(o_.accum_iter) + ")"
                                                : "";
    XDINO_FAIL(
        "loss is ", n[PassNumber::kLoss], " at iteration ", iteration, " (epoch ", epoch,
        ", batch ", batch, ")", where, ": non-finite values first appear in the ",
        nonfinite_parts(n[PassNumber::kStudentNonfinite] > 0, n[PassNumber::kTeacherNonfinite] > 0),
        "; stopping, checkpoint.pth is left as it was (lower --lr, keep --clip_grad, or "
        "use --precision fp32)");
  }
  XDINO_FAIL("non-finite loss on another process at iteration ", iteration, " (epoch ", epoch,
             "); stopping, checkpoint.pth is left as it was");
}

}  // namespace xdino::ssl
