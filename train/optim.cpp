#include "train/optim.h"

#include <cmath>
#include <tuple>

#include "core/check.h"
#include "core/ivalue.h"
#include "kernels/cpu/fused_cpu.h"

namespace xdino::train {

using kernels::fused_adamw;
using kernels::fused_cpu_applies;

torch::Tensor& Optimizer::ParamState::get(const std::string& key) {
  for (auto& [k, t] : tensors)
    if (k == key) return t;
  tensors.emplace_back(key, torch::Tensor());
  return tensors.back().second;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {
  size_t n = 0;
  for (const auto& g : groups_) {
    XDINO_CHECK(g.names.empty() || g.names.size() == g.params.size(), "parameter group has ",
                g.params.size(), " tensors but ", g.names.size(), " names");
    n += g.params.size();
  }
  states_.resize(n);
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params) p.mutable_grad().reset();
}

void Optimizer::step() {
  torch::NoGradGuard no_grad;
  size_t index = 0;
  for (const auto& g : groups_) {
    GroupBatch batch;
    for (const auto& p : g.params) {
      ParamState& s = states_[index];
      const torch::Tensor& grad = p.grad();
      if (grad.defined()) {
        if (!s.started) {
          s.started = true;
          state_order_.push_back(index);
        }
        batch.params.push_back(p);
        batch.grads.push_back(grad);
        batch.states.push_back(&s);
      }
      ++index;
    }
    if (!batch.params.empty()) update_group(batch, g);
  }
}

void Optimizer::update_group(GroupBatch& batch, const ParamGroup& group) {
  for (size_t i = 0; i < batch.params.size(); ++i)
    update(batch.params[i], batch.grads[i], *batch.states[i], group);
}

c10::IValue Optimizer::state_dict() const {
  auto state = make_int_dict();
  for (size_t index : state_order_) {
    const ParamState& s = states_[index];
    auto entry = make_dict();
    if (s.step >= 0) entry.insert("step", s.step);
    for (const auto& [key, t] : s.tensors) entry.insert(key, t);
    state.insert(static_cast<int64_t>(index), entry);
  }
  auto groups = make_list();
  int64_t index = 0;
  for (const auto& g : groups_) {
    auto group = make_dict();
    for (auto& [key, value] : hyper(g)) group.insert(key, value);
    c10::List<int64_t> params;
    for (size_t i = 0; i < g.params.size(); ++i) params.push_back(index++);
    group.insert("params", params);
    groups.push_back(group);
  }
  auto out = make_dict();
  out.insert("state", state);
  out.insert("param_groups", groups);
  return out;
}

void Optimizer::load_state_dict(const c10::IValue& value) {
  const auto dict = as_dict(value, "optimizer state");
  const auto saved_groups = get(dict, "param_groups", "optimizer state").toListRef();
  XDINO_CHECK(saved_groups.size() == groups_.size(), "optimizer state has ", saved_groups.size(),
              " parameter groups, this ", name(), " optimiser ", groups_.size());
  std::vector<std::pair<size_t, size_t>> where;  // flat index -> (group, position)
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto g = as_dict(saved_groups[gi], "optimizer param group");
    const auto n = get(g, "params", "optimizer param group").toListRef().size();
    XDINO_CHECK(n == groups_[gi].params.size(), "optimizer param group ", gi, " holds ", n,
                " tensors in the checkpoint but ", groups_[gi].params.size(),
                " in this model: the checkpoint was made for another model or flags");
    groups_[gi].lr = as_double(get(g, "lr", "optimizer param group"), "lr");
    groups_[gi].weight_decay = as_double(get(g, "weight_decay", "optimizer param group"), "wd");
    if (gi == 0) load_hyper(g);
    for (size_t i = 0; i < n; ++i) where.emplace_back(gi, i);
  }
  std::vector<ParamState> states(states_.size());
  std::vector<size_t> order;
  for (const auto& entry : as_dict(get(dict, "state", "optimizer state"), "optimizer state")) {
    const int64_t index = as_int(entry.key(), "optimizer state index");
    XDINO_CHECK(index >= 0 && static_cast<size_t>(index) < states.size(),
                "optimizer state refers to parameter ", index, " of ", states.size());
    const auto [gi, pi] = where[static_cast<size_t>(index)];
    const torch::Tensor& p = groups_[gi].params[pi];
    const std::string pname =
        groups_[gi].names.empty() ? std::to_string(index) : groups_[gi].names[pi];
    ParamState& s = states[static_cast<size_t>(index)];
    s.started = true;
    for (const auto& kv : as_dict(entry.value(), "optimizer state of " + pname)) {
      const std::string key = kv.key().toStringRef();
      if (key == "step") {
        s.step = as_int(kv.value(), "optimizer step of " + pname);
        continue;
      }
      XDINO_CHECK(kv.value().isTensor(), "optimizer state '", key, "' of ", pname,
                  " is not a tensor");
      const torch::Tensor t = kv.value().toTensor();
      XDINO_CHECK(t.sizes() == p.sizes(), "optimizer state '", key, "' of ", pname, " has shape ",
                  t.sizes(), ", the parameter ", p.sizes());
      s.tensors.emplace_back(key, t.to(p.device(), p.scalar_type()).clone());
    }
    order.push_back(static_cast<size_t>(index));
  }
  states_ = std::move(states);
  state_order_ = std::move(order);
}

