// The libFuzzer executable of every target: feeds arbitrary bytes to the entry point named by
// XDINO_FUZZ_ENTRY (set per target in fuzz/CMakeLists.txt, e.g. fuzz_h5; see fuzz/targets.h)
// and checks that the parser either accepts them or throws std::exception, with no crash, no
// ASan/UBSan report, no input over 1 s or 1 GB (scripts/fuzz.sh sets those limits).
#include <exception>

#include "fuzz/targets.h"

#ifndef XDINO_FUZZ_ENTRY
#error "XDINO_FUZZ_ENTRY must name an entry point of fuzz/targets.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    xdino::fuzz::XDINO_FUZZ_ENTRY(data, size);
  } catch (const std::exception&) {
    // A rejected input is a correct outcome.
  }
  return 0;
}
