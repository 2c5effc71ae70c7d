// Writing 8-bit images to files people open: previews, attention maps, overviews.
//
// Contract: write_image() encodes an RGB (CV_8UC3) or grey (CV_8UC1) image as JPEG when the
// path ends in .jpg/.jpeg (any case), else as PNG, and writes it atomically (temp + rename,
// core/atomic_file.h); write_png() always writes PNG. Other image types and encoder failures
// throw xdino::Error naming the path.
#pragma once

#include <filesystem>
#include <opencv2/core.hpp>

namespace xdino::augment {

void write_png(const std::filesystem::path& path, const cv::Mat& image);
void write_image(const std::filesystem::path& path, const cv::Mat& image);

}  // namespace xdino::augment