namespace {

class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions o) : Optimizer(std::move(groups)), o_(o) {}
  std::string name() const override { return "adamw"; }

 protected:
  void update_group(GroupBatch& b, const ParamGroup& g) override {
    const size_t n = b.params.size();
    std::vector<torch::Tensor> exp_avg(n), exp_avg_sq(n);
    for (size_t i = 0; i < n; ++i) {
      ParamState& s = *b.states[i];
      std::tie(exp_avg[i], exp_avg_sq[i]) = moments(b.params[i], s);
      s.step += 1;
    }
    UpdatePath path = update_path();
    if (path == UpdatePath::kAuto)
      path = fused_cpu_applies(b.params) && fused_cpu_applies(b.grads) &&
                     fused_cpu_applies(exp_avg) && fused_cpu_applies(exp_avg_sq)
                 ? UpdatePath::kFusedCpu
                 : UpdatePath::kMultiTensor;
    switch (path) {
      case UpdatePath::kMultiTensor:
        return multi_tensor(b, exp_avg, exp_avg_sq, g);
      case UpdatePath::kFusedCpu:
        for (size_t i = 0; i < n; ++i)
          XDINO_CHECK(
              fused_adamw(b.params[i], b.grads[i], exp_avg[i], exp_avg_sq[i],
                          {g.lr, g.weight_decay, o_.beta1, o_.beta2, o_.eps, b.states[i]->step}),
              "the fused CPU AdamW takes contiguous float32 CPU tensors only");
        return;
      default:
        for (size_t i = 0; i < n; ++i)
          per_tensor(b.params[i], b.grads[i], exp_avg[i], exp_avg_sq[i], b.states[i]->step, g);
    }
  }
  void update(torch::Tensor& p, const torch::Tensor& grad, ParamState& s,
              const ParamGroup& g) override {
    auto [exp_avg, exp_avg_sq] = moments(p, s);
    s.step += 1;
    per_tensor(p, grad, exp_avg, exp_avg_sq, s.step, g);
  }
  std::vector<std::pair<std::string, c10::IValue>> hyper(const ParamGroup& g) const override {
    return {{"lr", g.lr},
            {"betas", c10::ivalue::Tuple::create({o_.beta1, o_.beta2})},
            {"eps", o_.eps},
            {"weight_decay", g.weight_decay},
            {"amsgrad", false}};
  }
  // The moments of one parameter, created as zeros on its first update.
  static std::pair<torch::Tensor, torch::Tensor> moments(const torch::Tensor& p, ParamState& s) {
    if (s.step < 0) {
      s.step = 0;
      s.get("exp_avg") = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      s.get("exp_avg_sq") = torch::zeros_like(p, torch::MemoryFormat::Preserve);
    }
    torch::Tensor exp_avg = s.get("exp_avg"), exp_avg_sq = s.get("exp_avg_sq");
    XDINO_CHECK(exp_avg.defined() && exp_avg_sq.defined(),
                "AdamW state lacks exp_avg or exp_avg_sq: the optimizer state is incomplete");
    return {exp_avg, exp_avg_sq};
  }
  double bias_correction1(int64_t step) const {
    return 1.0 - std::pow(o_.beta1, static_cast<double>(step));
  }
  double bias_correction2(int64_t step) const {
    return 1.0 - std::pow(o_.beta2, static_cast<double>(step));
  }
  // torch.optim's _single_tensor_adamw (1.13), op for op.
  void per_tensor(torch::Tensor& p, const torch::Tensor& grad, torch::Tensor& exp_avg,
                  torch::Tensor& exp_avg_sq, int64_t step, const ParamGroup& g) const {
    p.mul_(1.0 - g.lr * g.weight_decay);
    exp_avg.mul_(o_.beta1).add_(grad, 1.0 - o_.beta1);
    exp_avg_sq.mul_(o_.beta2).addcmul_(grad, grad, 1.0 - o_.beta2);
    const double step_size = g.lr / bias_correction1(step);
    const auto denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2(step))).add_(o_.eps);
    p.addcdiv_(exp_avg, denom, -step_size);
  }
  // torch.optim's _multi_tensor_adamw (1.13): the same ops over the whole group. Steps may
  // differ between parameters (the frozen last layer lags), hence per-tensor scalars.
  void multi_tensor(GroupBatch& b, std::vector<torch::Tensor>& exp_avg,
                    std::vector<torch::Tensor>& exp_avg_sq, const ParamGroup& g) const {
    std::vector<c10::Scalar> neg_step_size, bc2_sqrt;
    for (const ParamState* s : b.states) {
      neg_step_size.emplace_back(-(g.lr / bias_correction1(s->step)));
      bc2_sqrt.emplace_back(std::sqrt(bias_correction2(s->step)));
    }
    at::_foreach_mul_(b.params, 1.0 - g.lr * g.weight_decay);
    at::_foreach_mul_(exp_avg, o_.beta1);
    at::_foreach_add_(exp_avg, b.grads, 1.0 - o_.beta1);
    at::_foreach_mul_(exp_avg_sq, o_.beta2);
    at::_foreach_addcmul_(exp_avg_sq, b.grads, b.grads, 1.0 - o_.beta2);
    auto denom = at::_foreach_sqrt(exp_avg_sq);
    at::_foreach_div_(denom, bc2_sqrt);
    at::_foreach_add_(denom, o_.eps);
    at::_foreach_addcdiv_(b.params, exp_avg, denom, neg_step_size);
  }
  void load_hyper(const IDict& g) override {
    if (const auto* betas = find(g, "betas")) {
      const auto b =
          betas->isTuple() ? betas->toTupleRef().elements().vec() : betas->toListRef().vec();
      XDINO_CHECK(b.size() == 2, "AdamW betas should hold 2 numbers, found ", b.size());
      o_.beta1 = as_double(b[0], "beta1");
      o_.beta2 = as_double(b[1], "beta2");
    }
    if (const auto* eps = find(g, "eps")) o_.eps = as_double(*eps, "eps");
    if (const auto* amsgrad = find(g, "amsgrad"))
      XDINO_CHECK(!amsgrad->isBool() || !amsgrad->toBool(),
                  "the checkpoint's AdamW uses amsgrad, which DINO never does");
  }

 private:
  AdamWOptions o_;
};

