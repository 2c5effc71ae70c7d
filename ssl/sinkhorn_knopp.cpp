#include "ssl/sinkhorn_knopp.h"

#include "core/check.h"

namespace xdino::ssl {

torch::Tensor sinkhorn_knopp(const torch::Tensor& logits, double temp, double samples,
                             int64_t iterations, Communicator& comm) {
  XDINO_CHECK(logits.dim() == 2, "Sinkhorn-Knopp needs (rows, prototypes) logits, got ",
              logits.sizes());
  XDINO_CHECK(temp > 0 && samples > 0, "Sinkhorn-Knopp needs temp > 0 and samples > 0, got ", temp,
              " and ", samples);
  return sinkhorn_knopp(logits, temp,
                        torch::full({1}, samples, logits.options().dtype(torch::kFloat)),
                        iterations, comm);
}

torch::Tensor sinkhorn_knopp(const torch::Tensor& logits, double temp, const torch::Tensor& samples,
                             int64_t iterations, Communicator& comm) {
  XDINO_CHECK(logits.dim() == 2 && temp > 0 && samples.numel() == 1,
              "Sinkhorn-Knopp needs (rows, prototypes) logits, temp > 0 and one sample count, "
              "got ",
              logits.sizes(), ", ", temp, " and ", samples.sizes());
  torch::NoGradGuard no_grad;
  const double prototypes = static_cast<double>(logits.size(1));
  // dinov2's Q is (K, R); ours stays (R, K), rows contiguous, and is divided in place: the
  // same sums and quotients (a few ulps apart where two divisions become one), in half the
  // passes over R x K floats, which is what the step pays for (docs/dino.md, "What the
  // options cost").
  torch::Tensor q = logits.to(torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
  q.div_(temp).exp_();
  torch::Tensor total = q.sum();
  comm.all_reduce_sum(total);
  q.div_(total);
  for (int64_t i = 0; i < iterations; ++i) {
    torch::Tensor per_prototype = q.sum(0, /*keepdim=*/true);
    comm.all_reduce_sum(per_prototype);
    q.div_(per_prototype.mul_(prototypes));
    q.div_(q.sum(1, /*keepdim=*/true).mul_(samples));
  }
  return q.mul_(samples);
}

}  // namespace xdino::ssl
