// The evaluations' TensorBoard files (core/tensorboard.h), each in its own --output_dir, so
// that `tensorboard --logdir runs/<job>` sets pixels, random and DINO side by side; rank 0
// writes; each function first removes what an earlier run of the same evaluation wrote.
//  - write_knn_board: knn/top1 and knn/top5 at step k, for every k (and
//    knn/top1_data_batch_norm with --recalibrate_bn).
//  - write_linear_board: every number of the probe's log.txt lines as linear/<key> at step
//    epoch. It reads log.txt rather than taking run_linear_eval's result on purpose: a probe
//    resumed from its checkpoint.pth returns this invocation's epochs only, while log.txt
//    holds every epoch of every invocation, which is the curve a reader wants.
//  - write_picture_board: each <name>/overview.png of `dir` (dino visualize's) as the image
//    summary pictures/<name>.
//  - write_board(result, write): runs one of them after `result` (knn.json, ...) is written.
//    The events are a view of the result, not the result: a failure to write them is one
//    warning saying that `result` is written and the events are not, and the command still
//    exits 0.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "eval/knn_eval.h"
#include "launch/flags.h"

namespace xdino::launch {

// --tensorboard of the evaluations (on by default).
void declare_tensorboard_flag(Flags& flags, bool& tensorboard);

void write_knn_board(const std::filesystem::path& dir, const eval::KnnEvalResult& result);
void write_linear_board(const std::filesystem::path& dir);
void write_picture_board(const std::filesystem::path& dir);
void write_board(const std::string& result, const std::function<void()>& write);

}  // namespace xdino::launch
