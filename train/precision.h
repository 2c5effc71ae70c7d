// Where and in which precision DINO trains: resolves --device, --precision and the official
// --use_fp16 into one plan.
//
// Contract (resolve_precision):
//  - device "auto" = cuda when LibTorch sees a GPU, else cpu; "cpu", "cuda" and "cuda:N" are
//    taken as given ("cuda" without a GPU throws xdino::UsageError).
//  - precision "auto": on CUDA, fp16 autocast + dynamic loss scaling when use_fp16 (the
//    official default), fp32 otherwise; on CPU always fp32 (use_fp16 is ignored: CPUs have
//    no fast fp16 and main_dino.py never ran there).
//  - precision "fp32": no autocast. "bf16": autocast to bfloat16 on either device, no loss
//    scaler (bf16 has fp32's exponent range). "fp16": CUDA only (UsageError on CPU), with the
//    scaler. An explicit precision overrides use_fp16.
//  - Anything else throws xdino::UsageError naming the accepted values.
// Autocast covers the teacher and student forwards and the loss, as in main_dino.py; which
// ops run in low precision is LibTorch's autocast policy (the same lists as PyTorch's).
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
