// Encoded images in HDF5 shards (written by `dino pack`, see pack.h; or by h5py).
//
// Layout of one shard file (version 1):
//   /images       uint8 [total bytes], contiguous: the original encoded files, concatenated
//   /offsets      int64 [n + 1]: image i is images[offsets[i] : offsets[i + 1]]
//   /labels       int64 [n]: class id, or -1 (optional: absent means unlabeled)
//   /paths        UTF-8 strings [n]: where the image came from, e.g. "cat/a.png" (optional)
//   /class_names  UTF-8 strings [C], sorted; class id = index (optional: "0".."C-1")
//   attributes of /: format "xdino-encoded-images", version 1, shard, num_shards
// With h5py:
//   f = h5py.File("train.h5"); o = f["offsets"]
//   PIL.Image.open(io.BytesIO(f["images"][o[i]:o[i + 1]].tobytes()))
// and a file written with h5py in this layout (np.uint8 data, no chunks) reads back here.
//
// Contract:
//  - Several shards form one dataset, in the order given; their class names must agree.
//  - Labels, offsets and paths are read into memory at construction; load(i) reads the
//    image's bytes with pread() at the address HDF5 reports for the contiguous /images
//    (no HDF5 lock on the hot path), or through HDF5 when /images is chunked or compressed.
//  - path(i) = the stored path, or "<shard file>#<i>" when the shard has none.
//  - Inconsistent files throw xdino::Error naming the shard and the problem: offsets outside
//    /images, counts that disagree, labels below -1 or from kH5MaxClasses on, datasets that
//    declare more than the file stores (h5.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "augment/data/dataset.h"
#include "augment/data/decode.h"

namespace xdino::augment {

inline constexpr const char* kH5Format = "xdino-encoded-images";
inline constexpr int64_t kH5Version = 1;
// Labels must be below this (ImageNet-21k has 21841 classes).
inline constexpr int64_t kH5MaxClasses = int64_t{1} << 20;

class H5Dataset : public Dataset {
 public:
  // decode: how load() decodes (decode.h); kAuto is resolved here from the first image.
  explicit H5Dataset(const std::vector<std::filesystem::path>& shards, DecodeOptions decode = {});
  ~H5Dataset() override;

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t label(int64_t i) const override;
  const std::vector<std::string>& class_names() const override { return classes_; }
  std::string path(int64_t i) const override;
  Image load(int64_t i) const override;
  std::string format() const override { return "hdf5"; }
  std::string location() const override;

  // The encoded bytes of sample i, as packed.
  std::string encoded(int64_t i) const;
  int64_t num_shards() const { return static_cast<int64_t>(shards_.size()); }
  // Shards whose images are read with pread() rather than through HDF5.
  int64_t direct_shards() const;

 private:
  struct Shard;
  const Shard& shard_of(int64_t i, int64_t* local) const;

  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<int64_t> first_;  // global index of each shard's first sample
  std::vector<std::string> classes_;
  std::vector<int32_t> labels_;
  StringList paths_;  // the shards' stored paths (Shard::first_path)
  DecodeOptions decode_;
};

}  // namespace xdino::augment
