#include "core/blas.h"

#include <ATen/Version.h>
#include <dlfcn.h>

#include <filesystem>

namespace xdino {
namespace {

// openblas_get_config() begins with "OpenBLAS" in current releases; older ones omit it.
std::string openblas_name(const std::string& config) {
  return config.rfind("OpenBLAS", 0) == 0 ? config : "OpenBLAS " + config;
}

// The value of "BLAS_INFO=<name>" in LibTorch's build settings, "" when absent.
std::string torch_blas_name(const std::string& config) {
  const std::string key = "BLAS_INFO=";
  const auto at = config.find(key);
  if (at == std::string::npos) return "";
  const auto begin = at + key.size();
  const auto end = config.find_first_of(", \n", begin);
  return config.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The configuration's line that names MKL's version ("Intel(R) oneAPI Math Kernel Library
// Version 2024.2 ..."), without its "  - " bullet; "" when there is none.
std::string mkl_version_line(const std::string& config) {
  const auto at = config.find("Math Kernel Library");
  if (at == std::string::npos) return "";
  auto begin = config.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  const auto end = config.find('\n', at);
  std::string line =
      config.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  const auto text = line.find_first_not_of(" -");
  return text == std::string::npos ? line : line.substr(text);
}

}  // namespace

BlasProbe probe_loaded_blas() {
  BlasProbe probe;
  if (void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_")) {
    Dl_info where{};
    if (dladdr(sgemm, &where) != 0 && where.dli_fname != nullptr) {
      std::error_code ec;
      const auto resolved = std::filesystem::canonical(where.dli_fname, ec);
      probe.sgemm_library = ec ? std::string(where.dli_fname) : resolved.string();
    }
  }
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config")))
    probe.openblas_config = fn();
  probe.mkl = dlsym(RTLD_DEFAULT, "mkl_get_version") != nullptr;
  probe.blis = dlsym(RTLD_DEFAULT, "bli_info_get_version_str") != nullptr;
  return probe;
}

int set_blas_threads(int threads) {
  using GetFn = int (*)();
  using SetFn = void (*)(int);
  // Each library's own pair of entry points, looked up in whatever the process loaded.
  static const char* const kControls[][2] = {
      {"openblas_get_num_threads", "openblas_set_num_threads"},
      {"MKL_Get_Max_Threads", "MKL_Set_Num_Threads"},
      {"bli_thread_get_num_threads", "bli_thread_set_num_threads"}};
  for (const auto& control : kControls) {
    auto get = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, control[0]));
    auto set = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, control[1]));
    if (get == nullptr || set == nullptr) continue;
    const int before = get();
    if (before != threads) set(threads);
    return before;
  }
  return 0;
}

BlasInfo decide_blas(const std::string& torch_config, const BlasProbe& probe) {
  BlasInfo info;
  info.library = probe.sgemm_library;
  const std::string name = torch_blas_name(torch_config);
  // 1. LibTorch's build names its BLAS.
  if (name == "mkl") {
    const std::string version = mkl_version_line(torch_config);
    info.config = (version.empty() ? "Intel MKL" : version) + ", built into LibTorch";
    info.optimized = true;
    return info;
  }
  if (name == "open" || name == "openblas") {
    info.config = probe.openblas_config.empty() ? "OpenBLAS, built into LibTorch"
                                                : openblas_name(probe.openblas_config);
    info.optimized = true;
    return info;
  }
  if (!name.empty() && name != "generic") {  // atlas, blis, flame, accelerate, veclib, eigen
    info.config = name + " (LibTorch's build configuration)";
    info.optimized = true;
    return info;
  }
  // 2. A generic build calls the loaded libblas.so.3: ask it.
  if (!probe.openblas_config.empty()) {
    info.config = openblas_name(probe.openblas_config);
    info.optimized = true;
  } else if (probe.mkl) {
    info.config = "Intel MKL";
    info.optimized = true;
  } else if (probe.blis) {
    info.config = "BLIS";
    info.optimized = true;
  } else if (probe.sgemm_library.find("atlas") != std::string::npos) {
    info.config = "ATLAS";
    info.optimized = true;
  } else if (!probe.sgemm_library.empty()) {
    info.config = "reference BLAS (netlib)";
  }
  return info;
}

BlasInfo blas_info() { return decide_blas(at::show_config(), probe_loaded_blas()); }

std::string blas_summary() {
  const BlasInfo info = blas_info();
  if (info.config.empty()) return "BLAS: none found (matmuls use LibTorch's own kernels)";
  std::string s = "BLAS: " + info.config;
  if (!info.library.empty()) s += " (" + info.library + ")";
  if (!info.optimized)
    s += " -- slow: install an optimized BLAS, e.g. 'apt-get install libopenblas0-pthread'";
  return s;
}

}  // namespace xdino
