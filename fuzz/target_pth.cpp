// The LibTorch fuzz entry point of core/pth.h (see targets.h).
#include "core/pth.h"
#include "fuzz/targets.h"

namespace xdino::fuzz {

void fuzz_pth(const uint8_t* data, size_t size) {
  TempInput file(data, size, ".pth");
  const c10::IValue value = load_pth(file.path());
  (void)value;
}

}  // namespace xdino::fuzz
