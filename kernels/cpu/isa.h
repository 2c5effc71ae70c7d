// The instruction set the CPU kernels of kernels/cpu/ run with: the widest of AVX-512 and AVX2
// that both this CPU and this build have, lowered by ATEN_CPU_CAPABILITY as LibTorch's own CPU
// kernels are ("default", "avx2", "avx512"), so one variable caps both (the main job's digest
// and .ci/run's AVX2 phase set it: tests/cli/test_main_job_digest.cpp).
//
// Contract: cpu_isa() is read once per process and never throws; kNone means the callers take
// their op path. isa_name() is "none", "avx2" or "avx512". XDINO_CPU_ISA_CALL below is for
// kernels/'s own sources (it needs core/check.h and XDINO_CPU_ISA_KERNELS, a private
// definition of xdino_kernels).
#pragma once

namespace xdino::kernels {

enum class Isa { kNone, kAvx2, kAvx512 };

Isa cpu_isa();
const char* isa_name(Isa isa);

}  // namespace xdino::kernels

// XDINO_CPU_ISA_CALL(fn, args...): kernels/cpu's fn (declared in namespaces avx2 and avx512 by
// its *_kernel.h) for the ISA cpu_isa() picks; callers have checked that it is not kNone. A
// macro, since the two are templates in two namespaces. In a build without the per-ISA
// objects (kernels/CMakeLists.txt: not x86-64) cpu_isa() is kNone, nothing reaches the call,
// and it throws rather than name functions that were not compiled.
#if defined(XDINO_CPU_ISA_KERNELS)
#define XDINO_CPU_ISA_CALL(fn, ...)                              \
  (::xdino::kernels::cpu_isa() == ::xdino::kernels::Isa::kAvx512 \
       ? ::xdino::kernels::avx512::fn(__VA_ARGS__)               \
       : ::xdino::kernels::avx2::fn(__VA_ARGS__))
#else
#define XDINO_CPU_ISA_CALL(fn, ...) \
  XDINO_CHECK(false, "this build has no vectorised CPU kernels (", #fn, ")")
#endif
