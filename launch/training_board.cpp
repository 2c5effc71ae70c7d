#include "launch/training_board.h"

#include <sstream>

#include "core/atomic_file.h"
#include "core/json.h"
#include "core/log.h"

namespace xdino::launch {
namespace fs = std::filesystem;

TrainingBoard::TrainingBoard(const fs::path& dir, bool enabled, int64_t images_per_step,
                             int64_t iterations_per_epoch, const Communicator& comm,
                             bool loss_terms)
    : dir_(dir),
      on_(enabled && comm.is_main()),
      loss_terms_(loss_terms),
      images_per_step_(images_per_step),
      iterations_per_epoch_(iterations_per_epoch) {}

void TrainingBoard::attach(ssl::EpochCallbacks& c) {
  if (!on_) return;
  const auto chain = [](auto& slot, auto mine) {
    slot = [before = slot, mine](auto... args) {
      if (before) before(args...);
      mine(args...);
    };
  };
  chain(c.started, [this](int64_t epoch, int64_t it) { started(epoch, it); });
  chain(c.iteration, [this](int64_t it, const ssl::IterationStats& s) { iteration(it, s); });
  chain(c.logged, [this](int64_t epoch) { logged(epoch); });
}

void TrainingBoard::started(int64_t epoch, int64_t it) {
  // What a killed run wrote past its last checkpoint comes again: drop it first.
  tensorboard::prune_events(dir_, [&](const std::string& tag, int64_t step) {
    const bool per_epoch = tag.rfind("train/", 0) != 0;
    return step < (per_epoch ? epoch : it);
  });
  first_epoch_ = epoch;
  last_written_ = it - 1;
  last_time_ = Clock::now();
  writer_ = std::make_unique<tensorboard::EventWriter>(dir_);
}

void TrainingBoard::iteration(int64_t it, const ssl::IterationStats& s) {
  const bool epoch_end = (it + 1) % iterations_per_epoch_ == 0;
  if ((it + 1) % kPrintEvery != 0 && !epoch_end) return;
  const auto now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - last_time_).count();
  const double images = static_cast<double>((it - last_written_) * images_per_step_);
  writer_->scalar("train/loss", s.loss, it);
  if (loss_terms_) {
    writer_->scalar("train/dino_loss", s.dino_loss, it);
    for (size_t i = 0; i < ssl::kTermCount; ++i)
      writer_->scalar("train/" + ssl::loss_name(ssl::kLossTerms[i]), s.terms[i], it);
  }
  writer_->scalar("train/lr", s.lr, it);
  writer_->scalar("train/wd", s.wd, it);
  writer_->scalar("train/momentum", s.momentum, it);
  writer_->scalar("train/teacher_temp", s.teacher_temp, it);
  if (seconds > 0) writer_->scalar("train/images_per_second", images / seconds, it);
  last_written_ = it;
  last_time_ = now;
  writer_->flush();
}

void TrainingBoard::logged(int64_t epoch) {
  if (!writer_ || epoch < first_epoch_) return;  // a resume's redraw of a logged epoch
  const std::string log = read_file(dir_ / "log.txt");
  std::string line;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) line = l;
  const Json j = parse_json(line, (dir_ / "log.txt").string());
  for (const auto& [key, value] : j.items())
    if (value.is_number() && key != "epoch")
      writer_->scalar("epoch/" + key, value.get<double>(), epoch);
  if (j.contains("knn_top1") && j["knn_top1"].is_number()) {
    writer_->scalar("knn/teacher", j["knn_top1"].get<double>(), epoch);
    if (fs::exists(dir_ / "knn_reference.json")) {
      const Json r = parse_json(read_file(dir_ / "knn_reference.json"),
                                (dir_ / "knn_reference.json").string());
      for (const auto& [key, tag] : {std::pair{"knn_top1_random", "knn/random_init"},
                                     {"knn_top1_random_bn", "knn/random_init_data_bn"},
                                     {"knn_top1_pixels", "knn/pixels"}})
        if (r.contains(key) && r[key].is_number())
          writer_->scalar(tag, r[key].get<double>(), epoch);
    }
  }
  writer_->flush();
}

}  // namespace xdino::launch
