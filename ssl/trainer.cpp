#include "ssl/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"
#include "core/paths.h"
#include "core/progress.h"
#include "distributed/replicas.h"
#include "models/batch_norm.h"
#include "ssl/checkpoint_files.h"
#include "ssl/student_update.h"
#include "ssl/teacher.h"
#include "ssl/warm_start.h"
#include "train/gradients.h"
#include "train/schedules.h"
#include "train/stop_signal.h"

namespace xdino::ssl {
namespace fs = std::filesystem;

using distributed::broadcast_module;
using distributed::GradientSynchronizer;
using train::clip_gradients;
using train::cosine_schedule;
using train::GradScaler;
using train::make_optimizer;
using train::resolve_precision;
using train::stop_requested;
using train::stop_signal;
using train::StopSignalGuard;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point& t) {
  const auto now = Clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

void check_options(const DinoOptions& o) {
  XDINO_CHECK_ARG(o.epochs > 0, "--epochs must be positive, got ", o.epochs);
  XDINO_CHECK_ARG(o.batch_size_per_gpu > 0, "--batch_size_per_gpu must be positive, got ",
                  o.batch_size_per_gpu);
  XDINO_CHECK_ARG(o.local_crops_number >= 0, "--local_crops_number must be >= 0, got ",
                  o.local_crops_number);
  XDINO_CHECK_ARG(o.clip_grad >= 0, "--clip_grad must be >= 0 (0 disables), got ", o.clip_grad);
  XDINO_CHECK_ARG(o.saveckp_freq >= 0, "--saveckp_freq must be >= 0, got ", o.saveckp_freq);
  XDINO_CHECK_ARG(o.saveckp_minutes >= 0 && std::isfinite(o.saveckp_minutes),
                  "--saveckp_minutes must be >= 0 (0: at the end of each epoch only), got ",
                  o.saveckp_minutes);
  XDINO_CHECK_ARG(o.freeze_last_layer >= 0, "--freeze_last_layer must be >= 0, got ",
                  o.freeze_last_layer);
  XDINO_CHECK_ARG(o.lr >= 0 && o.min_lr >= 0, "--lr and --min_lr must be >= 0");
  XDINO_CHECK_ARG(o.accum_iter >= 1, "--accum_iter must be >= 1 (1: no accumulation), got ",
                  o.accum_iter);
  XDINO_CHECK_ARG(o.replicas >= 0, "--replicas must be >= 0 (0: one per core), got ", o.replicas);
  XDINO_CHECK_ARG(o.batch_size_per_gpu % std::max<int64_t>(o.replicas, 1) == 0,
                  "--batch_size_per_gpu ", o.batch_size_per_gpu, " does not split into --replicas ",
                  o.replicas, ": use a multiple of it");
}

std::string nonfinite_parts(bool student_bad, bool teacher_bad) {
  if (student_bad && teacher_bad) return "student output and teacher output";
  if (student_bad) return "student output";
  if (teacher_bad) return "teacher output";
  return "loss (student and teacher outputs are finite)";
}

}  // namespace

StepTimes StepTimes::since(const StepTimes& e) const {
  StepTimes d;
  d.data = data - e.data;
  d.forward = forward - e.forward;
  d.backward = backward - e.backward;
  d.optimizer = optimizer - e.optimizer;
  d.ema = ema - e.ema;
  d.grad_wait = grad_wait - e.grad_wait;
  d.checkpoint = checkpoint - e.checkpoint;
  d.steps = steps - e.steps;
  return d;
}

