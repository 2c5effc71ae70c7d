// DINO's rules for the student's update, applied around the generic optimiser (train/optim.h)
// and gradient surgery (train/gradients.h): which parameters are regularised, and the frozen
// last layer of the head (docs/dino.md, "Schedules and optimiser"). They live in ssl/, not
// train/, because they encode main_dino.py's choices, not anything an optimiser needs.
//
// Contract:
//  - dino_param_groups(named): utils.get_params_groups. Group 0 = names not ending in ".bias"
//    whose tensor is not 1-D (weights, cls_token, temperature, ...), group 1 (weight_decay 0)
//    = biases and 1-D tensors; parameters with requires_grad = false are left out. Tensors
//    are shared with the model; names are kept for messages.
//  - cancel_gradients_last_layer(epoch, named, freeze_last_layer): when epoch <
//    freeze_last_layer, makes the grad of every parameter whose name contains "last_layer"
//    undefined (None), so the optimiser skips it entirely. Throws nothing.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "train/gradients.h"
#include "train/optim.h"

namespace xdino::ssl {

std::vector<train::ParamGroup> dino_param_groups(const train::NamedTensors& named_parameters);

void cancel_gradients_last_layer(int64_t epoch, const train::NamedTensors& named,
                                 int64_t freeze_last_layer);

}  // namespace xdino::ssl
