// The DINO teacher: a copy of the student that never gets gradients and follows the student
// by an exponential moving average of its parameters (spec dino.md sections 2 and 9).
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
#pragma once

#include <torch/torch.h>

namespace xdino::ssl {

void init_teacher(const torch::nn::Module& student, torch::nn::Module& teacher);

void ema_update(const torch::nn::Module& student, torch::nn::Module& teacher, double momentum);

}  // namespace xdino::ssl
