#include "augment/data/decode.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

#include "augment/ops/float_image.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"

namespace xdino::augment {

namespace {

// Pillow refuses to decode images above twice its MAX_IMAGE_PIXELS (DecompressionBombError);
// so do we, before OpenCV allocates what a few corrupt header bytes declare (fuzz_decode found a
// 79-byte JPEG declaring 65338 x 12079 pixels: 2.4 GB). OpenCV's own limit is 2^30 pixels.
constexpr int64_t kMaxImagePixels = 2 * int64_t{89478485};

// A JPEG's marker segments up to its first start-of-scan, walked by their lengths (so that
// markers inside an EXIF thumbnail in an APPn segment are not taken for ours).
struct JpegHeader {
  bool is_jpeg = false;
  bool ends_before_scan = false;  // the data stops inside the headers
  bool eoi_before_scan = false;   // an end-of-image marker before any scan
  size_t scan_begin = 0;          // after the first start-of-scan header
  int64_t width = 0, height = 0;  // from the first start-of-frame, 0 if none
  std::string_view exif;          // the first APP1 "Exif" segment's TIFF block, if any
};

JpegHeader read_jpeg_header(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  JpegHeader h;
  if (n < 2 || p[0] != 0xFF || p[1] != 0xD8) return h;
  h.is_jpeg = true;
  size_t pos = 2;
  for (;;) {
    while (pos < n && p[pos] != 0xFF) ++pos;  // stray bytes: libjpeg skips them with a warning
    while (pos < n && p[pos] == 0xFF) ++pos;  // fill bytes
    if (pos + 1 > n) return h.ends_before_scan = true, h;
    const unsigned marker = p[pos++];
    if (marker == 0xD9) return h.eoi_before_scan = true, h;
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;  // no length field
    if (pos + 2 > n) return h.ends_before_scan = true, h;
    // Start of frame (SOF0-SOF15 but DHT, JPG and DAC): length, precision, height, width.
    const bool sof =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof && h.width == 0 && pos + 7 <= n) {
      h.height = (int64_t{p[pos + 3]} << 8) | p[pos + 4];
      h.width = (int64_t{p[pos + 5]} << 8) | p[pos + 6];
    }
    const size_t length = (static_cast<size_t>(p[pos]) << 8) | p[pos + 1];
    if (marker == 0xE1 && h.exif.empty() && length >= 8 && pos + length <= n &&
        bytes.substr(pos + 2, 6) == std::string_view("Exif\0\0", 6))
      h.exif = bytes.substr(pos + 8, length - 8);
    pos += length;
    if (marker == 0xDA) return h.scan_begin = pos, h;
  }
}

// The orientation (1-8) an EXIF block (a TIFF header and its IFD0) declares; 1 when it
// declares none or cannot be read. Every offset is checked against the block.
int exif_orientation(std::string_view tiff) {
  const auto* p = reinterpret_cast<const unsigned char*>(tiff.data());
  const size_t n = tiff.size();
  if (n < 8 || !(tiff.substr(0, 2) == "II" || tiff.substr(0, 2) == "MM")) return 1;
  const bool little = tiff[0] == 'I';
  const auto u16 = [&](size_t at) -> uint32_t {
    return little ? p[at] | (p[at + 1] << 8) : (p[at] << 8) | p[at + 1];
  };
  const auto u32 = [&](size_t at) -> uint64_t {
    return little ? uint64_t{u16(at)} | (uint64_t{u16(at + 2)} << 16)
                  : (uint64_t{u16(at)} << 16) | u16(at + 2);
  };
  if (u16(2) != 42) return 1;
  const uint64_t ifd = u32(4);
  if (ifd + 2 > n) return 1;
  const uint64_t entries = u16(ifd);
  for (uint64_t i = 0; i < entries; ++i) {
    const uint64_t at = ifd + 2 + 12 * i;
    if (at + 12 > n) return 1;
    if (u16(at) != 0x0112) continue;  // Orientation, a SHORT: its value in the first 2 bytes
    const uint32_t v = u16(at + 2) == 3 ? u16(at + 8) : 1;
    return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
  }
  return 1;
}

// What OpenCV's decoder does for an EXIF orientation on the 8-bit path (IMREAD_COLOR), done to
// the float path's image (IMREAD_UNCHANGED applies none).
void apply_orientation(cv::Mat& image, int orientation) {
  if (orientation >= 5) cv::transpose(image, image);
  switch (orientation) {
    case 2:
    case 6:
      cv::flip(image, image, 1);
      break;
    case 3:
    case 7:
      cv::flip(image, image, -1);
      break;
    case 4:
    case 8:
      cv::flip(image, image, 0);
      break;
    default:
      break;
  }
}

// Width and height as the header declares them (JPEG's first frame, from its header `jpeg`;
// PNG's IHDR); 0 x 0 for other formats, which OpenCV's own pixel limit guards.
std::pair<int64_t, int64_t> declared_size(std::string_view bytes, const JpegHeader& jpeg) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() >= 24 && bytes.substr(0, 8) == "\x89PNG\r\n\x1a\n" &&
      bytes.substr(12, 4) == "IHDR") {
    const auto be32 = [&](size_t at) {
      return (int64_t{p[at]} << 24) | (int64_t{p[at + 1]} << 16) | (int64_t{p[at + 2]} << 8) |
             p[at + 3];
    };
    return {be32(16), be32(20)};
  }
  return {jpeg.width, jpeg.height};
}

