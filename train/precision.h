// Where and in which precision a training loop runs: resolves a device name, a precision name
// and a use_fp16 switch (the official scripts' flag) into one plan.
//
// Contract (resolve_precision):
//  - device "auto" = cuda when LibTorch sees a GPU, else cpu; "cpu", "cuda" and "cuda:N" are
//    taken as given ("cuda" without a GPU throws xdino::UsageError).
//  - precision "auto": on CUDA, fp16 autocast + dynamic loss scaling when use_fp16 (the
//    official default), fp32 otherwise; on CPU always fp32 (use_fp16 is ignored: CPUs have
//    no fast fp16 and the official scripts never ran there).
//  - precision "fp32": no autocast. "bf16": autocast to bfloat16 on either device, no loss
//    scaler (bf16 has fp32's exponent range). "fp16": CUDA only (UsageError on CPU), with the
//    scaler. An explicit precision overrides use_fp16.
//  - Anything else throws xdino::UsageError naming the accepted values.
// The loop decides what runs under autocast (DINO's: docs/dino.md, "Schedules and optimiser");
// which ops run in low precision is LibTorch's autocast policy (the same lists as PyTorch's).
#pragma once

#include <torch/torch.h>

#include <string>

namespace xdino::train {

struct PrecisionPlan {
  torch::Device device = torch::kCPU;
  bool autocast = false;
  torch::ScalarType autocast_dtype = torch::kFloat;
  bool loss_scaling = false;
  std::string describe() const;  // e.g. "cuda:0, fp16 autocast + loss scaling"
};

PrecisionPlan resolve_precision(const std::string& device, const std::string& precision,
                                bool use_fp16);

}  // namespace xdino::train
