// Which BLAS the process reports (core/blas.h): the decision on the configuration strings of
// both kinds of LibTorch, and the answer on this machine.
#include <ATen/Version.h>
#include <gtest/gtest.h>

#include "core/blas.h"

using xdino::BlasProbe;
using xdino::decide_blas;

namespace {

// Excerpts of at::show_config() as the two kinds of LibTorch print it.
const char* kDebianConfig =
    "PyTorch built with:\n  - GCC 12.2\n  - C++ Version: 201402\n"
    "  - Intel(R) MKL-DNN v2.6.3 (Git Hash N/A)\n  - OpenMP 201511 (a.k.a. OpenMP 4.5)\n"
    "  - LAPACK is enabled (usually provided by MKL)\n  - CPU capability usage: AVX2\n"
    "  - Build settings: BLAS_INFO=generic, BUILD_TYPE=RelWithDebInfo, LAPACK_INFO=generic, "
    "TORCH_VERSION=1.13.0, USE_CUDA=OFF, \n";
const char* kWheelConfig =
    "PyTorch built with:\n  - GCC 13.3\n  - C++ Version: 201703\n"
    "  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) "
    "64 architecture applications\n  - Intel(R) MKL-DNN v3.7.1\n"
    "  - OpenMP 201511 (a.k.a. OpenMP 4.5)\n  - LAPACK is enabled (usually provided by MKL)\n"
    "  - NNPACK is enabled\n  - CPU capability usage: AVX512\n  - CUDA Runtime 13.0\n"
    "  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CUDA_VERSION=13.0, "
    "LAPACK_INFO=mkl, TORCH_VERSION=2.11.0, USE_CUDA=ON, \n";

BlasProbe openblas_probe() {
  BlasProbe p;
  p.sgemm_library = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
  p.openblas_config = "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64";
  return p;
}

}  // namespace

TEST(Blas, WheelWithMklInsideLibTorchIsOptimisedWhateverItExports) {
  // What the H100 machine's wheel showed: sgemm_ found in libtorch_cpu, no MKL or OpenBLAS
  // entry points exported, which the loaded-library test alone took for netlib.
  BlasProbe p;
  p.sgemm_library = "/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so";
  const auto info = decide_blas(kWheelConfig, p);
  EXPECT_TRUE(info.optimized);
  EXPECT_NE(info.config.find("Math Kernel Library Version 2024.2"), std::string::npos)
      << info.config;
  EXPECT_NE(info.config.find("built into LibTorch"), std::string::npos) << info.config;
  EXPECT_EQ(info.config.find("reference"), std::string::npos) << info.config;
}

TEST(Blas, GenericBuildAsksTheLoadedLibrary) {
  const auto open = decide_blas(kDebianConfig, openblas_probe());
  EXPECT_TRUE(open.optimized);
  EXPECT_EQ(open.config, openblas_probe().openblas_config);  // it names itself: no doubling
  BlasProbe old_openblas = openblas_probe();
  old_openblas.openblas_config = "0.2.20 DYNAMIC_ARCH";  // releases before 0.3 did not
  EXPECT_EQ(decide_blas(kDebianConfig, old_openblas).config, "OpenBLAS 0.2.20 DYNAMIC_ARCH");
  EXPECT_EQ(open.library, openblas_probe().sgemm_library);
  BlasProbe netlib;
  netlib.sgemm_library = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
  const auto ref = decide_blas(kDebianConfig, netlib);
  EXPECT_FALSE(ref.optimized);
  EXPECT_EQ(ref.config, "reference BLAS (netlib)");
  EXPECT_EQ(ref.library, netlib.sgemm_library);
  const auto none = decide_blas(kDebianConfig, BlasProbe{});
  EXPECT_FALSE(none.optimized);
  EXPECT_TRUE(none.config.empty());
}

TEST(Blas, OpenBlasInsideLibTorchIsNamedByTheConfiguration) {
  std::string config = kWheelConfig;
  config.replace(config.find("BLAS_INFO=mkl"), 13, "BLAS_INFO=open");
  const auto info = decide_blas(config, BlasProbe{});
  EXPECT_TRUE(info.optimized);
  EXPECT_EQ(info.config, "OpenBLAS, built into LibTorch");
}

TEST(Blas, ThisMachine) {
  // scripts/setup.sh installs OpenBLAS for Debian's generic LibTorch; any other LibTorch names
  // its own BLAS. Either way the run must not be told it is on a slow one.
  const auto info = xdino::blas_info();
  EXPECT_TRUE(info.optimized) << xdino::blas_summary();
  if (at::show_config().find("BLAS_INFO=generic") != std::string::npos) {
    EXPECT_EQ(info.config.rfind("OpenBLAS", 0), 0u) << info.config;
    EXPECT_NE(info.library.find("openblas"), std::string::npos) << info.library;
  }
  EXPECT_EQ(xdino::blas_summary().find("slow"), std::string::npos) << xdino::blas_summary();
}

TEST(Blas, ThreadCountIsSetAndGivenBack) {
  // Replicas (distributed/replicas.h) run one-thread BLAS calls and give the count back.
  const int before = xdino::set_blas_threads(1);
  if (at::show_config().find("BLAS_INFO=generic") == std::string::npos) return;  // not ours
  ASSERT_GE(before, 1) << "the loaded OpenBLAS exposes openblas_set_num_threads";
  EXPECT_EQ(xdino::set_blas_threads(before), 1);
  EXPECT_EQ(xdino::set_blas_threads(before), before);
}
