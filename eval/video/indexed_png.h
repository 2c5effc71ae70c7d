// Indexed (palette) PNGs, the format of DAVIS annotations and of the masks the video
// segmentation writes (eval_video_segmentation.py's imwrite_indexed).
//
// Contract:
//  - read_label_png(path): the per-pixel palette indices (CV_8UC1) of a palette PNG of bit
//    depth 1-8 (what PIL's np.asarray(Image.open(...)) gives), or the values of an 8-bit
//    greyscale PNG. Other PNG kinds, a missing or corrupt file: xdino::Error naming the path.
//    OpenCV cannot do this (it always expands palettes to colours), hence libpng.
//  - write_label_png(path, labels, palette): an 8-bit palette PNG of `labels` (CV_8UC1) with
//    `palette` (256 RGB entries), written atomically (temp file + rename).
//  - davis_palette(): the 256-colour palette of DAVIS annotations (PASCAL VOC's: label bits
//    spread over the high bits of R, G, B), index 0 black, 1 (128, 0, 0), 2 (0, 128, 0), ...
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <opencv2/core.hpp>
#include <vector>

namespace xdino::eval::video {

using Palette = std::vector<std::array<uint8_t, 3>>;

cv::Mat read_label_png(const std::filesystem::path& path);
void write_label_png(const std::filesystem::path& path, const cv::Mat& labels,
                     const Palette& palette);
const Palette& davis_palette();

}  // namespace xdino::eval::video
