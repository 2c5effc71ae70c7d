// curves.png of a `dino train` run: whether it is learning, at a glance (docs/dino.md,
// "Watching it learn").
//
// Contract:
//  - read_training_curves(dir) parses <dir>/log.txt (one JSON object per epoch, ssl/metrics.h)
//    and, when present, <dir>/knn_reference.json (the online k-NN of the initial teacher, of
//    a copy of it with the BatchNorm statistics of the data, and of raw pixels on the same
//    subsets; launch/learning_monitor.h). Points are placed at `images_seen` (older logs
//    without it: at epoch + 1). A malformed line throws xdino::Error naming the file and line.
//  - write_training_curves(dir) draws three panels, each against images seen: DINO loss,
//    teacher entropy (nats), online k-NN top-1 (%) starting at the initial teacher's value
//    with horizontal reference lines: raw pixels, random init, and random init with the
//    BatchNorm statistics of the data (the line learning must clear; docs/evaluation.md,
//    "The random-weights reference"). A backbone without BatchNorm has one random-init line,
//    labelled so. Every label (the curve's last value, each reference line's name and value)
//    is a row of a legend strip under its panel, never drawn over the plot, so close lines
//    leave them legible. Writes <dir>/curves.png (1260 x 392) atomically. Panels without data
//    say so. Rank 0's job.
#pragma once

#include <filesystem>
#include <optional>
#include <vector>

namespace xdino::eval {

struct CurvePoint {
  double images_seen = 0;
  double value = 0;
};

struct TrainingCurves {
  std::vector<CurvePoint> loss, teacher_entropy,
      knn_top1;                                  // knn_top1 starts at the initial teacher
  std::optional<double> knn_random, knn_pixels;  // reference lines
  std::optional<double> knn_random_bn;           // random init, the data's BatchNorm statistics
  bool knn_random_no_batch_norm = false;         // knn_random_bn null: the backbone has none
  int64_t knn_train = 0, knn_val = 0;            // subset sizes (0: no k-NN)
};

TrainingCurves read_training_curves(const std::filesystem::path& dir);

void write_training_curves(const std::filesystem::path& dir);

}  // namespace xdino::eval
