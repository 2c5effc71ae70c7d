// Loads and stores of `w` lanes (a whole vector or a row's tail) for the at::vec kernels of
// kernels/cpu/, which include it inside their ISA's namespace (kernels/CMakeLists.txt compiles
// each once per ISA): so each object has its own copy and no inline function is shared across
// instruction sets.
#pragma once

#include <ATen/cpu/vec/vec.h>

#include <cstdint>

namespace xdino::kernels::XDINO_ISA::vec_tail {

template <typename T>
at::vec::Vectorized<T> load(const T* p, int64_t w) {
  using Vec = at::vec::Vectorized<T>;
  return w == Vec::size() ? Vec::loadu(p) : Vec::loadu(p, w);
}

template <typename T>
void store(const at::vec::Vectorized<T>& v, T* p, int64_t w) {
  if (w == at::vec::Vectorized<T>::size())
    v.store(p);
  else
    v.store(p, w);
}

}  // namespace xdino::kernels::XDINO_ISA::vec_tail
