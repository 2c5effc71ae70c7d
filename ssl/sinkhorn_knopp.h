// Sinkhorn-Knopp centering of the teacher's outputs (SwAV; DINOv2's train.centering =
// "sinkhorn_knopp", dinov2's loss/dino_clstoken_loss.py and ibot_patch_loss.py): instead of
// subtracting a running centre, the teacher's targets are made to use every prototype equally
// over the batch of every process (docs/dino.md, "Sinkhorn-Knopp").
//
// Contract:
//  - sinkhorn_knopp(logits, temp, samples, iterations, comm): logits (R, K) of this process's
//    rows, any float dtype (computed in float32, as dinov2 casts). Without gradient:
//    Q = exp(logits / temp)^T (K x R), no centre and no max subtraction (an entry of
//    logits / temp above ~88 overflows float32, as it does in dinov2: DINO's head gives
//    cosines, |logit| <= 1); Q /= sum(Q) all-reduced; then `iterations` times: Q /= its
//    per-prototype sums, all-reduced, and / K; Q /= its per-sample sums, local, and / samples;
//    finally Q *= samples. Returns Q^T (R, K) float32, contiguous: each row a distribution
//    (sums to 1).
//  - `samples` is the number of rows over every process: R * world for DINO's class tokens,
//    the all-reduced count of masked patches for iBOT's. The overload that takes it as a
//    tensor (one element, float32, on logits' device) keeps a count that was summed on the
//    device there: no host read. With 0 samples everywhere there is no row to balance: R = 0,
//    and it returns an empty (0, K).
//  - Every process must call it with the same iterations (iterations + 1 all-reduces). A
//    shape that is not 2-d, temp <= 0 or samples <= 0 throws xdino::Error.
#pragma once

#include <torch/torch.h>

#include "distributed/communicator.h"

namespace xdino::ssl {

torch::Tensor sinkhorn_knopp(const torch::Tensor& logits, double temp, double samples,
                             int64_t iterations, Communicator& comm);
torch::Tensor sinkhorn_knopp(const torch::Tensor& logits, double temp, const torch::Tensor& samples,
                             int64_t iterations, Communicator& comm);

}  // namespace xdino::ssl
