#include "ssl/student_update.h"

namespace xdino::ssl {

std::vector<train::ParamGroup> dino_param_groups(const train::NamedTensors& named_parameters) {
  std::vector<train::ParamGroup> groups(2);
  groups[1].weight_decay = 0.0;
  for (const auto& item : named_parameters) {
    const torch::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    const std::string& name = item.key();
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    // Official test: `name.endswith(".bias") or len(param.shape) == 1` -> not regularised.
    train::ParamGroup& g = (is_bias || p.dim() == 1) ? groups[1] : groups[0];
    g.params.push_back(p);
    g.names.push_back(name);
  }
  return groups;
}

void cancel_gradients_last_layer(int64_t epoch, const train::NamedTensors& named,
                                 int64_t freeze_last_layer) {
  if (epoch >= freeze_last_layer) return;
  for (const auto& item : named)
    if (item.key().find("last_layer") != std::string::npos) {
      torch::Tensor p = item.value();
      p.mutable_grad().reset();
    }
}

}  // namespace xdino::ssl
