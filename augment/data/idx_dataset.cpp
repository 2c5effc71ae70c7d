#include "augment/data/idx_dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <opencv2/imgproc.hpp>

#include "core/check.h"

namespace xdino::augment {
namespace fs = std::filesystem;

namespace {

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// "a x b x c" for messages.
std::string dims_text(const std::vector<int64_t>& dims) {
  std::string out;
  for (const int64_t d : dims) out += (out.empty() ? "" : " x ") + std::to_string(d);
  return out;
}

// Parses an IDX header; returns the dimensions and checks the payload size.
std::vector<int64_t> idx_dims(const std::vector<uint8_t>& data, const fs::path& file,
                              std::initializer_list<int> allowed_ranks) {
  XDINO_CHECK(data.size() >= 4 && data[0] == 0 && data[1] == 0, file,
              " is not an IDX file (bad magic number)");
  XDINO_CHECK(data[2] == 0x08, file, " holds IDX data type 0x", std::hex, int{data[2]},
              ", only unsigned bytes (0x08) are supported");
  const int rank = data[3];
  XDINO_CHECK(std::find(allowed_ranks.begin(), allowed_ranks.end(), rank) != allowed_ranks.end(),
              file, " has ", rank, " dimensions, which is not an image or label file");
  XDINO_CHECK(data.size() >= 4 + 4 * static_cast<size_t>(rank), file, " is truncated (header)");
  std::vector<int64_t> dims;
  // Up to four declared 32-bit dimensions: their product can pass 2^63 (undefined behaviour in
  // int64), so it is overflow-checked; an overflow cannot match the file's size anyway.
  int64_t count = 1;
  bool overflow = false;
  for (int d = 0; d < rank; ++d) {
    dims.push_back(big_endian_u32(data.data() + 4 + 4 * d));
    overflow = overflow || __builtin_mul_overflow(count, dims.back(), &count);
  }
  XDINO_CHECK(!overflow, file, " declares ", dims_text(dims),
              " elements, more than any file holds (corrupt header)");
  XDINO_CHECK(data.size() == 4 + 4 * static_cast<size_t>(rank) + static_cast<size_t>(count), file,
              " holds ", data.size() - 4 - 4 * rank, " data bytes, its header announces ", count,
              " (truncated or corrupt)");
  return dims;
}

std::optional<fs::path> first_existing(const fs::path& dir, const std::vector<std::string>& names) {
  for (const std::string& n : names)
    for (const char* ext : {"", ".gz"})
      if (fs::is_regular_file(dir / (n + ext))) return dir / (n + ext);
  return std::nullopt;
}

// torchvision.datasets.FashionMNIST.classes.
const std::vector<std::string> kFashionMnistClasses = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

std::vector<std::string> idx_class_names(const fs::path& dir, int64_t num_classes) {
  std::vector<std::string> names;
  if (std::ifstream in(dir / "classes.txt"); in.good()) {
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) names.push_back(line);
    XDINO_CHECK(static_cast<int64_t>(names.size()) >= num_classes, dir / "classes.txt", " names ",
                names.size(), " classes but the labels go up to ", num_classes - 1);
    return names;
  }
  std::string folder = fs::absolute(dir).lexically_normal().filename().string();
  if (folder.empty())
    folder = fs::absolute(dir).lexically_normal().parent_path().filename().string();
  std::transform(folder.begin(), folder.end(), folder.begin(), ::tolower);
  if (folder.find("fashion") != std::string::npos && num_classes == 10) return kFashionMnistClasses;
  for (int64_t c = 0; c < num_classes; ++c) names.push_back(std::to_string(c));
  return names;
}

}  // namespace