// Whether the bytes start like a format torchvision's ImageFolder loads (JPEG, PNG, BMP, WebP,
// TIFF, PPM/PGM/PBM). OpenCV would otherwise try every decoder it was built with, and Debian's
// includes DICOM (GDCM), whose reader asserts, aborting the process, on a damaged file
// (fuzz_decode found one: a JPEG start marker without the 0xFF that opens its first segment).
bool is_imagefolder_format(std::string_view b) {
  const auto starts = [&](std::string_view magic) { return b.substr(0, magic.size()) == magic; };
  return starts("\xFF\xD8\xFF") || starts("\x89PNG\r\n\x1a\n") || starts("BM") ||
         (starts("RIFF") && b.size() >= 12 && b.substr(8, 4) == "WEBP") ||
         starts(std::string_view("II*\0", 4)) || starts(std::string_view("MM\0*", 4)) ||
         (b.size() >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '6');
}

bool jpeg_is_complete(std::string_view bytes, const JpegHeader& h) {
  if (!h.is_jpeg || h.eoi_before_scan) return true;  // not ours to judge / the decoder will
  if (h.ends_before_scan) return false;
  // Entropy-coded data never holds 0xFF 0xD9 (0xFF is stuffed), so any such pair after the
  // first scan header is the real end marker; searching from the back finds it at once.
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t i = bytes.size() - 1; i > h.scan_begin && i >= 1; --i)
    if (p[i] == 0xD9 && p[i - 1] == 0xFF) return true;
  return false;
}

}  // namespace

bool jpeg_is_complete(std::string_view bytes) {
  return jpeg_is_complete(bytes, read_jpeg_header(bytes));
}

namespace {

// The checks before any decoder runs, then OpenCV's imdecode with `flags`.
cv::Mat checked_decode(std::string_view bytes, const std::string& name, int flags) {
  XDINO_CHECK(!bytes.empty(), "cannot decode ", name, ": the file is empty");
  XDINO_CHECK(bytes.size() < static_cast<size_t>(INT_MAX), "cannot decode ", name, ": ",
              bytes.size(), " bytes is more than OpenCV can take");
  XDINO_CHECK(is_imagefolder_format(bytes), "cannot decode ", name,
              ": not an image format torchvision's ImageFolder reads (JPEG, PNG, BMP, WebP, "
              "TIFF, PPM/PGM/PBM)");
  const JpegHeader jpeg = read_jpeg_header(bytes);  // walked once for both checks
  XDINO_CHECK(jpeg_is_complete(bytes, jpeg), "cannot decode ", name,
              ": truncated JPEG (no end-of-image marker)");
  const auto [width, height] = declared_size(bytes, jpeg);
  // PNG sizes are 32-bit: the product can pass 2^63 (fuzz_decode found it), so divide.
  XDINO_CHECK(width == 0 || height <= kMaxImagePixels / width, "cannot decode ", name,
              ": it declares ", width, " x ", height, " pixels, more than the ", kMaxImagePixels,
              " that Pillow decodes (a decompression bomb, or a corrupt header)");
  const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
  cv::Mat image;
  try {
    image = cv::imdecode(buf, flags);
  } catch (const cv::Exception& e) {
    XDINO_FAIL("cannot decode ", name, ": ", e.err);
  }
  XDINO_CHECK(!image.empty(), "cannot decode ", name,
              ": corrupt, or not an image format this OpenCV reads");
  return image;
}

// Stored float samples beyond this magnitude are refused like NaN: squared and summed over an
// image (a BatchNorm's or LayerNorm's variance) they overflow float32 (3.4e38), and one such
// image turns the loss into NaN iterations later, with no name attached.
constexpr float kMaxFloatSample = 1e12f;

// Counts the 8-bit path can feed: RGB, gray, or not known yet (0: the model's).
bool rgb_or_gray_channels(int64_t channels) {
  return channels == 0 || channels == 1 || channels == 3;
}

// The float pipeline's image: float32 in [0, 1], RGB(A) order, `channels` channels (0: as
// stored).
Image to_float_pixels(cv::Mat image, int64_t channels, const std::string& name) {
  const int depth = image.depth();
  XDINO_CHECK(depth == CV_8U || depth == CV_16U || depth == CV_32F || depth == CV_64F,
              "cannot decode ", name, ": samples of OpenCV depth ", depth,
              "; the float pipeline reads 8- or 16-bit integers or floats");
  Image pixels;
  image.convertTo(pixels, CV_MAKETYPE(CV_32F, image.channels()));  // exact for integers
  if (depth == CV_32F || depth == CV_64F) {  // integers are always finite; stored floats may not be
    const float* v = pixels.ptr<float>();
    const size_t n = pixels.total() * pixels.channels();
    size_t bad = 0, huge = 0;
    for (size_t i = 0; i < n; ++i) {
      bad += !std::isfinite(v[i]);
      huge += std::isfinite(v[i]) && std::fabs(v[i]) > kMaxFloatSample;
    }
    XDINO_CHECK(bad == 0, "cannot decode ", name, ": ", bad, " of its ", n,
                " samples are not finite (NaN or infinity)");
    XDINO_CHECK(huge == 0, "cannot decode ", name, ": ", huge, " of its ", n,
                " samples lie beyond +-1e12, far outside any range of pixel values (the "
                "network's float32 sums of squares would overflow to infinity)");
  }
  // v / 255 or v / 65535 correctly rounded: a float division (convertTo's scale multiplies by
  // the rounded reciprocal, one ulp off for some values).
  if (depth == CV_8U || depth == CV_16U) {
    const float divisor = depth == CV_8U ? 255.0f : 65535.0f;
    float* v = pixels.ptr<float>();
    for (size_t i = 0, n = pixels.total() * pixels.channels(); i < n; ++i) v[i] /= divisor;
  }
  if (pixels.channels() == 3) cv::cvtColor(pixels, pixels, cv::COLOR_BGR2RGB);
  if (pixels.channels() == 4) cv::cvtColor(pixels, pixels, cv::COLOR_BGRA2RGBA);
  if (channels > 0) convert_channels(pixels, channels, "image " + name);
  return pixels;
}

}  // namespace

