#include "train/precision.h"

#include "core/check.h"
#include "core/compat.h"

namespace xdino::train {

std::string PrecisionPlan::describe() const {
  std::string s = device.str() + ", ";
  if (!autocast) return s + "fp32";
  s += autocast_dtype == torch::kHalf ? "fp16 autocast" : "bf16 autocast";
  if (loss_scaling) s += " + dynamic loss scaling";
  return s;
}

PrecisionPlan resolve_precision(const std::string& device, const std::string& precision,
                                bool use_fp16) {
  PrecisionPlan plan;
  if (device == "auto") {
    plan.device = compat::cuda_available() ? torch::Device(torch::kCUDA, 0) : torch::kCPU;
  } else {
    XDINO_CHECK_ARG(device == "cpu" || device.rfind("cuda", 0) == 0,
                    "--device must be auto, cpu, cuda or cuda:N, got '", device, "'");
    try {
      plan.device = torch::Device(device);
    } catch (const c10::Error&) {
      XDINO_FAIL_ARG("--device must be auto, cpu, cuda or cuda:N, got '", device, "'");
    }
    XDINO_CHECK_ARG(!plan.device.is_cuda() || compat::cuda_available(), "--device ", device,
                    " asked for, but this LibTorch sees no CUDA GPU (use --device cpu)");
  }
  const bool cuda = plan.device.is_cuda();
  if (precision == "auto") {
    plan.autocast = plan.loss_scaling = cuda && use_fp16;
    plan.autocast_dtype = plan.autocast ? torch::kHalf : torch::kFloat;
  } else if (precision == "fp32") {
  } else if (precision == "bf16") {
    plan.autocast = true;
    plan.autocast_dtype = torch::kBFloat16;
  } else if (precision == "fp16") {
    XDINO_CHECK_ARG(cuda, "--precision fp16 needs a CUDA device (on CPU use bf16 or fp32)");
    plan.autocast = plan.loss_scaling = true;
    plan.autocast_dtype = torch::kHalf;
  } else {
    XDINO_FAIL_ARG("--precision must be auto, fp32, bf16 or fp16, got '", precision, "'");
  }
  return plan;
}

}  // namespace xdino::train
