// iBOT's masked-patch loss as DINOv2 trains it (dinov2's loss/ibot_patch_loss.py; docs/dino.md,
// "iBOT"): the student sees some patch tokens of its global crops replaced by a mask token and
// learns to give, at those patches, the teacher's distribution for the unmasked image.
//
// Contract:
//  - iBOTPatchLoss(options, comm): `center` is a registered float32 buffer (1, K) (checkpoint
//    key ibot_patch_loss.center), zeros at first; comm is the step's communicator (processes
//    and replicas).
//  - targets_micro(teacher, temp, total_masked, sums): teacher (n, K) logits of this process's
//    masked patches (n may be 0), any float dtype; total_masked the count over every process.
//    Without gradient, float32 (n, K) rows that each sum to 1: softmax((t - center) / temp)
//    with the centre from before this step (centering; adds this process's raw rows to `sums`)
//    or Sinkhorn-Knopp over every process's masked patches (ssl/sinkhorn_knopp.h; the centre
//    stays as it is). Every process calls it, with or without masked patches of its own.
//    total_masked may be a one-element float32 tensor on the logits' device (summed there by
//    the step: no host read); with none anywhere the rows are (0, K).
//  - update_center(sums): centering only; one all-reduce of the sums and the count, then
//    center <- m center + (1 - m) (sum of every process's rows) / (their count). dinov2 takes
//    each rank's mean and averages the ranks; ours weighs each masked patch once, so that the
//    centre does not depend on how the batch is split over processes and replicas (the two
//    agree on one process, where the goldens are made). Replicas sharing the module: only the
//    owner writes.
//  - forward_masked(student, targets, weights, images): student (n, K) logits at the masked
//    patches, targets (n, K), weights (n,) = 1 / (masked patches of the patch's image);
//    returns the 0-d loss (float32; float64 for float64 logits) -sum_p w_p sum_k t_pk log
//    softmax(s_p / 0.1)_k / images, `images` counting every global-crop row of the batch, masked or
//    not (dinov2's forward_masked). n == 0 gives a zero that still carries the student's graph.
//  - Shapes that disagree throw xdino::Error naming them.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "distributed/communicator.h"
#include "ssl/loss.h"

namespace xdino::ssl {

struct IbotLossOptions {
  int64_t out_dim = 0;
  double student_temp = 0.1;
  double center_momentum = 0.9;
  Centering centering = Centering::kCentering;
  int64_t sinkhorn_knopp_iterations = 3;
};

struct IbotCenterSums {
  torch::Tensor values;  // (K + 1) float32: the raw rows' sum and their count
};

class iBOTPatchLossImpl : public torch::nn::Module {
 public:
  iBOTPatchLossImpl(const IbotLossOptions& options, std::shared_ptr<Communicator> comm);

  torch::Tensor targets_micro(const torch::Tensor& teacher, double temp, double total_masked,
                              IbotCenterSums& sums);
  torch::Tensor targets_micro(const torch::Tensor& teacher, double temp,
                              const torch::Tensor& total_masked, IbotCenterSums& sums);
  void update_center(IbotCenterSums& sums);
  torch::Tensor forward_masked(const torch::Tensor& student, const torch::Tensor& targets,
                               const torch::Tensor& weights, int64_t images) const;
  const IbotLossOptions& options() const { return options_; }

  torch::Tensor center;

 private:
  IbotLossOptions options_;
  std::shared_ptr<Communicator> comm_;
};
TORCH_MODULE(iBOTPatchLoss);

}  // namespace xdino::ssl
