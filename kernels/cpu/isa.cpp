#include "kernels/cpu/isa.h"

#include <cstdlib>
#include <string>

namespace xdino::kernels {
namespace {

Isa detect() {
#if defined(XDINO_CPU_ISA_KERNELS) && (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq");
  Isa isa = avx512 ? Isa::kAvx512 : avx2 ? Isa::kAvx2 : Isa::kNone;
  if (const char* cap = std::getenv("ATEN_CPU_CAPABILITY"); cap != nullptr) {
    const std::string c = cap;
    if (c == "default") isa = Isa::kNone;
    if (c == "avx2" && isa == Isa::kAvx512) isa = Isa::kAvx2;
  }
  return isa;
#else
  return Isa::kNone;
#endif
}

}  // namespace

Isa cpu_isa() {
  static const Isa isa = detect();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kNone:
      break;
  }
  return "none";
}

}  // namespace xdino::kernels
