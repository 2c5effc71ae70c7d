// Gradient clipping between backward and the optimiser step, as main_dino.py's
// utils.clip_gradients (docs/dino.md, "Schedules and optimiser"). Averaging across processes
// is distributed/grad_sync.h's; DINO's last-layer freeze is ssl/student_update.h's.
//
// Contract:
//  - clip_gradients(named, clip): for EACH parameter tensor with a defined grad separately,
//    n = ||grad||_2, coef = clip / (n + 1e-6), grad *= coef when coef < 1 (no global norm).
//    Returns the norms (before clipping) as one fp32 tensor on the grads' device, in order.
//    `path` (train/update_path.h): kPerTensor is main_dino.py's loop, a few kernels per tensor
//    and no host synchronisation; the others take every norm in one multi-tensor op and
//    scale every grad in another, after one copy of the coefficients to the host. On the CPU
//    both give bit-identical grads.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "train/update_path.h"

namespace xdino::train {

using NamedTensors = torch::OrderedDict<std::string, torch::Tensor>;

torch::Tensor clip_gradients(const NamedTensors& named, double clip,
                             UpdatePath path = UpdatePath::kAuto);

}  // namespace xdino::train
