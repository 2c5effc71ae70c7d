#include "ssl/koleo.h"

#include "core/check.h"

namespace xdino::ssl {

torch::Tensor koleo_loss(const torch::Tensor& x) {
  XDINO_CHECK(x.dim() == 2 && x.size(0) >= 2, "KoLeo needs (n >= 2, D) rows, got ", x.sizes());
  const torch::Tensor v = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  const torch::Tensor unit = v / v.norm(2, 1, /*keepdim=*/true).clamp_min(1e-8);
  torch::Tensor nearest;
  {
    torch::NoGradGuard no_grad;
    torch::Tensor dots = torch::mm(unit, unit.t());
    dots.fill_diagonal_(-1);  // a row is not its own neighbour
    nearest = dots.argmax(1);
  }
  const torch::Tensor d = (unit - unit.index_select(0, nearest) + 1e-8).norm(2, 1);
  return -torch::log(d + 1e-8).mean();
}

}  // namespace xdino::ssl