std::vector<uint8_t> read_maybe_gzip(const fs::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  XDINO_CHECK(f != nullptr, "cannot open ", path, ": ", std::strerror(errno));
  // zlib's buffers (3x this) sized to the file: 1 MiB for the datasets, little for tiny files.
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  gzbuffer(f, static_cast<unsigned>(std::clamp<uintmax_t>(ec ? 0 : bytes, 1 << 13, 1 << 20)));
  std::vector<uint8_t> out;
  // Chunks double from 64 KiB to 64 MiB: linear total cost for the 47 MB Fashion-MNIST file,
  // and a tiny file is not zero-filled megabytes at a time (which made fuzz_idx crawl).
  size_t chunk = size_t{1} << 16;
  for (;; chunk = std::min(2 * chunk, size_t{1} << 26)) {
    const size_t old = out.size();
    out.resize(old + chunk);
    const int n = gzread(f, out.data() + old, static_cast<unsigned>(chunk));
    int code = Z_OK;
    const std::string message = gzerror(f, &code);
    // gzread reports a cut-off stream ("unexpected end of file", Z_BUF_ERROR) without
    // failing: it returns what it could inflate. Treat it as the error it is.
    if (n < 0 || code != Z_OK) {
      gzclose(f);
      XDINO_FAIL("cannot read ", path, ": ", message, " (truncated or corrupt gzip)");
    }
    out.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
  }
  XDINO_CHECK(gzclose(f) == Z_OK, "cannot read ", path,
              ": the gzip stream is cut off "
              "(truncated file)");
  return out;
}

std::optional<IdxFiles> find_idx_files(const fs::path& dir, const std::string& prefix) {
  const std::optional<fs::path> images =
      first_existing(dir, {prefix + "-images-idx3-ubyte", prefix + "-images.idx3-ubyte",
                           prefix + "-images-idx4-ubyte", prefix + "-images.idx4-ubyte"});
  if (!images) return std::nullopt;
  const std::optional<fs::path> labels =
      first_existing(dir, {prefix + "-labels-idx1-ubyte", prefix + "-labels.idx1-ubyte"});
  XDINO_CHECK_ARG(labels.has_value(), "found IDX images ", *images, " but no ", prefix,
                  "-labels-idx1-ubyte[.gz] next to them");
  return IdxFiles{*images, *labels};
}

IdxDataset::IdxDataset(const IdxFiles& files) : files_(files) {
  pixels_ = read_maybe_gzip(files.images);
  const std::vector<int64_t> dims = idx_dims(pixels_, files.images, {3, 4});
  count_ = dims[0];
  height_ = static_cast<int>(dims[1]);
  width_ = static_cast<int>(dims[2]);
  channels_ = dims.size() == 4 ? static_cast<int>(dims[3]) : 1;
  XDINO_CHECK(channels_ == 1 || channels_ == 3, files.images, " has ", channels_,
              " channels per pixel; 1 or 3 are supported");
  XDINO_CHECK(height_ > 0 && width_ > 0, files.images, " holds empty images");
  pixels_.erase(pixels_.begin(), pixels_.begin() + 4 + 4 * static_cast<long>(dims.size()));

  labels_ = read_maybe_gzip(files.labels);
  const std::vector<int64_t> label_dims = idx_dims(labels_, files.labels, {1});
  XDINO_CHECK(label_dims[0] == count_, files.labels, " holds ", label_dims[0], " labels for the ",
              count_, " images of ", files.images);
  labels_.erase(labels_.begin(), labels_.begin() + 8);
  const int64_t num_classes =
      labels_.empty() ? 0 : int64_t{*std::max_element(labels_.begin(), labels_.end())} + 1;
  classes_ = idx_class_names(files.images.parent_path(), num_classes);
}

int64_t IdxDataset::label(int64_t i) const {
  check_index(i);
  return labels_[static_cast<size_t>(i)];
}

std::string IdxDataset::path(int64_t i) const {
  check_index(i);
  return files_.images.string() + "#" + std::to_string(i);
}

Image IdxDataset::load(int64_t i) const {
  check_index(i);
  const size_t bytes = static_cast<size_t>(height_) * width_ * channels_;
  const cv::Mat stored(height_, width_, channels_ == 1 ? CV_8UC1 : CV_8UC3,
                       const_cast<uint8_t*>(pixels_.data() + bytes * static_cast<size_t>(i)));
  Image rgb;
  if (channels_ == 1)
    cv::cvtColor(stored, rgb, cv::COLOR_GRAY2RGB);
  else
    rgb = stored.clone();
  return rgb;
}

}  // namespace xdino::augment
