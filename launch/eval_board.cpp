#include "launch/eval_board.h"

#include <opencv2/imgcodecs.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/json.h"
#include "core/log.h"
#include "core/tensorboard.h"

namespace xdino::launch {
namespace fs = std::filesystem;
namespace {

using tensorboard::EventWriter;

// A fresh writer in `dir` after removing the tags under `prefix` an earlier run wrote there.
EventWriter fresh_writer(const fs::path& dir, const std::string& prefix) {
  tensorboard::prune_events(
      dir, [&](const std::string& tag, int64_t) { return tag.rfind(prefix, 0) != 0; });
  return EventWriter(dir);
}

}  // namespace

void declare_tensorboard_flag(Flags& f, bool& tensorboard) {
  f.add("tensorboard", &tensorboard,
        "also write the results as TensorBoard event files in --output_dir");
}

void write_knn_board(const fs::path& dir, const eval::KnnEvalResult& result) {
  EventWriter w = fresh_writer(dir, "knn/");
  for (const eval::KnnAccuracy& a : result.knn.per_k) {
    w.scalar("knn/top1", a.top1, a.k);
    w.scalar("knn/top5", a.top5, a.k);
  }
  if (result.knn_data_batch_norm)
    for (const eval::KnnAccuracy& a : result.knn_data_batch_norm->per_k)
      w.scalar("knn/top1_data_batch_norm", a.top1, a.k);
}

void write_linear_board(const fs::path& dir) {
  if (!fs::exists(dir / "log.txt")) return;
  EventWriter w = fresh_writer(dir, "linear/");
  std::istringstream in(read_file(dir / "log.txt"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const Json j = parse_json(line, (dir / "log.txt").string());
    const int64_t epoch = j.value("epoch", int64_t{0});
    for (const auto& [key, value] : j.items())
      if (value.is_number() && key != "epoch")
        w.scalar("linear/" + key, value.get<double>(), epoch);
  }
}

void write_board(const std::string& result, const std::function<void()>& write) {
  try {
    write();
  } catch (const std::exception& e) {
    log::warn(result, " is written; its TensorBoard events are not (", e.what(), ")");
  }
}

void write_picture_board(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  EventWriter w = fresh_writer(dir, "pictures/");
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path png = e.path() / "overview.png";
    if (!e.is_directory() || !fs::is_regular_file(png)) continue;
    const cv::Mat image = cv::imread(png.string(), cv::IMREAD_UNCHANGED);
    if (image.empty()) continue;
    w.image("pictures/" + e.path().filename().string(), read_file(png), image.cols, image.rows,
            image.channels(), 0);
  }
}

}  // namespace xdino::launch
