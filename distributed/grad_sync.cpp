#include "distributed/grad_sync.h"

#include "core/check.h"

namespace xdino::distributed {

void broadcast_module(torch::nn::Module& module, Communicator& communicator) {
  if (communicator.world_size() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> state;
  for (auto& p : module.parameters()) state.push_back(p);
  for (auto& b : module.buffers()) state.push_back(b);
  communicator.broadcast(state, 0);
}

GradientSynchronizer::GradientSynchronizer(std::vector<torch::Tensor> params,
                                           std::shared_ptr<Communicator> comm, int64_t bucket_bytes,
                                           bool overlap)
    : params_(std::move(params)), comm_(std::move(comm)), overlap_(overlap) {
  if (comm_->world_size() == 1) return;
  slots_.resize(params_.size());
  // Reverse registration order approximates the order in which backward finishes them.
  int64_t filled = bucket_bytes;
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    const int64_t bytes = p.numel() * p.element_size();
    if (buckets_.empty() || filled + bytes > bucket_bytes ||
        buckets_.back().flat.scalar_type() != p.scalar_type()) {
      buckets_.emplace_back();
      buckets_.back().flat = torch::empty({0}, p.options());
      filled = 0;
    }
    Bucket& b = buckets_.back();
    slots_[k] = {buckets_.size() - 1, b.flat.numel()};
    b.params.push_back(k);
    b.flat = torch::empty({b.flat.numel() + p.numel()}, p.options());
    filled += bytes;
  }
  if (!overlap_) return;
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(params_[k].register_hook([this, k](torch::Tensor grad) {
      on_gradient(k, grad);
      return torch::Tensor();  // leave the gradient itself unchanged
    }));
  }
}

GradientSynchronizer::~GradientSynchronizer() {
  for (size_t k = 0; k < hooks_.size(); ++k) params_[k].remove_hook(hooks_[k]);
}

void GradientSynchronizer::begin() {
  if (buckets_.empty()) return;
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
  for (Slot& s : slots_) s.ready = false;
  next_launch_ = 0;
}

void GradientSynchronizer::on_gradient(size_t index, const torch::Tensor& grad) {
  Slot& slot = slots_[index];
  XDINO_CHECK(!slot.ready, "parameter ", index,
              " got two gradients in one backward; "
              "GradientSynchronizer::begin() must run before every backward");
  Bucket& bucket = buckets_[slot.bucket];
  torch::NoGradGuard no_grad;
  bucket.flat.narrow(0, slot.offset, grad.numel()).copy_(grad.reshape({-1}));
  slot.ready = true;
  --bucket.pending;
  launch_ready_buckets();
}

void GradientSynchronizer::launch_ready_buckets() {
  const double world = comm_->world_size();
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_++];
    b.flat.div_(world);  // average before summing, as DDP does, so fp16 does not overflow
    b.work = comm_->all_reduce_sum_async(b.flat);
  }
}

void GradientSynchronizer::finish() {
  if (buckets_.empty()) return;
  torch::NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    if (overlap_ && b.pending == 0) continue;
    // Gradients that never arrived (or all of them, without overlap) are taken from .grad
    // now; missing ones count as zeros.
    for (size_t k : b.params) {
      if (overlap_ && slots_[k].ready) continue;
      const torch::Tensor& g = params_[k].grad();
      auto dst = b.flat.narrow(0, slots_[k].offset, params_[k].numel());
      if (g.defined())
        dst.copy_(g.reshape({-1}));
      else
        dst.zero_();
      slots_[k].ready = true;
    }
    b.pending = 0;
  }
  launch_ready_buckets();
  for (Bucket& b : buckets_) {
    if (b.work) b.work->wait();
    for (size_t k : b.params) {
      torch::Tensor& p = params_[k];
      auto avg = b.flat.narrow(0, slots_[k].offset, p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(avg);
      else
        p.mutable_grad() = avg.clone();
    }
  }
}

}  // namespace xdino::distributed
