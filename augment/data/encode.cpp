#include "augment/data/encode.h"

#include <algorithm>
#include <cctype>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

void encode_to(const std::filesystem::path& path, const cv::Mat& image, const char* ext) {
  XDINO_CHECK(image.type() == CV_8UC3 || image.type() == CV_8UC1, "cannot write ", path,
              ": expected an 8-bit RGB or grey image");
  cv::Mat bgr;  // OpenCV's encoders take BGR
  if (image.channels() == 3)
    cv::cvtColor(image, bgr, cv::COLOR_RGB2BGR);
  else
    bgr = image;
  std::vector<uchar> bytes;
  XDINO_CHECK(cv::imencode(ext, bgr, bytes), "cannot encode ", path, " as ", ext + 1);
  write_file_atomically(
      path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace

void write_png(const std::filesystem::path& path, const cv::Mat& image) {
  encode_to(path, image, ".png");
}

void write_image(const std::filesystem::path& path, const cv::Mat& image) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  encode_to(path, image, ext == ".jpg" || ext == ".jpeg" ? ".jpg" : ".png");
}

}  // namespace xdino::augment
