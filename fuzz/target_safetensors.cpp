// The safetensors fuzz entry point (see targets.h): core/safetensors.h on the bytes as a file.
#include <cstring>

#include "core/safetensors.h"
#include "fuzz/targets.h"

namespace xdino::fuzz {

void fuzz_safetensors(const uint8_t* data, size_t size) {
  TempInput file(data, size, ".safetensors");
  const Safetensors read = read_safetensors(file.path());
  // What it accepts is written and read back the same: names, dtypes, shapes, bytes, metadata.
  TempInput copy(nullptr, 0, ".safetensors");
  write_safetensors(copy.path(), read.tensors, read.metadata);
  const Safetensors again = read_safetensors(copy.path());
  if (again.metadata != read.metadata || again.tensors.size() != read.tensors.size())
    invariant_broken("a safetensors file did not survive write + read");
  for (const auto& item : read.tensors) {
    const torch::Tensor* t = again.tensors.find(item.key());
    const torch::Tensor& a = item.value();
    if (t == nullptr || t->scalar_type() != a.scalar_type() || t->sizes() != a.sizes() ||
        (a.nbytes() > 0 && std::memcmp(t->data_ptr(), a.data_ptr(), a.nbytes()) != 0))
      invariant_broken("a safetensors tensor did not survive write + read");
  }
}

}  // namespace xdino::fuzz
