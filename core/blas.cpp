#include "core/blas.h"

#include <dlfcn.h>

#include <filesystem>

namespace xdino {

BlasInfo blas_info() {
  BlasInfo info;
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  if (sgemm == nullptr) return info;
  Dl_info where{};
  if (dladdr(sgemm, &where) != 0 && where.dli_fname != nullptr) {
    std::error_code ec;
    const auto resolved = std::filesystem::canonical(where.dli_fname, ec);
    info.library = ec ? std::string(where.dli_fname) : resolved.string();
  }
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
    info.config = std::string("OpenBLAS ") + fn();
    info.optimized = true;
  } else if (dlsym(RTLD_DEFAULT, "mkl_get_version") != nullptr) {
    info.config = "Intel MKL";
    info.optimized = true;
  } else if (dlsym(RTLD_DEFAULT, "bli_info_get_version_str") != nullptr) {
    info.config = "BLIS";
    info.optimized = true;
  } else if (info.library.find("atlas") != std::string::npos) {
    info.config = "ATLAS";
    info.optimized = true;
  } else {
    info.config = "reference BLAS (netlib)";
  }
  return info;
}

std::string blas_summary() {
  const BlasInfo info = blas_info();
  if (info.library.empty()) return "BLAS: none found (matmuls use LibTorch's own kernels)";
  std::string s = "BLAS: " + info.config + " (" + info.library + ")";
  if (!info.optimized)
    s += " -- slow: install an optimized BLAS, e.g. 'apt-get install libopenblas0-pthread'";
  return s;
}

}  // namespace xdino