Trainer::Trainer(DinoOptions options, BackboneFactory make_backbone,
                 std::shared_ptr<DataSource> data, std::shared_ptr<Communicator> comm)
    : o_(std::move(options)),
      data_(std::move(data)),
      comm_(comm ? std::move(comm) : local_communicator()),
      plan_(resolve_precision(o_.device, o_.precision, o_.use_fp16)) {
  check_options(o_);
  XDINO_CHECK_ARG(o_.replicas <= 1 || plan_.device.is_cpu(), "--replicas ", o_.replicas,
                  " splits the batch over CPU cores; on ", plan_.device.str(),
                  " use --replicas 1 (one process per GPU)");
  XDINO_CHECK(data_ != nullptr && make_backbone,
              "Trainer needs a data source and a backbone factory");
  // An iteration is one optimiser step: accum_iter micro-batches (a last, incomplete group of
  // micro-batches is left out, like the last incomplete batch).
  niter_ = data_->batches_per_epoch() / o_.accum_iter;
  scheduler_ = Scheduler({o_.epochs, niter_, o_.saveckp_minutes});
  XDINO_CHECK_ARG(niter_ > 0, "the training set holds less than ", o_.accum_iter, " batch(es) of ",
                  o_.batch_size_per_gpu,
                  " images per process: lower --batch_size_per_gpu or --accum_iter");

  // main_dino.py order: seed, student backbone, teacher backbone, student head, teacher head.
  torch::manual_seed(static_cast<uint64_t>(o_.seed));
  models::BackboneOptions bo;
  bo.patch_size = o_.patch_size;
  bo.img_size = o_.global_crops_size;
  bo.in_chans = o_.in_chans;
  std::optional<models::PretrainedWeights> pretrained;
  if (!o_.pretrained_weights.empty()) {
    // A named pipe or a device would block the read for ever: a regular file only, as the
    // evaluations take it.
    const std::string problem = file_problem(o_.pretrained_weights);
    XDINO_CHECK_ARG(problem.empty(), "weights file ", quote(o_.pretrained_weights), " ", problem,
                    " (--pretrained_weights)");
    pretrained = models::read_pretrained(o_.pretrained_weights, o_.checkpoint_key);
    // A ViT takes the file's position-table grid; forward() interpolates it to any crop.
    bo.img_size = models::position_table_image_size(
        *pretrained, models::patch_size_of(o_.arch, o_.patch_size), bo.img_size);
  }
  bo.drop_path_rate = o_.drop_path_rate;
  auto student_backbone = make_backbone(bo);
  bo.drop_path_rate = 0.0;
  auto teacher_backbone = make_backbone(bo);
  const RecipeOptions& recipe = o_.recipe;
  check_recipe(recipe, student_backbone->supports_token_mask(), o_.arch);
  // KoLeo is over the process's batch (ssl/recipe_terms.h): each image needs a neighbour.
  XDINO_CHECK_ARG(!recipe.koleo() || o_.batch_size_per_gpu >= 2,
                  "--koleo_loss_weight needs at least 2 images per process (each image's nearest "
                  "neighbour), and --batch_size_per_gpu is ",
                  o_.batch_size_per_gpu, ": raise it, or set --koleo_loss_weight 0");
  XDINO_CHECK_ARG(!recipe.ibot() || !o_.head.use_bn,
                  "--use_bn_in_head with iBOT would mix the "
                  "masked patches' BatchNorm statistics into the head; use one of them");
  // A student head and the teacher's (its last layer normalised, as main_dino.py's), in that
  // order: the order the random numbers are drawn in.
  const auto head_pair = [&](int64_t out_dim) {
    DINOHeadOptions ho = o_.head;
    ho.in_dim = student_backbone->embed_dim();
    ho.out_dim = out_dim;
    DINOHead student_head(ho);
    ho.norm_last_layer = true;
    return std::make_pair(student_head, DINOHead(ho));
  };
  auto [student_head, teacher_head] = head_pair(o_.head.out_dim);
  // iBOT: the mask token in both backbones (the teacher's is EMA-updated and never used, as
  // dinov2's), and the separate head, built after the DINO heads so that a run without iBOT
  // draws the random numbers it always did.
  DINOHead student_ibot_head{nullptr}, teacher_ibot_head{nullptr};
  if (recipe.ibot()) {
    student_backbone->add_mask_token();
    teacher_backbone->add_mask_token();
    if (recipe.ibot_separate_head)
      std::tie(student_ibot_head, teacher_ibot_head) =
          head_pair(recipe.ibot_out_dim > 0 ? recipe.ibot_out_dim : o_.head.out_dim);
  }
  student_ = MultiCropWrapper(student_backbone, student_head, student_ibot_head);
  teacher_ = MultiCropWrapper(teacher_backbone, teacher_head, teacher_ibot_head);
  if (pretrained) log::info(warm_start(*student_, *pretrained));
  student_->to(plan_.device);
  teacher_->to(plan_.device);
  // DDP: every process starts from rank 0's student; SyncBatchNorm in both networks, over
  // every process and replica.
  broadcast_module(*student_, *comm_);
  if (o_.replicas > 1)
    replicas_ = std::make_unique<distributed::ReplicaGroup>(static_cast<int>(o_.replicas), comm_);
  step_comm_ = replicas_ ? replicas_->communicator() : comm_;
  models::set_batch_norm_communicator(*student_, step_comm_);
  models::set_batch_norm_communicator(*teacher_, step_comm_);
  init_teacher(*student_, *teacher_);
  student_->train();
  teacher_->train();  // never eval: batch statistics, own running stats (docs/dino.md, "Networks")
  teacher_ddp_prefix_ = has_batchnorms(*student_);

  DINOLossOptions lo;
  static_cast<DINOLossSettings&>(lo) = o_.loss;
  lo.out_dim = o_.head.out_dim;
  lo.ncrops = o_.local_crops_number + 2;
  lo.epochs = o_.epochs;
  lo.centering = recipe.centering_kind();
  lo.sinkhorn_knopp_iterations = recipe.sinkhorn_knopp_iterations;
  loss_ = DINOLoss(lo, step_comm_);
  loss_->to(plan_.device);
  if (recipe.koleo() || recipe.ibot()) {
    const models::Backbone& b = *student_->backbone;
    const int64_t crop = o_.global_crops_size;
    recipe_ = std::make_unique<RecipeTerms>(
        recipe, b.token_grid(crop, crop), max_num_patches_for(crop, b.patch_size()),
        student_->ibot_head ? student_->ibot_head->options().out_dim : o_.head.out_dim, step_comm_,
        replicas_ ? replicas_->process_communicator() : nullptr, plan_.device);
  }

  student_params_ = student_->named_parameters();
  optimizer_ = make_optimizer(o_.optimizer, dino_param_groups(student_params_));
  optimizer_->set_update_path(o_.update_path);
  if (plan_.loss_scaling) scaler_ = std::make_unique<GradScaler>();
  std::vector<torch::Tensor> trainable;
  for (const auto& p : student_->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  // Replicas and micro-batches sum their gradients in .grad; processes all-reduce them after
  // the last backward of the step (the overlapping hooks would see each replica's or each
  // micro-batch's gradient separately).
  if (o_.cuda_graph) {
    // What the graph cannot hold: several passes per step, a data-dependent shape, collectives
    // (NCCL inside a graph is left for later), and then a device that is not a GPU.
    XDINO_CHECK_ARG(o_.accum_iter == 1,
                    "--cuda_graph captures one micro-batch per step: use --accum_iter 1");
    XDINO_CHECK_ARG(!recipe.ibot(),
                    "--cuda_graph cannot capture iBOT (a different number of masked patches "
                    "each step): drop --ibot_loss_weight or --cuda_graph");
    XDINO_CHECK_ARG(comm_->world_size() == 1,
                    "--cuda_graph runs in one process for now; drop it, or run 1 process instead "
                    "of ",
                    comm_->world_size());
    XDINO_CHECK_ARG(!replicas_,
                    "--cuda_graph captures one replica: drop it, or set --replicas 1 "
                    "(got ",
                    o_.replicas, ")");
    XDINO_CHECK_ARG(plan_.device.is_cuda(), "--cuda_graph needs a CUDA device (got ",
                    plan_.device.str(), "): drop it, or use --device cuda");
    graphed_ = std::make_unique<GraphedPass>();
    graphed_->params = trainable;
  }
  grad_sync_ = std::make_unique<GradientSynchronizer>(std::move(trainable), comm_, 25 << 20,
                                                      /*overlap=*/!replicas_ && o_.accum_iter == 1);

  const double total_batch = static_cast<double>(images_per_step());
  lr_schedule_ =
      cosine_schedule(o_.lr * total_batch / 256.0, o_.min_lr, o_.epochs, niter_, o_.warmup_epochs);
  wd_schedule_ = cosine_schedule(o_.weight_decay, o_.weight_decay_end, o_.epochs, niter_);
  momentum_schedule_ = cosine_schedule(o_.momentum_teacher, 1.0, o_.epochs, niter_);

  int64_t n_params = 0;
  for (const auto& p : student_->parameters()) n_params += p.numel();
  log::info("Student and teacher are built: ", o_.arch, " + DINO head (out_dim ", o_.head.out_dim,
            "), ", n_params, " parameters each; ", plan_.describe(),
            replicas_ ? "; " + std::to_string(o_.replicas) + " replicas of " +
                            std::to_string(o_.batch_size_per_gpu / o_.replicas) + " images"
                      : std::string(),
            o_.accum_iter > 1 ? "; " + std::to_string(o_.accum_iter) + " micro-batches of " +
                                    std::to_string(o_.batch_size_per_gpu) + " images per step"
                              : std::string(),
            "; ", niter_, " iterations per epoch, total batch ", static_cast<int64_t>(total_batch));
  if (recipe.any())
    log::info("Recipe: ", describe_recipe(recipe),
              " (docs/dino.md, \"Beyond "
              "DINO's recipe\")");
}

Trainer::~Trainer() = default;

TrainOutcome Trainer::train() {
  StopSignalGuard signals;
  if (!start_) resume();
  const Position pos = *start_;
  scheduler_.started(Clock::now());
  if (epoch_callbacks_.started) epoch_callbacks_.started(pos.epoch, pos.epoch * niter_ + pos.batch);
  // Redraw what the last epoch's log line feeds (curves.png): a kill may have come first.
  if (pos.batch == 0 && pos.epoch > 0 && epoch_callbacks_.logged)
    epoch_callbacks_.logged(pos.epoch - 1);
  if (pos.epoch >= o_.epochs) {
    log::info("Training already complete (", o_.epochs, " epochs)");
    return TrainOutcome::kCompleted;
  }
  log::info("Starting DINO training at epoch ", pos.epoch, ", iteration ",
            pos.epoch * niter_ + pos.batch);
  for (int64_t epoch = pos.epoch; epoch < o_.epochs; ++epoch) {
    const int64_t first = epoch == pos.epoch ? pos.batch : 0;
    data_->start_epoch(epoch, first * o_.accum_iter);
    epoch_start_times_ = times_;
    epoch_start_ = Clock::now();
    bool stop = false;
    {
      Progress progress("Epoch [" + std::to_string(epoch) + "/" + std::to_string(o_.epochs) + "]",
                        niter_, first);
      for (int64_t i = first; i < niter_ && !stop; ++i) {
        const StepEnd end = train_step(epoch, i);
        stop = end.stop;
        if (epoch_callbacks_.iteration) epoch_callbacks_.iteration(epoch * niter_ + i, last_);
        char status[200];
        std::snprintf(status, sizeof status, "loss %.4f lr %.3g wd %.3g m %.5f T %.3g | %.1f img/s",
                      last_.loss, last_.lr, last_.wd, last_.momentum, last_.teacher_temp,
                      progress.rate() * static_cast<double>(images_per_step()));
        progress.step(1, status);
        switch (scheduler_.after_step(epoch, i, end.stop, end.save_due)) {
          case Scheduler::AfterStep::kStop:
            progress.finish();
            save(epoch, epoch * niter_ + i + 1);
            log::info("Stopped by signal ", stop_signal(),
                      ": checkpoint.pth saved before iteration ", epoch * niter_ + i + 1,
                      " (epoch ", epoch, ", batch ", i + 1,
                      "); rerun the same command to continue");
            return TrainOutcome::kStopped;
          case Scheduler::AfterStep::kSaveTimed:
            progress.finish();
            save_timed(epoch * niter_ + i + 1);
            break;
          case Scheduler::AfterStep::kGoOn:
            break;
        }
      }
    }
    finish_epoch(epoch);
    if (scheduler_.stop_after_epoch(epoch, stop)) {
      log::info("Stopped by signal ", stop_signal(), " at the end of epoch ", epoch,
                "; rerun the same command to continue");
      return TrainOutcome::kStopped;
    }
  }
  return TrainOutcome::kCompleted;
}

// One iteration in three acts, as marian's SyncGraphGroup::update: the gradients of every
// micro-batch, then the student's update, then the teacher's EMA; and then the step's one
// read-back to the host: the losses, the flags every process agrees on and the statistics.
// Until it, the host only queues work, so a GPU never drains in the middle of a step for a
// number (the clip coefficients and the fp16 scaler's found-inf flag aside: train/); a
// non-finite loss is found there too, after an update that is never saved
// (docs/dino.md, "Gradient accumulation").
Trainer::StepEnd Trainer::train_step(int64_t epoch, int64_t batch) {
  const int64_t it = epoch * niter_ + batch;
  set_schedules(it);
  auto t = Clock::now();
  const PendingStep pending = accumulate_gradients(epoch, it, t);
  update_student(epoch, t);
  update_teacher(it, t);
  return read_back(epoch, it, pending);
}

void Trainer::set_schedules(int64_t it) {
  auto& groups = optimizer_->param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].lr = lr_schedule_[static_cast<size_t>(it)];
    if (g == 0) groups[g].weight_decay = wd_schedule_[static_cast<size_t>(it)];
  }
}

