// Which BLAS this process multiplies matrices with.
//
// Two kinds of LibTorch answer differently (docs in README "Performance notes"):
//  - Debian's is built with BLAS_INFO=generic: it calls whatever libblas.so.3 the alternatives
//    system selects, and the reference BLAS there is ~40x slower than OpenBLAS. Only the
//    library that is loaded can tell.
//  - pip/conda wheels carry MKL (or OpenBLAS) inside libtorch_cpu; their build configuration
//    names it, while the symbols they export look like a plain reference BLAS.
// So LibTorch's own build configuration (at::show_config(), "BLAS_INFO=...") is asked first,
// and the loaded library only when the configuration says "generic" or names none.
//
// Contract: blas_info() never throws; decide_blas() is a pure function of its inputs.
#pragma once

#include <string>

namespace xdino {

struct BlasInfo {
  std::string library;  // resolved path of the library that provides sgemm_, or "" if none
  std::string config;   // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"
  bool optimized = false;  // false for the reference BLAS (or when none is found)
};

// What the running process shows of its BLAS, for decide_blas().
struct BlasProbe {
  std::string sgemm_library;    // resolved path of the library providing sgemm_, "" if none
  std::string openblas_config;  // openblas_get_config(), "" when OpenBLAS is not loaded
  bool mkl = false;             // mkl_get_version is exported
  bool blis = false;            // bli_info_get_version_str is exported
};

BlasProbe probe_loaded_blas();

// `torch_config` is LibTorch's at::show_config() text.
BlasInfo decide_blas(const std::string& torch_config, const BlasProbe& probe);

// decide_blas(at::show_config(), probe_loaded_blas()).
BlasInfo blas_info();

// Sets how many threads the loaded BLAS may use for one call (OpenBLAS, MKL or BLIS, found
// by name at run time) and returns how many it used before; returns 0 and changes nothing
// when the BLAS has no such control (reference BLAS) or is LibTorch's own MKL, which follows
// at::set_num_threads. For callers that supply the parallelism themselves
// (distributed/replicas.h): a threaded BLAS called from several threads at once serialises
// them on its own pool.
int set_blas_threads(int threads);

// One line for logs: "BLAS: OpenBLAS 0.3.21 ... (/usr/lib/.../libblas.so.3)".
std::string blas_summary();

}  // namespace xdino
