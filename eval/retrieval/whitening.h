// PCA whitening of eval_copy_detection.py (utils.PCA with dim = feature width, whit 0.5).
//
// Contract:
//  - PcaWhitening::learn(features) takes the (N, D) float32 features of the whitening images
//    and returns the (D) mean and the (D, D) projection P = diag(d^-0.5) V^T, where (d, V) are
//    the eigenpairs of the second-moment matrix X^T X / N, sorted by decreasing eigenvalue,
//    eigenvalues below 1e-5 x the largest raised to that floor. As the official script, the
//    matrix is X^T X / N of the features as they are: the mean is subtracted from the queries
//    and the database before projecting, not from the whitening set (docs/evaluation.md).
//    The eigen-decomposition runs in float64 on the float32 matrix, the projection is rounded
//    to float32 (numpy.linalg.eigh's precision for float32 input).
//  - apply(x) = (x - mean) P^T, float32, (M, D) -> (M, D), on x's device (learn() keeps mean
//    and P on the CPU; apply copies them to x's device).
//  - Errors: xdino::Error for fewer than 2 rows or a width that differs from the features'.
#pragma once

#include <torch/torch.h>

namespace xdino::eval::retrieval {

class PcaWhitening {
 public:
  static PcaWhitening learn(const torch::Tensor& features);
  torch::Tensor apply(const torch::Tensor& x) const;

 private:
  torch::Tensor mean_;        // (D)
  torch::Tensor projection_;  // (D, D)
};

}  // namespace xdino::eval::retrieval
