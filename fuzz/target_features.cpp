// The LibTorch fuzz entry point of eval/features_io.h (see targets.h).
#include <cstring>
#include <limits>
#include <map>
#include <vector>

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

namespace xdino::fuzz {

void fuzz_patch_tokens(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const int64_t images = in.u8() % 12;
  const int64_t t = in.u8() % 5, d = in.u8() % 5;
  const int calls = in.u8() % 6;
  std::map<int64_t, torch::Tensor> sunk;  // the tokens each index was last given, if unambiguous
  std::vector<int64_t> kept;
  TempInput file(nullptr, 0, ".h5");
  eval::write_features_with_patch_tokens(
      file.path(), images, [&](const eval::PatchTokenSink& sink) {
        for (int c = 0; c < calls; ++c) {
          const uint8_t head = in.u8();
          const int64_t b = head % 5;
          const int64_t rows = t + ((head >> 3) & 1);  // bit 3: a shape that disagrees
          torch::Tensor index = torch::empty({b}, torch::kInt64);
          for (int64_t i = 0; i < b; ++i) index[i] = static_cast<int64_t>(in.u8()) - 2;
          torch::Tensor tokens = torch::empty({b, rows, d}, torch::kFloat32);
          float* v = tokens.data_ptr<float>();
          for (int64_t i = 0; i < tokens.numel(); ++i) {
            const uint8_t x = in.u8();
            v[i] = x == 0x7f ? std::numeric_limits<float>::quiet_NaN()
                             : static_cast<float>(static_cast<int8_t>(x)) / 8.0f;
          }
          sink(tokens, index);
          // Accepted: remember what each index holds now (an index twice in one call holds either).
          for (int64_t i = 0; i < b; ++i) {
            const int64_t at = index[i].item<int64_t>();
            bool twice = false;
            for (int64_t j = 0; j < b; ++j) twice |= j != i && index[j].item<int64_t>() == at;
            sunk[at] = twice ? torch::Tensor() : tokens[i].clone();
          }
        }
        const int64_t n = in.u8() % 12;
        for (int64_t i = 0; i < n; ++i) kept.push_back(static_cast<int64_t>(in.u8() % 14) - 1);
        eval::FeatureSet set;
        set.features = torch::zeros({n, 2});
        set.labels = torch::zeros({n}, torch::kInt64);
        set.indices = torch::tensor(kept, torch::kInt64);
        set.paths.assign(static_cast<size_t>(n), "");
        return set;
      });
  const torch::Tensor tokens = eval::read_patch_tokens(file.path());
  if (tokens.size(0) != static_cast<int64_t>(kept.size()))
    invariant_broken("the patch token file's rows are not the kept features'");
  for (size_t i = 0; i < kept.size(); ++i) {
    const torch::Tensor& want = sunk[kept[i]];
    if (want.defined() && !same_bits(tokens[static_cast<int64_t>(i)].contiguous(), want))
      invariant_broken("a kept row holds other tokens than its index was given");
  }
}

}  // namespace xdino::fuzz
