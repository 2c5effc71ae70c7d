#include "ssl/scheduler.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/check.h"
#include "ssl/dino_options.h"
#include "train/schedules.h"

namespace xdino::ssl {

bool Scheduler::timed_save_due(Clock::time_point now) const {
  return o_.saveckp_minutes > 0 &&
         std::chrono::duration<double>(now - last_save_).count() >= o_.saveckp_minutes * 60;
}

Scheduler::AfterStep Scheduler::after_step(int64_t, int64_t batch, bool stop, bool save_due) const {
  const bool last_of_epoch = batch + 1 >= o_.iterations_per_epoch;
  if (last_of_epoch) return AfterStep::kGoOn;  // the epoch's end saves, and stops if asked
  if (stop) return AfterStep::kStop;
  if (save_due) return AfterStep::kSaveTimed;
  return AfterStep::kGoOn;
}

bool Scheduler::stop_after_epoch(int64_t epoch, bool stop) const {
  return stop && epoch + 1 < o_.epochs;
}

StepSchedule Scheduler::at(int64_t it) const {
  XDINO_CHECK(it >= 0 && static_cast<size_t>(it) < schedules_.lr.size(), "iteration ", it,
              " is outside the schedules' ", schedules_.lr.size(), " iterations");
  const auto i = static_cast<size_t>(it);
  return {schedules_.lr[i], schedules_.wd[i], schedules_.momentum[i]};
}

Schedules dino_schedules(const DinoOptions& o, int64_t niter, int64_t total_batch) {
  Schedules s;
  s.lr = train::cosine_schedule(o.lr * static_cast<double>(total_batch) / 256.0, o.min_lr, o.epochs,
                                niter, o.warmup_epochs);
  s.wd = train::cosine_schedule(o.weight_decay, o.weight_decay_end, o.epochs, niter);
  s.momentum = train::cosine_schedule(o.momentum_teacher, 1.0, o.epochs, niter);
  return s;
}

std::vector<std::string> collapse_warnings(int64_t epoch, double kl_uniform, double teacher_entropy,
                                           int64_t out_dim) {
  std::vector<std::string> out;
  const double ln_k = std::log(static_cast<double>(out_dim));
  std::ostringstream os;
  if (kl_uniform > 0.8 * ln_k) {
    os << "epoch " << epoch << ": the teacher maps nearly every image to the same few output "
       << "dimensions (KL(mean teacher||uniform) " << kl_uniform << " of at most ln K = " << ln_k
       << "); if this persists the training has collapsed (centering too weak: check "
          "momentum_teacher and the batch size)";
    out.push_back(os.str());
    os.str("");
  }
  // High entropy is normal in the first epochs; it is a collapse when it stays.
  if (teacher_entropy > 0.9 * ln_k) {
    os << "epoch " << epoch << ": the teacher outputs are nearly uniform (entropy "
       << teacher_entropy << " of at most ln K = " << ln_k
       << "); if this persists the training has collapsed (sharpening too weak: lower "
          "teacher_temp)";
    out.push_back(os.str());
  }
  return out;
}

std::string epoch_time_line(int64_t epoch, const StepTimes& spent, double wall,
                            int64_t images_per_step) {
  if (spent.steps <= 0 || wall <= 0) return "";
  char line[320];
  std::snprintf(line, sizeof line,
                "Epoch %ld: %ld steps in %.1f s, %.1f img/s; waiting for data %.1f%% of it "
                "(data %.1f s, forward %.1f s, backward %.1f s, optimizer %.1f s, EMA %.1f s)",
                static_cast<long>(epoch), static_cast<long>(spent.steps), wall,
                static_cast<double>(spent.steps * images_per_step) / wall,
                100.0 * spent.data / wall, spent.data, spent.forward, spent.backward,
                spent.optimizer, spent.ema);
  return line;
}

}  // namespace xdino::ssl
