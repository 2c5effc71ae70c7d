// libFuzzer target: feeds arbitrary bytes to xdino::fuzz::fuzz_features (fuzz/targets.h) and checks
// that the parser either accepts them or throws std::exception, with no crash, no
// ASan/UBSan report, no input over 1 s or 1 GB (scripts/fuzz.sh sets those limits).
#include <exception>

#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    xdino::fuzz::fuzz_features(data, size);
  } catch (const std::exception&) {
    // A rejected input is a correct outcome.
  }
  return 0;
}
