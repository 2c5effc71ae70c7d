#include "eval/linear_checkpoint.h"

#include <cmath>

#include "core/check.h"
#include "core/ivalue.h"
#include "core/pth.h"

namespace xdino::eval {
namespace {

c10::impl::GenericList doubles(std::initializer_list<double> values) {
  auto list = xdino::make_list();
  for (const double v : values) list.push_back(v);
  return list;
}

xdino::IDict state_dict_of(const c10::IValue& root, const std::string& what) {
  xdino::IDict d = xdino::as_dict(root, what);
  if (const c10::IValue* sd = xdino::find(d, "state_dict")) return xdino::as_dict(*sd, what);
  return d;
}

torch::Tensor linear_tensor(const xdino::IDict& state, const std::string& name,
                            const std::string& what) {
  for (const std::string& key : {"module.linear." + name, "linear." + name}) {
    if (const c10::IValue* v = xdino::find(state, key)) {
      XDINO_CHECK(v->isTensor(), what, ": ", key, " is not a tensor");
      return v->toTensor();
    }
  }
  XDINO_FAIL(what, " has no module.linear.", name, " (not a linear classifier checkpoint)");
}

}  // namespace

void save_linear_checkpoint(const std::filesystem::path& path, LinearClassifier& classifier,
                            const train::Optimizer& optimizer, int64_t next_epoch,
                            const LinearOutcome& best, const LinearCheckpointInfo& info) {
  xdino::IDict weights = xdino::make_dict();
  weights.insert("module.linear.weight", classifier->linear->weight.detach().to(torch::kCPU));
  weights.insert("module.linear.bias", classifier->linear->bias.detach().to(torch::kCPU));

  // The optimizer's param group as CosineAnnealingLR leaves it: initial_lr added.
  c10::IValue opt = optimizer.state_dict();
  xdino::IDict opt_dict = xdino::as_dict(opt, "optimizer state");
  auto groups = opt_dict.at("param_groups").toList();
  for (size_t i = 0; i < groups.size(); ++i) {
    xdino::IDict g = groups.get(i).toGenericDict();
    g.insert_or_assign("initial_lr", info.base_lr);
  }

  const double next_lr = cosine_lr(info.base_lr, next_epoch, info.epochs);
  xdino::IDict sched = xdino::make_dict();
  sched.insert("T_max", info.epochs);
  sched.insert("eta_min", int64_t{0});
  sched.insert("base_lrs", doubles({info.base_lr}));
  sched.insert("last_epoch", next_epoch);
  sched.insert("_step_count", next_epoch + 1);
  sched.insert("verbose", false);
  sched.insert("_get_lr_called_within_step", false);
  sched.insert("_last_lr", doubles({next_lr}));

  xdino::IDict ck = xdino::make_dict();
  ck.insert("epoch", next_epoch);
  ck.insert("state_dict", weights);
  ck.insert("optimizer", opt);
  ck.insert("scheduler", sched);
  ck.insert("best_acc", best.best_acc);
  ck.insert("best_epoch", best.best_epoch);
  ck.insert("best_acc5", std::isnan(best.best_acc5) ? c10::IValue() : c10::IValue(best.best_acc5));
  ck.insert("protocol", info.protocol);
  ck.insert("features", info.features);
  save_pth(path, ck);
}

void load_linear_weights(const std::filesystem::path& path, LinearClassifier& classifier) {
  const std::string what = path.string();
  const xdino::IDict state = state_dict_of(load_pth(path), what);
  const torch::Tensor w = linear_tensor(state, "weight", what);
  const torch::Tensor b = linear_tensor(state, "bias", what);
  auto& lin = classifier->linear;
  XDINO_CHECK(w.sizes() == lin->weight.sizes() && b.sizes() == lin->bias.sizes(), what,
              ": linear weight ", w.sizes(), " / bias ", b.sizes(), " do not fit the classifier ",
              lin->weight.sizes(), " (check --num_labels, --n_last_blocks, --avgpool_patchtokens)");
  torch::NoGradGuard no_grad;
  lin->weight.copy_(w);
  lin->bias.copy_(b);
}

int64_t restore_linear_checkpoint(const std::filesystem::path& path, LinearClassifier& classifier,
                                  train::Optimizer& optimizer, LinearOutcome& best) {
  const std::string what = path.string();
  load_linear_weights(path, classifier);
  const xdino::IDict ck = xdino::as_dict(load_pth(path), what);
  optimizer.load_state_dict(xdino::get(ck, "optimizer", what));
  best.best_acc = xdino::as_double(xdino::get(ck, "best_acc", what), "best_acc");
  if (const c10::IValue* e = xdino::find(ck, "best_epoch"))
    best.best_epoch = xdino::as_int(*e, "best_epoch");
  if (const c10::IValue* a = xdino::find(ck, "best_acc5"); a != nullptr && !a->isNone())
    best.best_acc5 = xdino::as_double(*a, "best_acc5");
  return xdino::as_int(xdino::get(ck, "epoch", what), "epoch");
}

std::string linear_checkpoint_features(const std::filesystem::path& path) {
  const xdino::IDict ck = xdino::as_dict(load_pth(path), path.string());
  const c10::IValue* f = xdino::find(ck, "features");
  return f != nullptr && f->isString() ? f->toStringRef() : std::string();
}

}  // namespace xdino::eval
