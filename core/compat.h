// The one place where LibTorch 1.13 (Debian 12, CPU) and LibTorch 2.x (pip's CUDA wheels; 2.15
// in CI, README "Building against a CUDA LibTorch 2.x") differ.
//
// Contract:
//  - XDINO_TORCH_AT_LEAST(major, minor) compares against the LibTorch headers in use.
//  - AutocastGuard enables autocast for one device type with one lower-precision dtype for
//    the guard's lifetime and restores the previous state (and clears the cast cache when the
//    outermost guard ends), like Python's `torch.autocast(...)` context manager.
//  - cuda_available() is false on builds without CUDA.
//  - synchronize(device) waits for the device's queued work (no-op on the CPU).
//  - reset_peak_memory(device) / peak_allocated_bytes(device): the caching allocator's peak
//    of allocated bytes since the last reset; -1 (and no-op) for a CPU device or a build
//    without CUDA.
//  - C10dBackend is the type of one backend's process group (Gloo, NCCL).
//  - kHaveSdpa: at::scaled_dot_product_attention with a `scale` argument exists (2.1 and
//    later). sdpa_unscaled(q, k, v) is softmax(q k^T) v through it with scale 1 (LibTorch
//    picks the backend: flash, memory-efficient, cuDNN or math); without it, it throws
//    xdino::UsageError saying which LibTorch it needs.
// Everything else in the project uses APIs that are the same in both.
//
// Every difference we know, with the version that brought it (checked by building both in CI):
// | since   | what changed                                 | where we handle it                |
// |---------|----------------------------------------------|-----------------------------------|
// | 2.0     | c10d::Backend split from c10d::ProcessGroup  | C10dBackend, below                |
// | 2.4     | autocast setters take the device type        | autocast_*, AutocastGuard, below  |
// | 2.1     | the .pth writer adds .data/serialization_id  | kWriterAddsSerializationId; a     |
// |         | (a hash of the records: still deterministic) | record our ZIP reader skips       |
// | 2.x     | torch::pickle_load reads SETITEM (1.13 not;  | kUnpicklerReadsSetitem; core/pth  |
// |         | first version not pinned: 2.15 does)         | has its own unpickler anyway      |
// | CUDA    | caching-allocator statistics                 | peak_allocated_bytes, below       |
// | 2.x pip | libtorch.so exports std::filesystem symbols  | CMakeLists.txt: libstdc++ first   |
// | 2.x pip | TorchConfig finds a system Caffe2 first      | CMakeLists.txt stops, one line    |
// | 2.x pip | BLAS (MKL) inside libtorch_cpu               | core/blas.cpp reads build config  |
// | 2.x pip | ships libgomp.so.1, no Gloo headers          | Debian's libgloo-dev headers      |
// | 2.1     | scaled_dot_product_attention takes `scale`   | kHaveSdpa, sdpa_unscaled, below   |
// | 2.4     | TCPStore asks for libuv by default; Debian   | distributed.cpp make_store: retry |
// |         | 13's 2.6 is built without it and refuses     | with useLibUV = false             |
// | 2.4     | the store server (dual-stack) reverse-       | store.cpp listen_ipv4: our own    |
// |         | resolves each client on its one thread       | IPv4 socket (masterListenFd)      |
// Not differences (same in 1.13 and 2.15, though often asked): c10::optional (an alias of
// std::optional in 2.x), torch::jit::pickle_save/pickle_load.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/version.h>

#ifdef XDINO_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "core/check.h"

#define XDINO_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace c10d {
class ProcessGroup;
class Backend;  // 2.0 and later
}  // namespace c10d

namespace xdino::compat {

#if XDINO_TORCH_AT_LEAST(2, 0)
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

// What tests/test_pth and tests/test_libtorch_limits expect of LibTorch's own serialisation.
constexpr bool kWriterAddsSerializationId = XDINO_TORCH_AT_LEAST(2, 1);
constexpr bool kUnpicklerReadsSetitem = XDINO_TORCH_AT_LEAST(2, 0);

constexpr bool kHaveSdpa = XDINO_TORCH_AT_LEAST(2, 1);

inline at::Tensor sdpa_unscaled(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if XDINO_TORCH_AT_LEAST(2, 1)
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/false, /*scale=*/1.0);
#else
  (void)q, (void)k, (void)v;
  throw UsageError(
      "attention through scaled_dot_product_attention needs LibTorch 2.1 or later (this "
      "is " TORCH_VERSION "); use the op path");
#endif
}

inline bool cuda_available() { return torch::cuda::is_available(); }

inline void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

#ifdef XDINO_WITH_CUDA
inline c10::DeviceIndex cuda_index(const c10::Device& device) {
  return device.has_index() ? device.index() : c10::cuda::current_device();
}
inline void reset_peak_memory(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(cuda_index(device));
}
inline int64_t peak_allocated_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return -1;
  // allocated_bytes[0]: the aggregate over small and large pools.
  return c10::cuda::CUDACachingAllocator::getDeviceStats(cuda_index(device))
      .allocated_bytes[0]
      .peak;
}
#else
inline void reset_peak_memory(const c10::Device&) {}
inline int64_t peak_allocated_bytes(const c10::Device&) { return -1; }
#endif

#if XDINO_TORCH_AT_LEAST(2, 4)
// 2.4 replaced the per-device setters by ones that take the device type.
inline bool autocast_enabled(c10::DeviceType d) { return at::autocast::is_autocast_enabled(d); }
inline void set_autocast_enabled(c10::DeviceType d, bool on) {
  at::autocast::set_autocast_enabled(d, on);
}
inline at::ScalarType autocast_dtype(c10::DeviceType d) {
  return at::autocast::get_autocast_dtype(d);
}
inline void set_autocast_dtype(c10::DeviceType d, at::ScalarType t) {
  at::autocast::set_autocast_dtype(d, t);
}
#else
inline bool autocast_enabled(c10::DeviceType d) {
  return d == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
inline void set_autocast_enabled(c10::DeviceType d, bool on) {
  if (d == c10::DeviceType::CUDA)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
}
inline at::ScalarType autocast_dtype(c10::DeviceType d) {
  return d == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                    : at::autocast::get_autocast_cpu_dtype();
}
inline void set_autocast_dtype(c10::DeviceType d, at::ScalarType t) {
  if (d == c10::DeviceType::CUDA)
    at::autocast::set_autocast_gpu_dtype(t);
  else
    at::autocast::set_autocast_cpu_dtype(t);
}
#endif

class AutocastGuard {
 public:
  // enabled=false makes the guard a no-op, so call sites need no branch.
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype, bool enabled = true)
      : device_(device), enabled_(enabled) {
    if (!enabled_) return;
    prev_enabled_ = autocast_enabled(device_);
    prev_dtype_ = autocast_dtype(device_);
    set_autocast_enabled(device_, true);
    set_autocast_dtype(device_, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    set_autocast_enabled(device_, prev_enabled_);
    set_autocast_dtype(device_, prev_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

}  // namespace xdino::compat
