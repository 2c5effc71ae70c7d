#include "ssl/ibot_loss.h"

#include "core/check.h"
#include "ssl/sinkhorn_knopp.h"

namespace xdino::ssl {

iBOTPatchLossImpl::iBOTPatchLossImpl(const IbotLossOptions& o, std::shared_ptr<Communicator> comm)
    : options_(o), comm_(comm ? std::move(comm) : local_communicator()) {
  XDINO_CHECK_ARG(o.out_dim > 0, "the iBOT head's out_dim must be positive, got ", o.out_dim);
  center = register_buffer("center", torch::zeros({1, o.out_dim}));
}

torch::Tensor iBOTPatchLossImpl::targets_micro(const torch::Tensor& teacher, double temp,
                                               double total_masked, IbotCenterSums& sums) {
  return targets_micro(
      teacher, temp, torch::full({1}, total_masked, teacher.options().dtype(torch::kFloat)), sums);
}

torch::Tensor iBOTPatchLossImpl::targets_micro(const torch::Tensor& teacher, double temp,
                                               const torch::Tensor& total_masked,
                                               IbotCenterSums& sums) {
  const int64_t K = options_.out_dim;
  XDINO_CHECK(teacher.dim() == 2 && teacher.size(1) == K,
              "iBOT teacher logits must be (masked patches, ", K, "), got ", teacher.sizes());
  torch::NoGradGuard no_grad;
  if (options_.centering == Centering::kSinkhornKnopp)
    return sinkhorn_knopp(teacher, temp, total_masked, options_.sinkhorn_knopp_iterations, *comm_);
  const torch::Tensor rows = teacher.to(torch::kFloat);
  const torch::Tensor part = torch::cat(
      {rows.sum(0), torch::full({1}, static_cast<double>(rows.size(0)), rows.options())});
  sums.values = sums.values.defined() ? sums.values + part : part;
  return torch::softmax((rows - center) / temp, -1);
}

void iBOTPatchLossImpl::update_center(IbotCenterSums& sums) {
  if (options_.centering != Centering::kCentering) return;
  torch::NoGradGuard no_grad;
  const int64_t K = options_.out_dim;
  XDINO_CHECK(sums.values.defined(), "iBOTPatchLoss::update_center needs targets_micro's sums");
  torch::Tensor all = sums.values;
  comm_->all_reduce_sum(all);
  sums = IbotCenterSums{};
  if (!comm_->owns_module_state()) return;
  // On the device, without reading the count: no masked patch anywhere leaves the centre.
  const torch::Tensor count = all.narrow(0, K, 1);
  const double m = options_.center_momentum;
  const torch::Tensor updated = center * m + all.narrow(0, 0, K).view({1, K}) / count * (1.0 - m);
  center.copy_(torch::where(count > 0, updated, center));
}

torch::Tensor iBOTPatchLossImpl::forward_masked(const torch::Tensor& student,
                                                const torch::Tensor& targets,
                                                const torch::Tensor& weights,
                                                int64_t images) const {
  XDINO_CHECK(student.dim() == 2 && student.sizes() == targets.sizes() && weights.dim() == 1 &&
                  weights.size(0) == student.size(0),
              "iBOT loss: student ", student.sizes(), ", targets ", targets.sizes(),
              " and weights ", weights.sizes(), " must be (n, K), (n, K) and (n)");
  XDINO_CHECK(images > 0, "iBOT loss needs the batch's global-crop rows, got ", images);
  // As DINOLoss: the division in the input dtype, the rest in float32 (float64 stays).
  // sum_k t_k log softmax(s)_k = <t, s> - logsumexp(s) sum_k t_k: a row-wise dot product and
  // one reduction, where log_softmax and the product would each write (and their backward
  // read) another n x K tensor; n x K is the step's largest (docs/dino.md, "What the options
  // cost").
  const auto dtype = torch::promote_types(student.scalar_type(), torch::kFloat);
  const torch::Tensor s = (student / options_.student_temp).to(dtype);
  const torch::Tensor t = targets.to(dtype);
  const torch::Tensor dots = torch::bmm(t.unsqueeze(1), s.unsqueeze(2)).view({-1});
  const torch::Tensor per_patch = dots - torch::logsumexp(s, -1) * t.sum(-1);
  return -(per_patch * weights.to(dtype)).sum() / static_cast<double>(images);
}

}  // namespace xdino::ssl