// Act 1. Forward, loss and backward of each micro-batch (accum_iter of them), on every
// replica's share of its images at once. Gradients add up in .grad; the center is updated
// once, after the last micro-batch's loss; the gradients are all-reduced at the end, then the
// flags. A non-finite loss still runs its backward (every process runs the same collectives);
// read_back stops the run before anything is saved.
Trainer::PendingStep Trainer::accumulate_gradients(int64_t epoch, int64_t it,
                                                   Clock::time_point& t) {
  MicroBatch mb;
  mb.epoch = epoch;
  mb.iteration = it;
  mb.replicas = replicas_ ? replicas_->count() : 1;
  mb.share = o_.batch_size_per_gpu / mb.replicas;
  mb.count = o_.accum_iter;
  // Rank 0's clock alone decides a timed save, and the flags carry it to every rank.
  const bool save_due_here = comm_->is_main() && scheduler_.timed_save_due(Clock::now());
  std::vector<torch::Tensor> passes(static_cast<size_t>(mb.replicas));
  std::vector<CenterSums> center_sums(static_cast<size_t>(mb.replicas));
  std::vector<IbotCenterSums> ibot_sums(static_cast<size_t>(mb.replicas));
  PendingStep pending;
  optimizer_->zero_grad();
  grad_sync_->begin();
  t = Clock::now();
  for (int64_t micro = 0; micro < mb.count; ++micro) {
    std::vector<torch::Tensor> crops = data_->next_batch();
    XDINO_CHECK(static_cast<int64_t>(crops.size()) == o_.local_crops_number + 2,
                "the data source gave ", crops.size(), " crops, expected 2 global + ",
                o_.local_crops_number, " local");
    for (auto& c : crops) c = c.to(plan_.device, /*non_blocking=*/true);
    const BatchMasks masks =
        recipe_ ? recipe_->draw_masks(o_.seed, it, micro, comm_->rank(), 2 * o_.batch_size_per_gpu)
                : BatchMasks{};
    mb.masks = &masks;
    times_.data += seconds_since(t);
    mb.last = micro + 1 == mb.count;
    const auto pass = [&](int r) {
      const auto i = static_cast<size_t>(r);
      passes[i] = replica_pass(crops, r, mb, center_sums[i], ibot_sums[i], t);
    };
    if (graphed_)
      passes[0] = graphed_pass(crops, mb, center_sums[0], ibot_sums[0], t);
    else if (replicas_)
      replicas_->run(pass, mb.share);
    else
      pass(0);
    pending.passes.insert(pending.passes.end(), passes.begin(), passes.end());
    if (!mb.last) times_.backward += seconds_since(t);
  }
  auto waiting = Clock::now();
  grad_sync_->finish();
  times_.grad_wait += seconds_since(waiting);
  times_.backward += seconds_since(t);
  // The three flags, summed over every process, without a sync: the passes' non-finite losses
  // counted on the device, then this process's stop signal and rank 0's timed save.
  torch::NoGradGuard no_grad;
  const torch::Tensor losses = torch::stack(pending.passes).select(1, 0);
  const torch::Tensor host_flags =
      torch::tensor({stop_requested() ? 1.0f : 0.0f, save_due_here ? 1.0f : 0.0f});
  pending.flags = torch::cat({losses.isfinite().logical_not().sum().to(torch::kFloat).view({1}),
                              host_flags.to(plan_.device)});
  comm_->all_reduce_sum(pending.flags);
  return pending;
}

