// The per-sample transform the loader runs: one decoded image → its views.
//
// Contract:
//  - Two kinds, one type:
//    * returning: any callable (const Image&, Rng&) -> std::vector<torch::Tensor>; views may
//      have any shape and dtype, as long as view v has the same shape for every sample;
//    * writing: fixed view shapes plus a callable (const Image&, Rng&, out) that fills
//      out[v], a contiguous float32 tensor of shapes()[v] — the loader passes slots of the
//      batch tensors, so no per-sample tensor is allocated or copied (MultiCropAugmentation
//      and EvalTransform have such overloads).
//  - All randomness comes from the Rng; the callable is called concurrently from the loader's
//    threads and must be thread-safe.
//  - operator() works for both kinds (the writing kind allocates the views).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "augment/ops/image.h"
#include "augment/ops/random.h"

namespace xdino::augment {

class SampleTransform {
 public:
  using Views = std::vector<torch::Tensor>;
  using ReturnFn = std::function<Views(const Image&, Rng&)>;
  using WriteFn = std::function<void(const Image&, Rng&, const Views& out)>;

  SampleTransform() = default;
  // Any callable returning the views (a lambda, a function, a std::function).
  template <typename F,
            typename = std::enable_if_t<std::is_invocable_r_v<Views, F&, const Image&, Rng&> &&
                                        !std::is_same_v<std::decay_t<F>, SampleTransform>>>
  SampleTransform(F f) : return_(std::move(f)) {}  // NOLINT: implicit on purpose
  SampleTransform(std::vector<std::vector<int64_t>> shapes, WriteFn write)
      : shapes_(std::move(shapes)), write_(std::move(write)) {}

  bool writes_in_place() const { return static_cast<bool>(write_); }
  explicit operator bool() const { return return_ || write_; }
  // View shapes of the writing kind (empty for the returning kind).
  const std::vector<std::vector<int64_t>>& shapes() const { return shapes_; }

  void write(const Image& image, Rng& rng, const Views& out) const { write_(image, rng, out); }
  Views operator()(const Image& image, Rng& rng) const {
    if (return_) return return_(image, rng);
    Views out;
    for (const auto& s : shapes_) out.push_back(torch::empty(s, torch::kFloat));
    write_(image, rng, out);
    return out;
  }

 private:
  ReturnFn return_;
  std::vector<std::vector<int64_t>> shapes_;
  WriteFn write_;
};

}  // namespace xdino::augment
