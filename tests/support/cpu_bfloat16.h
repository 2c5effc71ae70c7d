// Whether bfloat16 products run on this CPU.
//
// Contract: cpu_bfloat16_runs() is true on every CPU PyTorch supports, except under the AVX2
// emulation of .ci/run's second phase: oneDNN capped at AVX2 (DNNL_MAX_CPU_ISA) has no bfloat16
// product, which PyTorch's dispatch, reading the CPU itself (AVX-512 on CI's machines), still
// asks it for; on a real AVX2 CPU PyTorch takes its own bfloat16 kernels instead. A test leaves
// its CPU bfloat16 cases out there, and the first line it prints says so; .ci/run's first phase
// runs them. Probed once per process.
#pragma once

#include <torch/torch.h>

#include <cstdio>

namespace xdino::testing {

inline bool cpu_bfloat16_runs() {
  static const bool runs = [] {
    try {
      // The sizes PyTorch hands to oneDNN: a product and a convolution of real width.
      const torch::Tensor a = torch::ones({64, 256}, torch::kBFloat16);
      (void)torch::mm(a, a.t());
      (void)torch::conv2d(torch::ones({2, 16, 16, 16}, torch::kBFloat16),
                          torch::ones({32, 16, 3, 3}, torch::kBFloat16));
      return true;
    } catch (const std::exception&) {
      std::printf(
          "bfloat16 products do not run here (oneDNN capped below its bfloat16 ISA): "
          "the CPU bfloat16 cases are left out of this run\n");
      return false;
    }
  }();
  return runs;
}

}  // namespace xdino::testing
