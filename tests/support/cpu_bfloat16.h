// Whether bfloat16 products run on this CPU.
//
// Contract: cpu_bfloat16_runs() is true on every CPU PyTorch supports, except under the AVX2
// emulation of .ci/run's second phase: oneDNN capped at AVX2 (DNNL_MAX_CPU_ISA or
// ONEDNN_MAX_CPU_ISA set) has no bfloat16 product, which PyTorch's dispatch, reading the CPU
// itself (AVX-512 on CI's machines), still asks it for; on a real AVX2 CPU PyTorch takes its own
// bfloat16 kernels instead. Only there does a test leave its CPU bfloat16 cases out, and the
// first line it prints says so; .ci/run's first phase runs them. Anywhere else a bfloat16
// product that throws is a failure of the calling test (it returned as a pass before, whatever
// the cause). Probed once per process.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace xdino::testing {

// The variables .ci/run's AVX2 phase sets to cap oneDNN.
inline bool onednn_isa_capped() {
  for (const char* name : {"DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return true;
  return false;
}

inline bool cpu_bfloat16_runs() {
  // "" when the products run, else what they threw.
  static const std::string error = [] {
    try {
      // The sizes PyTorch hands to oneDNN: a product and a convolution of real width.
      const torch::Tensor a = torch::ones({64, 256}, torch::kBFloat16);
      (void)torch::mm(a, a.t());
      (void)torch::conv2d(torch::ones({2, 16, 16, 16}, torch::kBFloat16),
                          torch::ones({32, 16, 3, 3}, torch::kBFloat16));
      return std::string();
    } catch (const std::exception& e) {
      const std::string what = e.what();
      const std::string line = what.substr(0, what.find('\n'));
      return line.empty() ? std::string("an exception without a message") : line;
    }
  }();
  if (error.empty()) return true;
  if (!onednn_isa_capped()) {
    ADD_FAILURE() << "bfloat16 products throw on this CPU, and oneDNN is not capped "
                     "(DNNL_MAX_CPU_ISA): "
                  << error;
    return false;
  }
  static const bool told = [] {
    std::printf(
        "bfloat16 products do not run here (oneDNN capped below its bfloat16 ISA): "
        "the CPU bfloat16 cases are left out of this run\n");
    return true;
  }();
  (void)told;
  return false;
}

}  // namespace xdino::testing
