// The Trainer's methods with side effects (declared in ssl/trainer.h): checkpoint.pth and
// its numbered copies, resume, log.txt, failure reports. What a resume restores beyond the
// modules is ssl/training_state.h's TrainingState.
#include <cmath>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "core/pth.h"
#include "ssl/trainer.h"

namespace xdino::ssl {
namespace fs = std::filesystem;
namespace {

std::string nonfinite_parts(const torch::Tensor& student_out, const torch::Tensor& teacher_out) {
  torch::NoGradGuard no_grad;
  const bool student_bad = !student_out.isfinite().all().item<bool>();
  const bool teacher_bad = !teacher_out.isfinite().all().item<bool>();
  if (student_bad && teacher_bad) return "student output and teacher output";
  if (student_bad) return "student output";
  if (teacher_bad) return "teacher output";
  return "loss (student and teacher outputs are finite)";
}

}  // namespace

CheckpointParts Trainer::parts() {
  CheckpointParts p;
  p.student = student_.ptr().get();
  p.teacher = teacher_.ptr().get();
  p.teacher_ddp_prefix = teacher_ddp_prefix_;
  p.optimizer = optimizer_.get();
  p.loss = loss_.ptr().get();
  p.scaler = scaler_.get();
  return p;
}

void Trainer::fail_nonfinite(int64_t iteration, double loss, const torch::Tensor& student_out,
                             const torch::Tensor& teacher_out) {
  const int64_t epoch = iteration / niter_;
  if (std::isfinite(loss))
    XDINO_FAIL("non-finite loss on another process at iteration ", iteration, " (epoch ", epoch,
               "); stopping, checkpoint.pth is left as it was");
  XDINO_FAIL("loss is ", loss, " at iteration ", iteration, " (epoch ", epoch, ", batch ",
             iteration % niter_, "): non-finite values first appear in the ",
             nonfinite_parts(student_out, teacher_out),
             "; stopping, checkpoint.pth is left as it was (lower --lr, keep --clip_grad, or "
             "use --precision fp32)");
}

Trainer::Position Trainer::resume() {
  const fs::path path = fs::path(o_.output_dir) / "checkpoint.pth";
  if (!fs::exists(path)) return {};
  log::info("Found checkpoint at ", path.string());
  const TrainingState state = restore_checkpoint(load_pth(path), parts(), path.string());
  return state.resume_position(niter_, *comm_, plan_.device, meters_);
}

void Trainer::save(int64_t next_epoch, int64_t next_iteration) {
  const TrainingState state = TrainingState::capture(next_epoch, next_iteration, niter_, meters_,
                                                     *comm_, plan_.device);
  if (!comm_->is_main()) return;
  save_pth(fs::path(o_.output_dir) / "checkpoint.pth", make_checkpoint(parts(), o_, state));
}

void Trainer::finish_epoch(int64_t epoch) {
  const auto avg = meters_.averages(*comm_);
  meters_.reset();
  save(epoch + 1, (epoch + 1) * niter_);
  Json extra = Json::object();
  extra["images_seen"] = (epoch + 1) * niter_ * o_.batch_size_per_gpu * comm_->world_size();
  if (epoch_callbacks_.measure) {
    const Json fields = epoch_callbacks_.measure(*teacher_->backbone, epoch);
    for (const auto& [key, value] : fields.items()) extra[key] = value;
  }
  const fs::path dir(o_.output_dir);
  if (comm_->is_main()) {
    if (o_.saveckp_freq > 0 && epoch % o_.saveckp_freq == 0) {
      char name[32];
      std::snprintf(name, sizeof name, "checkpoint%04ld.pth", static_cast<long>(epoch));
      write_atomically(dir / name, [&](const fs::path& tmp) {
        fs::copy_file(dir / "checkpoint.pth", tmp, fs::copy_options::overwrite_existing);
      });
    }
    const fs::path log_path = dir / "log.txt";
    std::string text = fs::exists(log_path) ? read_file(log_path) : std::string();
    if (!text.empty() && text.back() != '\n') text += '\n';
    write_file_atomically(log_path, text + log_line(epoch, avg, extra) + "\n");
  }
  comm_->barrier();
  if (epoch_callbacks_.logged) epoch_callbacks_.logged(epoch);
  const double ln_k = std::log(static_cast<double>(o_.head.out_dim));
  log::info("Averaged stats: loss ", avg[0], " lr ", avg[1], " wd ", avg[2], " teacher entropy ",
            avg[5], " KL(teacher||student) ", avg[0] - avg[5], " KL(mean teacher||uniform) ",
            avg[6], " (ln K = ", ln_k, ")");
  // Collapse heuristics (DINO paper section 5.3): one dimension dominating every teacher
  // output drives KL(mean p_t || uniform) to ln K; uniform outputs drive H(p_t) to ln K.
  // High entropy is normal in the first epochs; it is a collapse when it stays.
  // The averages are the same on every rank: warn once.
  if (avg[6] > 0.8 * ln_k && comm_->is_main())
    log::warn("epoch ", epoch, ": the teacher maps nearly every image to the same few output ",
              "dimensions (KL(mean teacher||uniform) ", avg[6], " of at most ln K = ", ln_k,
              "); if this persists the training has collapsed (centering too weak: check "
              "momentum_teacher and the batch size)");
  if (avg[5] > 0.9 * ln_k && comm_->is_main())
    log::warn("epoch ", epoch, ": the teacher outputs are nearly uniform (entropy ", avg[5],
              " of at most ln K = ", ln_k, "); if this persists the training has collapsed ",
              "(sharpening too weak: lower teacher_temp)");
}

}  // namespace xdino::ssl
