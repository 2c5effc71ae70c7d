// The copies of device values to the host that the training step asks for, counted: on a GPU
// each one waits for every kernel queued before it, so the step keeps them to a stated number
// (docs/dino.md, "One read-back per step"), and tests/ssl/test_dino_train.cpp holds it to it on
// any build, the CPU's included, where the same calls are made.
//
// Contract: to_host(t) returns t on the CPU (t itself when it is there) and adds one to a
// process-wide count; host_reads() is that count. Thread-safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace xdino {

at::Tensor to_host(const at::Tensor& t);
int64_t host_reads();

}  // namespace xdino
