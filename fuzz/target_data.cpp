// The image-data fuzz entry points (see targets.h): IDX files, image decoding, HDF5 shards.
// LibTorch-free (OpenCV, zlib, HDF5), so the instrumented build of these targets compiles no
// LibTorch header.
#include <algorithm>
#include <cmath>
#include <string_view>

#include "augment/data/decode.h"
#include "augment/data/h5_dataset.h"
#include "augment/data/idx_dataset.h"
#include "fuzz/h5_builder.h"
#include "fuzz/targets.h"

namespace xdino::fuzz {

void fuzz_idx(const uint8_t* data, size_t size) {
  // One input holds both files: byte 0 (mod the size) is where the labels file ends.
  const size_t split = size == 0 ? 0 : std::min<size_t>(size, 1 + data[0]);
  const char* suffix = (size > 1 && data[1] == 0x1f) ? ".gz" : "";  // gzip seeds start 1f 8b
  TempInput labels(data + std::min<size_t>(size, 1), split > 0 ? split - 1 : 0, suffix);
  TempInput images(data + split, size - split, suffix);
  const augment::IdxDataset set(augment::IdxFiles{images.path(), labels.path()});
  // The first and last records: every declared image must lie inside the pixels read.
  for (const int64_t i : {int64_t{0}, set.size() - 1}) {
    if (i < 0) continue;
    (void)set.label(i);
    (void)set.load(i);
  }
}

void fuzz_decode(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)augment::jpeg_is_complete(bytes);
  (void)augment::decode_image(bytes, "fuzz input");
}

void fuzz_decode_float(const uint8_t* data, size_t size) {
  if (size == 0) return;
  augment::DecodeOptions o;
  o.pixels = augment::DecodeOptions::Pixels::kFloat;
  o.channels = (data[0] & 7) % 5;
  o.exif_orientation = (data[0] & 0x80) != 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const augment::Image image = augment::decode_image(bytes, "fuzz input", o);
  if (image.depth() != CV_32F || !image.isContinuous())
    invariant_broken("the float decode returned another depth or a strided image");
  if (o.channels > 0 && image.channels() != o.channels)
    invariant_broken("the float decode returned other channels than asked for");
  const float* v = image.ptr<float>();
  for (size_t i = 0, n = image.total() * image.channels(); i < n; ++i)
    if (!std::isfinite(v[i])) invariant_broken("the float decode accepted a non-finite sample");
}

void fuzz_h5(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const bool two_shards = in.u8() & 1;
  const H5Schema schema{{{"images", H5T_NATIVE_UINT8, 1},
                         {"offsets", H5T_NATIVE_INT64, 1},
                         {"labels", H5T_NATIVE_INT64, 1},
                         {"paths", H5T_C_S1, 1},
                         {"class_names", H5T_C_S1, 1}},
                        {"format", "version"}};
  TempInput file(nullptr, 0, ".h5");
  build_h5(in, schema, file.path());
  std::vector<std::filesystem::path> shards{file.path()};
  if (two_shards) shards.push_back(file.path());
  const augment::H5Dataset set(shards);
  const int64_t classes = static_cast<int64_t>(set.class_names().size());
  for (const int64_t i : {int64_t{0}, set.size() / 2, set.size() - 1}) {
    if (i < 0) continue;
    // What the constructor accepted holds: labels are class ids or -1, every image's bytes lie
    // inside /images.
    const int64_t label = set.label(i);
    if (label < -1 || label >= classes) invariant_broken("accepted a label outside the classes");
    (void)set.path(i);
    (void)set.encoded(i);
    (void)set.load(i);
  }
}

}  // namespace xdino::fuzz
