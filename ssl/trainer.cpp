#include "ssl/trainer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"
#include "core/progress.h"
#include "ssl/checkpoint_files.h"
#include "train/stop_signal.h"

namespace xdino::ssl {
namespace fs = std::filesystem;

using train::stop_signal;

namespace {

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
  // KoLeo is over the process's batch (ssl/recipe_terms.h): each image needs a neighbour.
  XDINO_CHECK_ARG(!o.recipe.koleo() || o.batch_size_per_gpu >= 2,
                  "--koleo_loss_weight needs at least 2 images per process (each image's nearest "
                  "neighbour), and --batch_size_per_gpu is ",
                  o.batch_size_per_gpu, ": raise it, or set --koleo_loss_weight 0");
}

}  // namespace

Trainer::Trainer(DinoOptions options, BackboneFactory make_backbone,
                 std::shared_ptr<DataSource> data, std::shared_ptr<Communicator> comm)
    : o_(std::move(options)),
      data_(std::move(data)),
      comm_(comm ? std::move(comm) : local_communicator()),
      plan_(train::resolve_precision(o_.device, o_.precision, o_.use_fp16)) {
  check_options(o_);
  XDINO_CHECK_ARG(o_.replicas <= 1 || plan_.device.is_cpu(), "--replicas ", o_.replicas,
                  " splits the batch over CPU cores; on ", plan_.device.str(),
                  " use --replicas 1 (one process per GPU)");
  XDINO_CHECK(data_ != nullptr && make_backbone,
              "Trainer needs a data source and a backbone factory");
  // An iteration is one optimiser step: accum_iter micro-batches (a last, incomplete group of
  // micro-batches is left out, like the last incomplete batch).
  niter_ = data_->batches_per_epoch() / o_.accum_iter;
  XDINO_CHECK_ARG(niter_ > 0, "the training set holds less than ", o_.accum_iter, " batch(es) of ",
                  o_.batch_size_per_gpu,
                  " images per process: lower --batch_size_per_gpu or --accum_iter");
  networks_ = build_networks(o_, make_backbone, comm_, plan_.device);
  step_ = std::make_unique<DinoStep>(o_, networks_, data_, comm_, plan_);
  scheduler_ = Scheduler({o_.epochs, niter_, o_.saveckp_minutes},
                         dino_schedules(o_, niter_, images_per_step()));

  int64_t n_params = 0;
  for (const auto& p : networks_.student->parameters()) n_params += p.numel();
  const int64_t share = o_.batch_size_per_gpu / networks_.replica_count();
  log::info("Student and teacher are built: ", o_.arch, " + DINO head (out_dim ", o_.head.out_dim,
            "), ", n_params, " parameters each; ", plan_.describe(),
            networks_.replicas ? "; " + std::to_string(o_.replicas) + " replicas of " +
                                     std::to_string(share) + " images"
                               : std::string(),
            o_.accum_iter > 1 ? "; " + std::to_string(o_.accum_iter) + " micro-batches of " +
                                    std::to_string(o_.batch_size_per_gpu) + " images per step"
                              : std::string(),
            "; ", niter_, " iterations per epoch, total batch ", images_per_step());
  if (o_.recipe.any())
    log::info("Recipe: ", describe_recipe(o_.recipe),
              " (docs/dino.md, \"Beyond "
              "DINO's recipe\")");
}

Trainer::~Trainer() = default;

TrainOutcome Trainer::train() {
  train::StopSignalGuard signals;
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
    bool stop = false;
    if (!run_epoch(epoch, epoch == pos.epoch ? pos.batch : 0, stop)) return TrainOutcome::kStopped;
    finish_epoch(epoch);
    if (scheduler_.stop_after_epoch(epoch, stop)) {
      log::info("Stopped by signal ", stop_signal(), " at the end of epoch ", epoch,
                "; rerun the same command to continue");
      return TrainOutcome::kStopped;
    }
  }
  return TrainOutcome::kCompleted;
}