class SGD final : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions o) : Optimizer(std::move(groups)), o_(o) {}
  std::string name() const override { return "sgd"; }

 protected:
  void update(torch::Tensor& p, const torch::Tensor& grad, ParamState& s,
              const ParamGroup& g) override {
    torch::Tensor d_p = g.weight_decay != 0 ? grad.add(p, g.weight_decay) : grad;
    if (o_.momentum != 0) {
      torch::Tensor& buf = s.get("momentum_buffer");  // the only get(): stays valid
      if (!buf.defined())
        buf = d_p.clone().detach();
      else
        buf.mul_(o_.momentum).add_(d_p, 1.0 - o_.dampening);
      d_p = o_.nesterov ? d_p.add(buf, o_.momentum) : buf;
    }
    p.add_(d_p, -g.lr);
  }
  std::vector<std::pair<std::string, c10::IValue>> hyper(const ParamGroup& g) const override {
    return {{"lr", g.lr},
            {"momentum", o_.momentum},
            {"dampening", o_.dampening},
            {"weight_decay", g.weight_decay},
            {"nesterov", o_.nesterov}};
  }
  void load_hyper(const IDict& g) override {
    if (const auto* m = find(g, "momentum")) o_.momentum = as_double(*m, "momentum");
    if (const auto* d = find(g, "dampening")) o_.dampening = as_double(*d, "dampening");
    if (const auto* n = find(g, "nesterov")) o_.nesterov = as_int(*n, "nesterov") != 0;
  }

 private:
  SGDOptions o_;
};