// One replica's forward, loss and backward of one micro-batch. Replica 0 alone writes the
// times. Nothing here waits for the device.
torch::Tensor Trainer::replica_pass(const std::vector<torch::Tensor>& crops, int r,
                                    const MicroBatch& mb, CenterSums& sums,
                                    IbotCenterSums& ibot_sums, Clock::time_point& t) {
  std::vector<torch::Tensor> mine;
  for (const auto& c : crops)
    mine.push_back(mb.replicas == 1 ? c : c.narrow(0, r * mb.share, mb.share));
  torch::Tensor student_out, teacher_out, loss;
  CropOutputs student, teacher;  // with KoLeo or iBOT (recipe_)
  BatchMasks masks;
  {
    compat::AutocastGuard autocast(plan_.device.type(), plan_.autocast_dtype, plan_.autocast);
    if (recipe_) {
      masks = recipe_->share(*mb.masks, r, mb.replicas, mb.share);
      CropPass pass;
      pass.masks = masks.masks;
      pass.mask_indices = masks.indices;
      {
        torch::NoGradGuard no_grad;
        teacher = teacher_->forward_pass({mine[0], mine[1]}, pass);
      }
      pass.mask_input = true;
      pass.global_features = o_.recipe.koleo();
      student = student_->forward_pass(mine, pass);
      student_out = student.logits;
      teacher_out = teacher.logits;
    } else {
      {
        // The teacher has no trainable parameters; no graph is recorded either way.
        torch::NoGradGuard no_grad;
        teacher_out = teacher_->forward({mine[0], mine[1]});
      }
      student_out = student_->forward(mine);
    }
    if (hooks_.after_forward && r == 0)
      hooks_.after_forward(mb.iteration, student_out, teacher_out);
    loss = loss_->forward_micro(student_out, teacher_out, mb.epoch, sums);
  }
  // DINOv2's terms outside autocast: both compute in float32 (ssl/recipe_terms.h).
  const RecipeLosses terms =
      recipe_ ? recipe_->terms(student, teacher, masks, loss_->teacher_temp(mb.epoch), ibot_sums)
              : RecipeLosses{};
  const torch::Tensor dino = loss;
  if (terms.koleo.defined()) loss = loss + terms.koleo;
  if (terms.ibot.defined()) loss = loss + terms.ibot;
  if (mb.last) {
    loss_->update_center(sums);
    if (recipe_) recipe_->update_center(ibot_sums);
  }
  // The numbers the host needs, kept on the device for the step's read-back.
  torch::Tensor numbers;
  {
    torch::NoGradGuard no_grad;
    const auto number = [&](const torch::Tensor& v) {
      return v.defined() ? v.detach().to(torch::kDouble)
                         : torch::zeros({}, dino.options().dtype(torch::kDouble));
    };
    const auto nonfinite = [&](const torch::Tensor& v) {
      return v.isfinite().all().logical_not().to(torch::kDouble);
    };
    numbers = torch::stack({number(loss), number(dino), number(terms.koleo), number(terms.ibot),
                            nonfinite(student_out), nonfinite(teacher_out)});
  }
  if (r == 0) times_.forward += seconds_since(t);
  torch::Tensor objective = scaler_ ? scaler_->scale(loss) : loss;
  // The step's loss is the mean of the replicas' and micro-batches' (each a mean over its
  // images).
  const int64_t parts = mb.replicas * mb.count;
  if (parts > 1) objective = objective / static_cast<double>(parts);
  objective.backward();
  return numbers;
}