bool Trainer::run_epoch(int64_t epoch, int64_t first, bool& stop) {
  data_->start_epoch(epoch, first * o_.accum_iter);
  epoch_start_times_ = step_->times();
  epoch_start_ = Clock::now();
  Progress progress("Epoch [" + std::to_string(epoch) + "/" + std::to_string(o_.epochs) + "]",
                    niter_, first);
  for (int64_t i = first; i < niter_ && !stop; ++i) {
    const int64_t it = epoch * niter_ + i;
    // Rank 0's clock alone decides a timed save, and the step's flags carry it to every rank.
    const bool save_due_here = comm_->is_main() && scheduler_.timed_save_due(Clock::now());
    const StepResult end = step_->update(epoch, i, it, scheduler_.at(it), save_due_here);
    last_ = end.stats;
    meters_.add(last_);
    stop = end.stop;
    if (epoch_callbacks_.iteration) epoch_callbacks_.iteration(it, last_);
    char status[200];
    std::snprintf(status, sizeof status, "loss %.4f lr %.3g wd %.3g m %.5f T %.3g | %.1f img/s",
                  last_.loss, last_.lr, last_.wd, last_.momentum, last_.teacher_temp,
                  progress.rate() * static_cast<double>(images_per_step()));
    progress.step(1, status);
    switch (scheduler_.after_step(epoch, i, end.stop, end.save_due)) {
      case Scheduler::AfterStep::kStop:
        progress.finish();
        save(epoch, it + 1);
        log::info("Stopped by signal ", stop_signal(), ": checkpoint.pth saved before iteration ",
                  it + 1, " (epoch ", epoch, ", batch ", i + 1,
                  "); rerun the same command to continue");
        return false;
      case Scheduler::AfterStep::kSaveTimed:
        progress.finish();
        save_timed(it + 1);
        break;
      case Scheduler::AfterStep::kGoOn:
        break;
    }
  }
  return true;
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

CheckpointParts Trainer::parts() {
  CheckpointParts p;
  p.student = networks_.student.ptr().get();
  p.teacher = networks_.teacher.ptr().get();
  p.teacher_ddp_prefix = networks_.teacher_ddp_prefix;
  p.optimizer = &step_->optimizer();
  p.loss = step_->loss().ptr().get();
  if (step_->recipe() && step_->recipe()->ibot_loss())
    p.ibot_loss = step_->recipe()->ibot_loss().ptr().get();
  p.recipe = &o_.recipe;
  p.scaler = step_->scaler();
  return p;
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
  step_->times().checkpoint += took;
  log::info("checkpoint.pth saved before iteration ", next_iteration, " (epoch ",
            next_iteration / niter_, ", batch ", next_iteration % niter_, "), ", minutes,
            " min after the last save, in ", took, " s");
}

// The order makes a kill at any point recoverable: everything the epoch's files say is
// computed first, then checkpoint.pth is replaced (it carries the log line), then the numbered
// copy and log.txt follow from it (a resume writes them if they are missing).
void Trainer::finish_epoch(int64_t epoch) {
  // Where this epoch's time went, before the checkpoint and the monitor add their own.
  const StepTimes spent = step_->times().since(epoch_start_times_);
  const double wall = std::chrono::duration<double>(Clock::now() - epoch_start_).count();
  const std::string time_line = epoch_time_line(epoch, spent, wall, images_per_step());
  if (comm_->is_main() && !time_line.empty()) {
    const int64_t peak = compat::peak_allocated_bytes(plan_.device);
    log::info(time_line,
              peak >= 0 ? "; peak GPU memory " + std::to_string(peak >> 20) + " MiB" : "");
  }
  const IterationStats avg = meters_.averages(*comm_);
  meters_.reset();
  Json extra = loss_terms(avg, o_.recipe);
  extra["images_seen"] = (epoch + 1) * niter_ * images_per_step();
  if (epoch_callbacks_.measure) {
    const Json fields = epoch_callbacks_.measure(*networks_.teacher->backbone, epoch);
    for (const auto& [key, value] : fields.items()) extra[key] = value;
  }
  last_log_line_ = log_line(epoch, avg, extra);
  save(epoch + 1, (epoch + 1) * niter_);
  if (comm_->is_main())
    write_epoch_files(o_.output_dir, epoch, o_.saveckp_freq, last_log_line_, /*resuming=*/false);
  comm_->barrier();
  if (epoch_callbacks_.logged) epoch_callbacks_.logged(epoch);
  const double ln_k = std::log(static_cast<double>(o_.head.out_dim));
  log::info("Averaged stats: loss ", avg.loss, " lr ", avg.lr, " wd ", avg.wd, " teacher entropy ",
            avg.teacher_entropy, " KL(teacher||student) ", avg.dino_loss - avg.teacher_entropy,
            " KL(mean teacher||uniform) ", avg.kl_uniform, " (ln K = ", ln_k, ")");
  // The averages are the same on every rank: warn once.
  if (comm_->is_main())
    for (const std::string& w :
         collapse_warnings(epoch, avg.kl_uniform, avg.teacher_entropy, o_.head.out_dim))
      log::warn(w);
}

}  // namespace xdino::ssl
