#include "augment/data/image_list.h"

#include "augment/data/decode.h"

namespace xdino::augment {

ImageListDataset::ImageListDataset(std::vector<std::string> paths, std::string location)
    : paths_(std::move(paths)), location_(std::move(location)) {}

int64_t ImageListDataset::label(int64_t i) const {
  check_index(i);
  return -1;
}

std::string ImageListDataset::path(int64_t i) const {
  check_index(i);
  return paths_[static_cast<size_t>(i)];
}

Image ImageListDataset::load(int64_t i) const {
  return read_image(path(i), /*exif_orientation=*/false);
}

}  // namespace xdino::augment