// DINO's utils.LARS (from Barlow Twins): decay and trust ratio on every non-1-D tensor.
class LARS final : public Optimizer {
 public:
  LARS(std::vector<ParamGroup> groups, LARSOptions o) : Optimizer(std::move(groups)), o_(o) {}
  std::string name() const override { return "lars"; }

 protected:
  void update(torch::Tensor& p, const torch::Tensor& grad, ParamState& s,
              const ParamGroup& g) override {
    torch::Tensor dp = grad;
    if (p.dim() != 1) {
      dp = dp.add(p, g.weight_decay);
      const auto param_norm = torch::norm(p);
      const auto update_norm = torch::norm(dp);
      const auto one = torch::ones_like(param_norm);
      const auto q = torch::where(
          param_norm > 0.0, torch::where(update_norm > 0, (o_.eta * param_norm / update_norm), one),
          one);
      dp = dp.mul(q);
    }
    torch::Tensor& mu = s.get("mu");
    if (!mu.defined()) mu = torch::zeros_like(p);
    mu.mul_(o_.momentum).add_(dp);
    p.add_(mu, -g.lr);
  }
  std::vector<std::pair<std::string, c10::IValue>> hyper(const ParamGroup& g) const override {
    return {{"lr", g.lr},
            {"weight_decay", g.weight_decay},
            {"momentum", o_.momentum},
            {"eta", o_.eta},
            {"weight_decay_filter", c10::IValue()},
            {"lars_adaptation_filter", c10::IValue()}};
  }
  void load_hyper(const IDict& g) override {
    if (const auto* m = find(g, "momentum")) o_.momentum = as_double(*m, "momentum");
    if (const auto* e = find(g, "eta")) o_.eta = as_double(*e, "eta");
  }

 private:
  LARSOptions o_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adamw(std::vector<ParamGroup> groups, AdamWOptions o) {
  return std::make_unique<AdamW>(std::move(groups), o);
}
std::unique_ptr<Optimizer> make_sgd(std::vector<ParamGroup> groups, SGDOptions o) {
  return std::make_unique<SGD>(std::move(groups), o);
}
std::unique_ptr<Optimizer> make_lars(std::vector<ParamGroup> groups, LARSOptions o) {
  return std::make_unique<LARS>(std::move(groups), o);
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<ParamGroup> groups) {
  if (name == "adamw") return make_adamw(std::move(groups));
  if (name == "sgd") return make_sgd(std::move(groups));  // lr 0, momentum 0.9
  if (name == "lars") return make_lars(std::move(groups));
  XDINO_FAIL_ARG("unknown optimizer '", name, "' (expected adamw, sgd or lars)");
}

}  // namespace xdino::train
