// The image-data fuzz entry points (see targets.h): IDX files and image decoding. LibTorch-free
// (OpenCV, zlib), so the instrumented build of these targets compiles no LibTorch header.
#include <algorithm>
#include <string_view>

#include "augment/data/decode.h"
#include "augment/data/idx_dataset.h"
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

}  // namespace xdino::fuzz