// --cuda_graph: a few steps run eagerly on the graph's stream, then one is captured (recorded,
// not run) and replayed. Each later step copies its crops into the tensors the graph reads and
// replays it; the gradients land in the tensors the capture's backward made, which every
// parameter's .grad is given back (zero_grad and the last layer's freeze drop them). The
// teacher temperature is a host number inside the graph: a new one (the warm-up epochs)
// captures again. Parameters, buffers, the center and the scale are rewritten in place by the
// eager update, so each replay reads the step's values.
torch::Tensor Trainer::graphed_pass(const std::vector<torch::Tensor>& crops, const MicroBatch& mb,
                                    CenterSums& sums, IbotCenterSums& ibot_sums,
                                    Clock::time_point& t) {
  GraphedPass& g = *graphed_;
  if (g.eager_steps < GraphedPass::kEagerSteps) {
    ++g.eager_steps;
    torch::Tensor numbers;
    g.graph.run_eagerly([&] { numbers = replica_pass(crops, 0, mb, sums, ibot_sums, t); });
    return numbers;
  }
  if (g.crops.empty()) {
    for (const auto& c : crops) g.crops.push_back(c.clone());
  } else {
    for (size_t i = 0; i < crops.size(); ++i) g.crops[i].copy_(crops[i], /*non_blocking=*/true);
  }
  const double temp = loss_->teacher_temp(mb.epoch);
  if (g.captures == 0 || temp != g.teacher_temp) {
    g.graph.capture([&] { g.numbers = replica_pass(g.crops, 0, mb, sums, ibot_sums, t); });
    g.teacher_temp = temp;
    ++g.captures;
    g.grads.clear();
    for (const auto& p : g.params) g.grads.push_back(p.grad());
    log::info("the step's forward and backward are captured as a CUDA graph (iteration ",
              mb.iteration, ", teacher temperature ", temp, ")");
  }
  g.graph.replay();
  for (size_t i = 0; i < g.params.size(); ++i) g.params[i].mutable_grad() = g.grads[i];
  times_.forward += seconds_since(t);
  return g.numbers;
}

