// Optimisers of main_dino.py (AdamW, SGD with momentum, DINO's LARS) with torch.optim's
// update rules, parameter groups and state_dict layout (docs/dino.md, "Schedules and optimiser").
//
// Contract:
//  - An Optimizer owns a list of ParamGroup (tensors shared with the model, plus names for
//    messages). lr and weight_decay live on the groups and are meant to be set by the
//    schedules before every step().
//  - step() updates every parameter whose grad is defined, with the group's lr and
//    weight_decay, exactly as torch.optim's single-tensor path (torch 1.13) does; a parameter
//    whose grad is undefined (None) is skipped entirely: no moment update, no weight decay.
//    set_update_path() picks how (train/update_path.h); AdamW implements every path, SGD and
//    LARS run tensor by tensor whatever is set.
//  - zero_grad() makes every grad undefined (set_to_none).
//  - state_dict() is torch.optim.Optimizer.state_dict(): {"state": {index: {...}},
//    "param_groups": [{hyper-parameters..., "params": [indices]}]}, indices numbering the
//    parameters group after group. AdamW state: step (int), exp_avg, exp_avg_sq; SGD:
//    momentum_buffer; LARS: mu. Tensors are returned as they are (caller moves them to CPU).
//  - load_state_dict() accepts that layout (step as int or as a tensor, as torch >= 1.12
//    writes it), restores hyper-parameters and per-parameter state, moving tensors to each
//    parameter's device and dtype. Group count or size mismatches and state shapes that do not
//    match their parameter throw xdino::Error naming the parameter.
//  - make_optimizer("adamw" | "sgd" | "lars", groups) builds main_dino.py's optimiser with its
//    constructor arguments; another name throws xdino::UsageError.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "train/update_path.h"

namespace xdino::train {

struct ParamGroup {
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;
  double lr = 0.0;
  double weight_decay = 0.0;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;
  void step();
  void zero_grad();

  void set_update_path(UpdatePath path) { path_ = path; }
  UpdatePath update_path() const { return path_; }

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  c10::IValue state_dict() const;
  void load_state_dict(const c10::IValue& state);

 protected:
  // One parameter's state: torch's per-parameter dict, in key order.
  struct ParamState {
    bool started = false;
    int64_t step = -1;  // -1: no "step" entry (SGD, LARS)
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    torch::Tensor& get(const std::string& key);
  };

  // The parameters of one group whose grad is defined, in group order, with their state.
  struct GroupBatch {
    std::vector<torch::Tensor> params, grads;
    std::vector<ParamState*> states;
  };
  // Updates one group; the default calls update() tensor by tensor.
  virtual void update_group(GroupBatch& batch, const ParamGroup& group);
  virtual void update(torch::Tensor& param, const torch::Tensor& grad, ParamState& state,
                      const ParamGroup& group) = 0;
  // The group's hyper-parameters, without "params", in torch's key order.
  virtual std::vector<std::pair<std::string, c10::IValue>> hyper(const ParamGroup& g) const = 0;
  // Reads back what hyper() wrote (lr and weight_decay are handled by the base class).
  virtual void load_hyper(const c10::impl::GenericDict& group) = 0;

 private:
  std::vector<ParamGroup> groups_;
  UpdatePath path_ = UpdatePath::kAuto;
  std::vector<ParamState> states_;   // flat index over groups
  std::vector<size_t> state_order_;  // flat indices in the order their state was created
};

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};
struct SGDOptions {
  double momentum = 0.9, dampening = 0.0;
  bool nesterov = false;
};
struct LARSOptions {
  double momentum = 0.9, eta = 0.001;
};

std::unique_ptr<Optimizer> make_adamw(std::vector<ParamGroup> groups, AdamWOptions o = {});
std::unique_ptr<Optimizer> make_sgd(std::vector<ParamGroup> groups, SGDOptions o = {});
std::unique_ptr<Optimizer> make_lars(std::vector<ParamGroup> groups, LARSOptions o = {});
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, std::vector<ParamGroup> groups);

}  // namespace xdino::train
