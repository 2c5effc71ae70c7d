// MNIST-style IDX files (MNIST, Fashion-MNIST, KMNIST, EMNIST): images + labels, gzip or raw.
//
// Contract:
//  - Images: IDX unsigned-byte tensor (magic 0x00000803) of shape N×H×W (greyscale, replicated
//    to RGB on load) or 0x00000804 N×H×W×C with C = 1 or 3. Labels: 0x00000801, N bytes.
//    Both files may be gzip-compressed (zlib reads either). Everything is read into memory at
//    construction (47 MB for Fashion-MNIST train); load() copies one image out.
//  - Class names: one per line from `classes.txt` next to the images if present; else
//    torchvision's FashionMNIST names when the folder name contains "fashion" and there are
//    10 classes; else "0", "1", ... (num_classes = max label + 1).
//  - path(i) = "<images file>#<i>". Corrupt or mismatched files throw xdino::Error naming
//    the file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "augment/data/dataset.h"

namespace xdino::augment {

struct IdxFiles {
  std::filesystem::path images;
  std::filesystem::path labels;
};

// `prefix`-images-idx3-ubyte[.gz] (or `prefix`-images.idx3-ubyte[.gz]) and the matching
// labels in `dir`; nullopt when there are no such images. Images without labels throw
// UsageError.
std::optional<IdxFiles> find_idx_files(const std::filesystem::path& dir, const std::string& prefix);

class IdxDataset : public Dataset {
 public:
  explicit IdxDataset(const IdxFiles& files);

  int64_t size() const override { return count_; }
  int64_t label(int64_t i) const override;
  const std::vector<std::string>& class_names() const override { return classes_; }
  std::string path(int64_t i) const override;
  Image load(int64_t i) const override;
  std::string format() const override { return "idx"; }
  std::string location() const override { return files_.images.string(); }

  int height() const { return height_; }
  int width() const { return width_; }

 private:
  IdxFiles files_;
  int64_t count_ = 0;
  int height_ = 0;
  int width_ = 0;
  int channels_ = 1;
  std::vector<uint8_t> pixels_;
  std::vector<uint8_t> labels_;
  std::vector<std::string> classes_;
};

// The whole content of a file, gunzipped if it is gzip (zlib), as is otherwise.
std::vector<uint8_t> read_maybe_gzip(const std::filesystem::path& path);

}  // namespace xdino::augment