// Act 2. The student's update: clipping (after unscaling), the frozen last layer, the
// optimiser step (through the loss scaler in fp16).
void Trainer::update_student(int64_t epoch, Clock::time_point& t) {
  if (o_.clip_grad > 0) {
    if (scaler_) scaler_->unscale(*optimizer_);
    clip_gradients(student_params_, o_.clip_grad, o_.update_path);
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

// Act 3. The teacher's EMA.
void Trainer::update_teacher(int64_t it, Clock::time_point& t) {
  const double m = momentum_schedule_[static_cast<size_t>(it)];
  ema_update(*student_, *teacher_, m, o_.update_path);
  times_.ema += seconds_since(t);
  ++times_.steps;
}

// The step's one read-back: the flags, the center's statistics and every pass's numbers in
// one copy. A non-finite loss anywhere stops the run here, before the step could be saved;
// otherwise the iteration's statistics (the epoch's meters, log.txt).
Trainer::StepEnd Trainer::read_back(int64_t epoch, int64_t it, const PendingStep& pending) {
  const auto& ls = loss_->last_stats();
  const torch::Tensor host =
      torch::cat({pending.flags.to(torch::kDouble),
                  torch::stack({ls.teacher_entropy, ls.kl_uniform}).to(torch::kDouble),
                  torch::cat(pending.passes)})
          .cpu();
  const double* h = host.data_ptr<double>();  // 3 flags, 2 statistics, then the passes
  const double* passes = h + 5;
  if (h[0] > 0) fail_nonfinite(it, passes, pending.passes.size());
  Losses loss;
  const double parts = static_cast<double>(pending.passes.size());
  for (size_t p = 0; p < pending.passes.size(); ++p) {
    const double* n = passes + p * kPassNumbers;
    loss.add_part({n[0], n[1], n[2], n[3]}, parts);
  }
  const auto& groups = optimizer_->param_groups();
  last_.loss = loss.total;
  last_.dino_loss = loss.dino;
  last_.koleo_loss = loss.koleo;
  last_.ibot_loss = loss.ibot;
  last_.lr = groups[0].lr;
  last_.wd = groups[0].weight_decay;
  last_.momentum = momentum_schedule_[static_cast<size_t>(it)];
  last_.teacher_temp = loss_->teacher_temp(epoch);
  last_.teacher_entropy = h[3];
  last_.kl_uniform = h[4];
  meters_.add(last_);
  if (hooks_.after_step) hooks_.after_step(it);
  return {h[1] > 0, h[2] > 0};
}

CheckpointParts Trainer::parts() {
  CheckpointParts p;
  p.student = student_.ptr().get();
  p.teacher = teacher_.ptr().get();
  p.teacher_ddp_prefix = teacher_ddp_prefix_;
  p.optimizer = optimizer_.get();
  p.loss = loss_.ptr().get();
  if (recipe_ && recipe_->ibot_loss()) p.ibot_loss = recipe_->ibot_loss().ptr().get();
  p.recipe = &o_.recipe;
  p.scaler = scaler_.get();
  return p;
}

void Trainer::fail_nonfinite(int64_t iteration, const double* passes, size_t count) {
  const int64_t epoch = iteration / niter_;
  const double* n = passes;
  for (size_t p = 0; p < count; ++p, n += kPassNumbers) {
    if (std::isfinite(n[0])) continue;
    // The passes run micro-batch by micro-batch, replicas inside.
    const auto micro = static_cast<int64_t>(p * o_.accum_iter / count);
    const std::string where = o_.accum_iter > 1 ? " (micro-batch " + std::to_string(micro + 1) +
                                                      " of " + std::to_string(o_.accum_iter) + ")"
                                                : "";
    XDINO_FAIL("loss is ", n[0], " at iteration ", iteration, " (epoch ", epoch, ", batch ",
               iteration % niter_, ")", where, ": non-finite values first appear in the ",
               nonfinite_parts(n[4] > 0, n[5] > 0),
               "; stopping, checkpoint.pth is left as it was (lower --lr, keep --clip_grad, or "
               "use --precision fp32)");
  }
  XDINO_FAIL("non-finite loss on another process at iteration ", iteration, " (epoch ", epoch,
             "); stopping, checkpoint.pth is left as it was");
}

bool Trainer::resume() {
  const Position pos = resume_checkpoint(o_.output_dir, parts(), niter_, *comm_, plan_.device,
                                         meters_, last_log_line_);
  if (comm_->is_main() && pos.batch == 0 && pos.epoch > 0)
    write_epoch_files(o_.output_dir, pos.epoch - 1, o_.saveckp_freq, last_log_line_,
                      /*resuming=*/true);
  comm_->barrier();
  start_ = pos;
  return fs::exists(fs::path(o_.output_dir) / "checkpoint.pth");
}

void Trainer::save(int64_t next_epoch, int64_t next_iteration) {
  save_checkpoint(o_.output_dir, parts(), o_, next_epoch, next_iteration, niter_, meters_, *comm_,
                  plan_.device, last_log_line_);
  scheduler_.saved(Clock::now());
  if (epoch_callbacks_.saved) epoch_callbacks_.saved();
}

// The other ranks go on to the next step and wait in its first collective while rank 0 writes:
// each rank's stall is the capture plus rank 0's write, which is logged.
void Trainer::save_timed(int64_t next_iteration) {
  auto t = Clock::now();
  const double minutes = std::chrono::duration<double>(t - scheduler_.last_save()).count() / 60;
  save(next_iteration / niter_, next_iteration);
  const double took = seconds_since(t);
  times_.checkpoint += took;
  log::info("checkpoint.pth saved before iteration ", next_iteration, " (epoch ",
            next_iteration / niter_, ", batch ", next_iteration % niter_, "), ", minutes,
            " min after the last save, in ", took, " s");
}

// The order makes a kill at any point recoverable: everything the epoch's files say is
// computed first, then checkpoint.pth is replaced (it carries the log line), then the numbered
// copy and log.txt follow from it (a resume writes them if they are missing).
void Trainer::finish_epoch(int64_t epoch) {
  // Where this epoch's time went, before the checkpoint and the monitor add their own.
  const StepTimes spent = times_.since(epoch_start_times_);
  const double wall = std::chrono::duration<double>(Clock::now() - epoch_start_).count();
  const std::string time_line = epoch_time_line(epoch, spent, wall, images_per_step());
  if (comm_->is_main() && !time_line.empty()) {
    const int64_t peak = compat::peak_allocated_bytes(plan_.device);
    log::info(time_line,
              peak >= 0 ? "; peak GPU memory " + std::to_string(peak >> 20) + " MiB" : "");
  }
  const auto avg = meters_.averages(*comm_);
  meters_.reset();
  Json extra = Json::object();
  // DINOv2's options: each term of train_loss on its own (they add up to it).
  if (o_.recipe.koleo() || o_.recipe.ibot()) extra["train_dino_loss"] = avg[7];
  if (o_.recipe.koleo()) extra["train_koleo_loss"] = avg[8];
  if (o_.recipe.ibot()) extra["train_ibot_loss"] = avg[9];
  extra["images_seen"] = (epoch + 1) * niter_ * images_per_step();
  if (epoch_callbacks_.measure) {
    const Json fields = epoch_callbacks_.measure(*teacher_->backbone, epoch);
    for (const auto& [key, value] : fields.items()) extra[key] = value;
  }
  last_log_line_ = log_line(epoch, avg, extra);
  save(epoch + 1, (epoch + 1) * niter_);
  if (comm_->is_main())
    write_epoch_files(o_.output_dir, epoch, o_.saveckp_freq, last_log_line_, /*resuming=*/false);
  comm_->barrier();
  if (epoch_callbacks_.logged) epoch_callbacks_.logged(epoch);
  const double ln_k = std::log(static_cast<double>(o_.head.out_dim));
  log::info("Averaged stats: loss ", avg[0], " lr ", avg[1], " wd ", avg[2], " teacher entropy ",
            avg[5], " KL(teacher||student) ", avg[7] - avg[5], " KL(mean teacher||uniform) ",
            avg[6], " (ln K = ", ln_k, ")");
  // The averages are the same on every rank: warn once.
  if (comm_->is_main())
    for (const std::string& w : collapse_warnings(epoch, avg[6], avg[5], o_.head.out_dim))
      log::warn(w);
}

}  // namespace xdino::ssl
