// The LibTorch fuzz entry point of eval/features_io.h (see targets.h).
#include <cstring>

#include "eval/features_io.h"
#include "fuzz/h5_builder.h"
#include "fuzz/targets.h"

namespace xdino::fuzz {
namespace {

// An empty tensor may have no storage at all (a null data pointer, which memcmp must not see).
bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         (a.nbytes() == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0);
}

}  // namespace

void fuzz_features(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const H5Schema schema{
      {{"features", H5T_NATIVE_FLOAT, 2}, {"labels", H5T_NATIVE_INT64, 1}, {"paths", H5T_C_S1, 1}},
      {"arch", "checkpoint", "checkpoint_key", "split", "feature", "image_size", "patch_size",
       "normalized"}};
  TempInput file(nullptr, 0, ".h5");
  build_h5(in, schema, file.path());
  const eval::FeatureSet set = eval::read_features(file.path());
  const int64_t n = set.features.size(0);
  if (set.labels.dim() != 1 || set.labels.size(0) != n ||
      static_cast<int64_t>(set.paths.size()) != n)
    invariant_broken("accepted a feature file whose parts disagree on N");
  // What was accepted is written and read back unchanged.
  TempInput copy(nullptr, 0, ".h5");
  eval::write_features(copy.path(), set);
  const eval::FeatureSet again = eval::read_features(copy.path());
  const eval::FeatureAttributes& a = set.attributes;
  const eval::FeatureAttributes& b = again.attributes;
  if (!(same_bits(set.features.contiguous(), again.features) &&
        same_bits(set.labels, again.labels) && set.paths == again.paths && a.arch == b.arch &&
        a.checkpoint == b.checkpoint && a.checkpoint_key == b.checkpoint_key &&
        a.split == b.split && a.feature == b.feature && a.image_size == b.image_size &&
        a.patch_size == b.patch_size && a.normalized == b.normalized))
    invariant_broken("a feature file did not survive write_features + read_features");
}

}  // namespace xdino::fuzz
