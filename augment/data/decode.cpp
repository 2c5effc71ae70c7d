#include "augment/data/decode.h"

#include <climits>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/atomic_file.h"
#include "core/check.h"

namespace xdino::augment {

bool jpeg_is_complete(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  if (n < 2 || p[0] != 0xFF || p[1] != 0xD8) return true;
  // Walk the marker segments up to the first start-of-scan by their lengths, so that the
  // end-of-image marker of an EXIF thumbnail (inside an APPn segment) is not mistaken for ours.
  size_t pos = 2;
  for (;;) {
    while (pos < n && p[pos] != 0xFF) ++pos;  // stray bytes: libjpeg skips them with a warning
    while (pos < n && p[pos] == 0xFF) ++pos;  // fill bytes
    if (pos + 1 > n) return false;
    const unsigned marker = p[pos++];
    if (marker == 0xD9) return true;  // end of image before any scan: the decoder will judge
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no length field
    if (pos + 2 > n) return false;
    pos += (static_cast<size_t>(p[pos]) << 8) | p[pos + 1];
    if (marker == 0xDA) break;
  }
  // Entropy-coded data never holds 0xFF 0xD9 (0xFF is stuffed), so any such pair after the
  // first scan header is the real end marker; searching from the back finds it at once.
  for (size_t i = n - 1; i > pos && i >= 1; --i)
    if (p[i] == 0xD9 && p[i - 1] == 0xFF) return true;
  return false;
}

Image decode_image(std::string_view bytes, const std::string& name, bool exif_orientation) {
  XDINO_CHECK(!bytes.empty(), "cannot decode ", name, ": the file is empty");
  XDINO_CHECK(bytes.size() < static_cast<size_t>(INT_MAX), "cannot decode ", name, ": ",
              bytes.size(), " bytes is more than OpenCV can take");
  XDINO_CHECK(jpeg_is_complete(bytes), "cannot decode ", name,
              ": truncated JPEG (no end-of-image marker)");
  const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1,
                    const_cast<char*>(bytes.data()));
  // IMREAD_COLOR gives 8-bit BGR from any layout (grey replicated, alpha dropped, palette
  // expanded, 16-bit reduced to the high byte) and applies EXIF orientation unless told not to.
  const int flags = cv::IMREAD_COLOR | (exif_orientation ? 0 : cv::IMREAD_IGNORE_ORIENTATION);
  cv::Mat image;
  try {
    image = cv::imdecode(buf, flags);
  } catch (const cv::Exception& e) {
    XDINO_FAIL("cannot decode ", name, ": ", e.err);
  }
  XDINO_CHECK(!image.empty(), "cannot decode ", name,
              ": corrupt, or not an image format this OpenCV reads");
  XDINO_CHECK(image.type() == CV_8UC3, "cannot decode ", name, ": OpenCV returned type ",
              image.type(), " instead of 8-bit colour");
  cv::cvtColor(image, image, cv::COLOR_BGR2RGB);
  return image;
}

Image read_image(const std::filesystem::path& path, bool exif_orientation) {
  return decode_image(read_file(path), path.string(), exif_orientation);
}

}  // namespace xdino::augment
