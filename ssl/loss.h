// DINOLoss: cross-entropy between the centred, sharpened teacher distribution of the two
// global crops and the student distribution of every other crop (docs/dino.md, "Loss and center").
//
// Contract:
//  - forward(student, teacher, epoch): student (ncrops * B, K), teacher (2 * B, K), any float
//    dtype (fp16/bf16 under autocast); rows crop-major as MultiCropWrapper returns them.
//    Returns the fp32 scalar loss averaged over the 2 * (ncrops - 1) pairs (q, v != q), with
//    teacher softmax((T - center) / teacher_temp[epoch]) using the center from BEFORE this
//    call, then updates the center (no grad) from the all-reduced sum of the raw teacher rows
//    over 2B * world rows: center <- m * center + (1 - m) * batch_center.
//  - Softmax/log-softmax and sums run in fp32 whatever the input dtype, as under autocast.
//  - `center` is a registered fp32 buffer of shape (1, K) (checkpoint key dino_loss.center).
//  - last_stats() holds detached fp32 scalars of the last forward over the whole batch (every
//    process's rows), for collapse monitoring:
//      teacher_entropy  mean over the teacher rows of H(p_t) = -sum_k p log p (nats);
//      kl_uniform       KL(mean_rows p_t || uniform) = ln K - H(mean_rows p_t): 0 when the
//                       batch spreads over all K dims, ln K when every row picks the same one.
//    The mean KL(teacher || student) over the pairs equals loss - teacher_entropy.
//  - Gradient accumulation (--accum_iter N, docs/dino.md): forward_micro(student, teacher,
//    epoch, sums) returns the same loss for one micro-batch but leaves `center` alone and adds
//    this process's raw sums to `sums`; update_center(sums) then does the one all-reduce and
//    the one center update, from the mean over every micro-batch's teacher rows, and sets
//    last_stats() over them. forward() is forward_micro + update_center on one batch.
//  - Replicas of one process (distributed/replicas.h) may share the module: each calls forward
//    on its rows; only the one that owns_module_state() writes `center` and last_stats().
//  - Shape mismatches throw xdino::Error naming both shapes; an epoch beyond the schedule
//    throws xdino::Error.
//  - options.centering kSinkhornKnopp (DINOv2's train.centering, ssl/recipe.h): the teacher's
//    distribution is Sinkhorn-Knopp's over every process's 2B rows (ssl/sinkhorn_knopp.h)
//    instead of the centred softmax; `center` is then never updated (it stays 0, as dinov2's),
//    while update_center still all-reduces the statistics.
//  - The loss owns the teacher temperature's "when": teacher_temp_schedule(...) has `epochs`
//    entries, linspace(warmup, final, warmup_epochs) then `final` repeated (main_dino.py's
//    numpy construction); the constructor builds it, forward(.., epoch) reads it. A warmup
//    outside [0, epochs] throws xdino::UsageError.
//  - set_epoch(epoch, device) writes that epoch's temperature into a 0-d float32 tensor on
//    `device`, in place, which forward_micro for that epoch divides by (the same float32
//    division as by the number on the CPU): a step captured as a CUDA graph reads the current
//    temperature at every replay instead of the one it was captured with, so one capture
//    serves the whole run. Call it before the replicas' passes, not from them (it writes).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "distributed/communicator.h"
#include "ssl/head.h"

namespace xdino::ssl {

// What a user sets (`dino train`'s flags of main_dino.py's names; student_temp and
// center_momentum are main_dino.py's constants, no flag).
struct DINOLossSettings {
  double warmup_teacher_temp = 0.04;
  double teacher_temp = 0.04;
  int64_t warmup_teacher_temp_epochs = 0;
  double student_temp = 0.1;
  double center_momentum = 0.9;
};

// How the teacher's outputs become targets: DINO's running centre, or DINOv2's Sinkhorn-Knopp.
enum class Centering { kCentering, kSinkhornKnopp };

// The official DINOLoss constructor's arguments: the settings, plus what the run fixes once
// elsewhere (the head's out_dim, the crop count, the run's length), which the trainer fills in.
struct DINOLossOptions : DINOLossSettings {
  int64_t out_dim = kDefaultOutDim;
  int64_t ncrops = 10;   // 2 global + local_crops_number
  int64_t epochs = 100;  // the run's length, which the temperature schedule covers
  Centering centering = Centering::kCentering;  // ours (DINOv2's), from ssl/recipe.h
  int64_t sinkhorn_knopp_iterations = 3;
};

std::vector<double> teacher_temp_schedule(double warmup_temp, double final_temp,
                                          int64_t warmup_epochs, int64_t epochs);

// What a center update needs from the teacher rows seen since the last one, on this process
// (or replica): sums of the raw rows, of their softmax and of the row entropies, and the count.
struct CenterSums {
  torch::Tensor values;  // (2K + 1) fp32, undefined until the first micro-batch
  int64_t rows = 0;
};

struct DINOLossStats {
  torch::Tensor teacher_entropy;
  torch::Tensor kl_uniform;
};

class DINOLossImpl : public torch::nn::Module {
 public:
  DINOLossImpl(const DINOLossOptions& options, std::shared_ptr<Communicator> comm);

  torch::Tensor forward(const torch::Tensor& student, const torch::Tensor& teacher, int64_t epoch);
  torch::Tensor forward_micro(const torch::Tensor& student, const torch::Tensor& teacher,
                              int64_t epoch, CenterSums& sums);
  // All-reduces `sums`, updates `center` and last_stats(), and empties `sums`.
  void update_center(CenterSums& sums);
  double teacher_temp(int64_t epoch) const;
  void set_epoch(int64_t epoch, const torch::Device& device);
  const DINOLossStats& last_stats() const { return stats_; }
  const DINOLossOptions& options() const { return options_; }

  torch::Tensor center;

 private:
  DINOLossOptions options_;
  std::shared_ptr<Communicator> comm_;
  std::vector<double> teacher_temps_;
  torch::Tensor temp_;  // set_epoch's: temp_epoch_'s temperature, on the device
  int64_t temp_epoch_ = -1;
  DINOLossStats stats_;
};
TORCH_MODULE(DINOLoss);

}  // namespace xdino::ssl
