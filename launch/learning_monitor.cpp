#include "launch/learning_monitor.h"

#include <algorithm>
#include <sstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/curves.h"

namespace xdino::launch {

LearningMonitor::LearningMonitor(const ssl::DinoOptions& o, const MonitorOptions& m,
                                 Communicator& comm, torch::Device device)
    : m_(m), epochs_(o.epochs), comm_(comm), device_(device), dir_(o.output_dir) {
  XDINO_CHECK_ARG(m.knn_every >= 0, "--knn_every must be >= 0 (0 disables), got ", m.knn_every);
  if (m.knn_every == 0) return;
  // As ssl::Trainer builds its teacher (drop path 0): XCiT and ResNet have no position table,
  // and a ViT, which has one, has no BatchNorm and is never copied.
  teacher_options_.patch_size = o.patch_size;
  teacher_options_.img_size = o.global_crops_size;
  teacher_options_.in_chans = o.in_chans;
  eval::OnlineKnnOptions ko;
  ko.data_path = m.knn_data_path.empty() ? o.data_path : m.knn_data_path;
  ko.train_samples = m.knn_train_samples;
  ko.val_samples = m.knn_val_samples;
  ko.input.image_size = o.global_crops_size;
  ko.input.in_chans = o.in_chans;
  ko.input.mean = o.mean;
  ko.input.std = o.std;
  ko.input.num_workers = o.num_workers;
  knn_ = eval::OnlineKnn::open(ko);
}

// The reference lines of curves.png.
void LearningMonitor::measure_reference(models::Backbone& teacher) {
  if (!knn_ || std::filesystem::exists(dir_ / "checkpoint.pth")) return;
  const auto start = Clock::now();
  const auto random = knn_->measure(teacher, comm_, device_);
  const auto random_bn =
      knn_->measure_with_data_batch_norm(teacher, teacher_options_, comm_, device_);
  const auto pixels = knn_->pixels(comm_);
  if (comm_.is_main()) {
    Json j = Json::object();
    j["knn_top1_random"] = random.top1;
    j["knn_top1_random_bn"] = random_bn ? Json(random_bn->top1) : Json();
    j["knn_top1_pixels"] = pixels.top1;
    j["k"] = knn_->options().k;
    j["knn_train"] = random.num_train;
    j["knn_val"] = random.num_val;
    write_file_atomically(dir_ / "knn_reference.json", python_dumps(j, 2) + "\n");
    std::ostringstream bn;
    if (random_bn)
      bn << ", with the BatchNorm statistics of the " << random.num_train << " train images "
         << random_bn->top1 << "% (the reference for learning)";
    else
      bn << " (no BatchNorm: this is also the reference with the data's statistics)";
    log::info("online k-NN before training (", random.num_train, " train / ", random.num_val,
              " val images, ", knn_->options().k, "-NN): initial teacher ", random.top1, "%",
              bn.str(), ", raw pixels ", pixels.top1, "% (",
              std::chrono::duration<double>(Clock::now() - start).count(), " s)");
  }
  last_ = Clock::now();
}

ssl::EpochCallbacks LearningMonitor::callbacks() {
  ssl::EpochCallbacks c;
  c.measure = [this](models::Backbone& teacher, int64_t epoch) {
    Json j = Json::object();
    if (!knn_ || ((epoch + 1) % m_.knn_every != 0 && epoch + 1 != epochs_)) return j;
    const double epoch_seconds = std::chrono::duration<double>(Clock::now() - last_).count();
    const auto r = knn_->measure(teacher, comm_, device_);
    j["knn_top1"] = r.top1;
    j["knn_top5"] = r.top5;
    j["knn_train"] = r.num_train;
    j["knn_val"] = r.num_val;
    // No wall-clock time in log.txt: a run stopped and resumed writes the same file as one
    // that was not (tests/cli/test_crash_consistency.cpp). The cost goes to the console.
    if (comm_.is_main())
      log::info("online k-NN after epoch ", epoch, " (teacher, ", knn_->options().k, "-NN, ",
                r.num_train, "/", r.num_val, " images): top-1 ", r.top1, "% in ", r.seconds, " s, ",
                100.0 * r.seconds / std::max(epoch_seconds, 1e-9),
                "% of the training time since the last measurement");
    last_ = Clock::now();
    return j;
  };
  c.logged = [this](int64_t) {
    if (comm_.is_main()) eval::write_training_curves(dir_);
  };
  return c;
}

}  // namespace xdino::launch
