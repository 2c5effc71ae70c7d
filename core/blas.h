// Which BLAS this process runs on.
//
// Debian's libtorch does its float matmuls through whatever libblas.so.3 the alternatives
// system points at; the reference BLAS is ~40x slower than OpenBLAS, so every run reports it.
#pragma once

#include <string>

namespace xdino {

struct BlasInfo {
  std::string library;  // resolved path of the library that provides sgemm_, or "" if none
  std::string config;   // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"
  bool optimized = false;  // false for the reference BLAS (or when sgemm_ is not found)
};

BlasInfo blas_info();

// One line for logs: "BLAS: OpenBLAS 0.3.21 ... (/usr/lib/.../libblas.so.3)".
std::string blas_summary();

}  // namespace xdino