Image decode_image(std::string_view bytes, const std::string& name, bool exif_orientation) {
  // IMREAD_COLOR gives 8-bit BGR from any layout (grey replicated, alpha dropped, palette
  // expanded, 16-bit reduced to the high byte) and applies EXIF orientation unless told not to.
  const int flags = cv::IMREAD_COLOR | (exif_orientation ? 0 : cv::IMREAD_IGNORE_ORIENTATION);
  cv::Mat image = checked_decode(bytes, name, flags);
  XDINO_CHECK(image.type() == CV_8UC3, "cannot decode ", name, ": OpenCV returned type ",
              image.type(), " instead of 8-bit colour");
  cv::cvtColor(image, image, cv::COLOR_BGR2RGB);
  return image;
}

Image decode_image(std::string_view bytes, const std::string& name, const DecodeOptions& options) {
  XDINO_CHECK(options.pixels != DecodeOptions::Pixels::kAuto,
              "decode_image: resolve kAuto first (resolve_pixels)");
  if (options.pixels == DecodeOptions::Pixels::k8Bit)
    return decode_image(bytes, name, options.exif_orientation);
  XDINO_CHECK(options.channels >= 0, "cannot decode ", name, " into ", options.channels,
              " channels");
  cv::Mat stored = checked_decode(bytes, name, cv::IMREAD_UNCHANGED);
  if (options.exif_orientation)
    apply_orientation(stored, exif_orientation(read_jpeg_header(bytes).exif));
  return to_float_pixels(stored, options.channels, name);
}

DecodeOptions resolve_pixels(const DecodeOptions& options, std::string_view first_image,
                             const std::string& name) {
  if (options.pixels != DecodeOptions::Pixels::kAuto) return options;
  DecodeOptions resolved = options;
  resolved.pixels = DecodeOptions::Pixels::k8Bit;
  int depth = CV_8U, stored = 3;
  const bool rgb_or_gray = rgb_or_gray_channels(options.channels);
  if (rgb_or_gray) {
    const cv::Mat image = checked_decode(first_image, name, cv::IMREAD_UNCHANGED);
    depth = image.depth();
    stored = image.channels();
    if (depth == CV_8U) return resolved;
  }
  resolved.pixels = DecodeOptions::Pixels::kFloat;
  if (rgb_or_gray) {
    log::info("images are not 8-bit (", name, ": OpenCV depth ", depth, ", ", stored,
              " channels): the float pipeline reads them at full depth (docs/architecture.md, "
              "\"The float pipeline\")");
  }
  return resolved;
}

DecodeOptions resolve_pixels(const DecodeOptions& options, int64_t count,
                             const std::function<std::string(int64_t)>& encoded,
                             const std::function<std::string(int64_t)>& name) {
  if (options.pixels != DecodeOptions::Pixels::kAuto) return options;
  constexpr int64_t kProbes = 16;
  for (int64_t i = 0; i < std::min(count, kProbes); ++i) {
    try {
      return resolve_pixels(options, encoded(i), name(i));
    } catch (const std::exception&) {
      // Unreadable or corrupt: the loader reports it when its turn comes.
    }
  }
  DecodeOptions resolved = options;
  const bool rgb_or_gray = rgb_or_gray_channels(options.channels);
  resolved.pixels = rgb_or_gray ? DecodeOptions::Pixels::k8Bit : DecodeOptions::Pixels::kFloat;
  return resolved;
}

Image read_image(const std::filesystem::path& path, bool exif_orientation) {
  return decode_image(read_file(path), path.string(), exif_orientation);
}

Image read_image(const std::filesystem::path& path, const DecodeOptions& options) {
  return decode_image(read_file(path), path.string(), options);
}

}  // namespace xdino::augment
