// The DINO teacher: a copy of the student that never gets gradients and follows the student
// by an exponential moving average of its parameters (docs/dino.md, "Networks").
//
// Contract:
//  - init_teacher(student, teacher): copies every parameter AND buffer of `student` into the
//    structurally identical `teacher` (matched by name; a missing name or a shape mismatch
//    throws xdino::Error naming it), then sets requires_grad = false on all teacher
//    parameters. The teacher stays in train mode: its BatchNorms use batch statistics and
//    keep their own running statistics.
//  - ema_update(student, teacher, m): theta_t <- m * theta_t + (1 - m) * theta_s for every
//    parameter pair in registration order (requires_grad = false ones included), under no
//    grad; buffers are left alone. Both modules must list the same parameter shapes.
//    `path` (train/update_path.h): kPerTensor is main_dino.py's loop (two kernels per tensor);
//    kMultiTensor the same two ops over all tensors at once; kFusedCpu one pass per tensor.
//    All round (1 - m) * theta_s before the addition, as the official code does, so on the
//    CPU all three give bit-identical teachers.
#pragma once

#include <torch/torch.h>

#include "train/update_path.h"

namespace xdino::ssl {

void init_teacher(const torch::nn::Module& student, torch::nn::Module& teacher);

void ema_update(const torch::nn::Module& student, torch::nn::Module& teacher, double momentum,
                train::UpdatePath path = train::UpdatePath::kAuto);

}  // namespace xdino::ssl
