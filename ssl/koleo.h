// The KoLeo regulariser of DINOv2 (Sablayrolles et al., "Spreading vectors for similarity
// search"; dinov2's loss/koleo_loss.py): it pushes each feature away from its nearest neighbour
// in the batch, so that the features spread evenly over the sphere (docs/dino.md, "KoLeo").
//
// Contract:
//  - koleo_loss(x): x (n, D), n >= 2, float32/float64 (half types are computed in float32, as
//    dinov2 means its autocast-free block to). Rows are L2-normalised (eps 1e-8); each row's
//    nearest neighbour j(i) is the other row of largest inner product (not differentiated);
//    d_i = || x^_i - x^_j(i) + 1e-8 || (PairwiseDistance's eps, added to every element);
//    returns -mean_i log(d_i + 1e-8), a 0-d tensor in x's (float32 or float64) dtype, with
//    gradients through both x^_i and x^_j(i).
//  - n < 2 or x not 2-d throws xdino::Error.
//  - The trainer takes it per global view, on the student's final-normed class tokens of this
//    process's (or replica's) rows, and sums the two views (dinov2's ssl_meta_arch).
#pragma once

#include <torch/torch.h>

namespace xdino::ssl {

torch::Tensor koleo_loss(const torch::Tensor& x);

}  // namespace xdino::ssl
