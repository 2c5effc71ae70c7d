// A test that cannot run for want of a dependency (Python torch/h5py, a Debian data set) skips,
// and ctest counts a skip as a pass. In CI the dependencies are installed (scripts/setup.sh
// --tests), so .ci/run sets XDINO_REQUIRE_ALL=1 and the same skip becomes a failure naming
// what is missing. Use XDINO_SKIP_MISSING() wherever GTEST_SKIP() would stand for a missing
// dependency; it streams like GTEST_SKIP():
//   if (!python_has("h5py")) XDINO_SKIP_MISSING() << "/usr/bin/python3 cannot import h5py";
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <cstring>

namespace xdino::testing {

// True when XDINO_REQUIRE_ALL is set to anything but "" or "0".
inline bool require_all_dependencies() {
  const char* v = std::getenv("XDINO_REQUIRE_ALL");
  return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}

inline ::testing::TestPartResult::Type missing_dependency_result() {
  return require_all_dependencies() ? ::testing::TestPartResult::kFatalFailure
                                    : ::testing::TestPartResult::kSkip;
}

}  // namespace xdino::testing

#define XDINO_SKIP_MISSING()                                                                 \
  return GTEST_MESSAGE_(::xdino::testing::require_all_dependencies()                         \
                            ? "missing dependency (XDINO_REQUIRE_ALL is set, so this fails)" \
                            : "missing dependency",                                          \
                        ::xdino::testing::missing_dependency_result())

// A test that needs a CUDA device skips where there is none, naming why, whatever
// XDINO_REQUIRE_ALL says: CI builds the CUDA path but has no GPU (README, "Building against a
// CUDA LibTorch 2.x"). A GPU is not a dependency setup.sh could install. The .ci/run summary
// lists every such skip with its reason.
#ifdef XDINO_WITH_CUDA
#define XDINO_CUDA_BUILD_NOTE "no CUDA device on this machine"
#else
#define XDINO_CUDA_BUILD_NOTE "this build's LibTorch has no CUDA"
#endif
#define XDINO_SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device: " XDINO_CUDA_BUILD_NOTE
