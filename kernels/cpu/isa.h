// The instruction set the CPU kernels of kernels/cpu/ run with: the widest of AVX-512 and AVX2
// that both this CPU and this build have, lowered by ATEN_CPU_CAPABILITY as LibTorch's own CPU
// kernels are ("default", "avx2", "avx512"), so one variable caps both (the main job's digest
// and .ci/run's AVX2 phase set it: tests/cli/test_main_job_digest.cpp).
//
// Contract: cpu_isa() is read once per process and never throws; kNone means the callers take
// their op path. isa_name() is "none", "avx2" or "avx512".
#pragma once

namespace xdino::kernels {

enum class Isa { kNone, kAvx2, kAvx512 };

Isa cpu_isa();
const char* isa_name(Isa isa);

}  // namespace xdino::kernels
