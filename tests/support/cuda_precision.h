// The CUDA matmul and convolution precision (TF32 or not) for one scope, restored after it:
// the CUDA cases of tests/models, tests/ssl and tests/train compare fp32 on a card with the CPU
// only without TF32. No CUDA device is needed to make one (it sets ATen's global flags).
#pragma once

#include <ATen/Context.h>

namespace xdino::testing {

class Tf32Scope {
 public:
  explicit Tf32Scope(bool allow)
      : cublas_(at::globalContext().allowTF32CuBLAS()),
        cudnn_(at::globalContext().allowTF32CuDNN()) {
    at::globalContext().setAllowTF32CuBLAS(allow);
    at::globalContext().setAllowTF32CuDNN(allow);
  }
  ~Tf32Scope() {
    at::globalContext().setAllowTF32CuBLAS(cublas_);
    at::globalContext().setAllowTF32CuDNN(cudnn_);
  }

 private:
  bool cublas_, cudnn_;
};

}  // namespace xdino::testing
