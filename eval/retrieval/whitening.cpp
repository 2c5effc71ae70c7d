#include "eval/retrieval/whitening.h"

#include "core/check.h"

namespace xdino::eval::retrieval {

PcaWhitening PcaWhitening::learn(const torch::Tensor& features) {
  XDINO_CHECK(features.dim() == 2 && features.size(0) >= 2,
              "whitening needs at least 2 feature rows, got ", features.sizes());
  const torch::Tensor x = features.to(torch::kCPU, torch::kFloat32);
  PcaWhitening w;
  w.mean_ = x.mean(0);
  const torch::Tensor second_moment = torch::mm(x.t(), x) / static_cast<double>(x.size(0));
  auto [values, vectors] = torch::linalg_eigh(second_moment.to(torch::kFloat64));
  values = values.to(torch::kFloat32);
  vectors = vectors.to(torch::kFloat32);
  const torch::Tensor floor = values.max() * 1e-5f;
  values = torch::where(values < floor, floor, values);
  const torch::Tensor order = values.argsort(/*dim=*/0, /*descending=*/true);
  values = values.index_select(0, order);
  vectors = vectors.index_select(1, order);
  w.projection_ = vectors.t() * values.pow(-0.5f).unsqueeze(1);  // diag(d^-1/2) V^T
  return w;
}

torch::Tensor PcaWhitening::apply(const torch::Tensor& x) const {
  XDINO_CHECK(x.dim() == 2 && x.size(1) == mean_.size(0), "whitening expects (M, ", mean_.size(0),
              ") features, got ", x.sizes());
  // Learned on the CPU (the float64 eigen-decomposition); applied where the features are, as
  // copy detection searches on CUDA when asked (the card's run of 2026-11-28 threw here).
  return torch::mm(x.to(torch::kFloat32) - mean_.to(x.device()), projection_.to(x.device()).t());
}

}  // namespace xdino::eval::retrieval
