#include "models/batch_norm.h"

#include <cstdint>

#include "core/check.h"

namespace xdino::models {
namespace {

// The communicator travels through autograd's saved data as an integer: autograd keeps only
// IValues, and the communicator outlives every graph built while it is in use.
struct AllReduceSum : torch::autograd::Function<AllReduceSum> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& t,
                               Communicator* communicator) {
    ctx->saved_data["communicator"] =
        static_cast<int64_t>(reinterpret_cast<intptr_t>(communicator));
    torch::Tensor out = t.clone();
    communicator->all_reduce_sum(out);
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* communicator = reinterpret_cast<Communicator*>(
        static_cast<intptr_t>(ctx->saved_data["communicator"].toInt()));
    torch::Tensor g = grads[0].contiguous().clone();
    communicator->all_reduce_sum(g);
    return {g, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor differentiable_all_reduce_sum(const torch::Tensor& t, Communicator& communicator) {
  if (communicator.world_size() == 1) return t;
  return AllReduceSum::apply(t, &communicator);
}

BatchNormImpl::BatchNormImpl(int64_t num_features_, double eps_, double momentum_)
    : num_features(num_features_), eps(eps_), momentum(momentum_) {
  weight = register_parameter("weight", torch::ones({num_features}));
  bias = register_parameter("bias", torch::zeros({num_features}));
  running_mean = register_buffer("running_mean", torch::zeros({num_features}));
  running_var = register_buffer("running_var", torch::ones({num_features}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

torch::Tensor BatchNormImpl::forward(const torch::Tensor& x) {
  XDINO_CHECK(x.dim() >= 2 && x.size(1) == num_features, "BatchNorm over ", num_features,
              " channels got an input of shape ", x.sizes());
  if (is_training() && communicator_ && communicator_->world_size() > 1) return forward_synced(x);
  if (is_training()) num_batches_tracked.add_(1);
  return torch::batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps,
                           at::globalContext().userEnabledCuDNN());
}

torch::Tensor BatchNormImpl::forward_synced(const torch::Tensor& x_in) {
  // Statistics in float32 even under autocast, as torch's batch_norm does.
  const torch::Tensor x = x_in.scalar_type() == torch::kDouble ? x_in : x_in.to(torch::kFloat);
  std::vector<int64_t> reduce_dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) reduce_dims.push_back(d);
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = num_features;

  Communicator& comm = *communicator_;
  const double local_count = static_cast<double>(x.numel() / num_features);
  // Pass 1: sums and the element count; pass 2: squared deviations from the global mean
  // (two passes keep the variance accurate in float32).
  torch::Tensor sum_and_count =
      torch::cat({x.sum(reduce_dims), torch::full({1}, local_count, x.options())});
  sum_and_count = differentiable_all_reduce_sum(sum_and_count, comm);
  const torch::Tensor count = sum_and_count.narrow(0, num_features, 1).detach();
  const torch::Tensor mean = sum_and_count.narrow(0, 0, num_features) / count;
  const torch::Tensor centred = x - mean.view(shape);
  const torch::Tensor var =
      differentiable_all_reduce_sum(centred.pow(2).sum(reduce_dims), comm) / count;

  if (comm.owns_module_state()) {
    torch::NoGradGuard no_grad;
    // Bessel's factor n / (n - 1) on the device, in float64 as the host would compute it: a
    // read of the count here would stop the host at every BatchNorm of every forward.
    const torch::Tensor n = count.to(torch::kDouble);
    const torch::Tensor bessel = (n / (n - 1).clamp_min(1.0)).to(running_var.dtype());
    running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype()), momentum);
    running_var.mul_(1 - momentum).add_(var.detach().to(running_var.dtype()) * bessel, momentum);
    num_batches_tracked.add_(1);
  }
  const torch::Tensor scale = weight * torch::rsqrt(var + eps);
  const torch::Tensor y = centred * scale.view(shape) + bias.view(shape);
  return y.to(x_in.scalar_type());
}

void set_batch_norm_communicator(torch::nn::Module& root,
                                 const std::shared_ptr<Communicator>& communicator) {
  for (const auto& module : root.modules(/*include_self=*/true))
    if (auto* bn = dynamic_cast<BatchNormImpl*>(module.get())) bn->set_communicator(communicator);
}

}  // namespace xdino::models
