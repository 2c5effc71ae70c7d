#include "eval/video/indexed_png.h"

#include <png.h>

#include <cstdio>
#include <memory>

#include "core/atomic_file.h"
#include "core/check.h"

namespace xdino::eval::video {
namespace {

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  *static_cast<std::string*>(png_get_error_ptr(png)) = message;
  png_longjmp(png, 1);
}

void png_quiet(png_structp, png_const_charp) {}

void png_append(png_structp png, png_bytep data, png_size_t length) {
  static_cast<std::string*>(png_get_io_ptr(png))
      ->append(reinterpret_cast<const char*>(data), length);
}

void png_no_flush(png_structp) {}

}  // namespace

cv::Mat read_label_png(const std::filesystem::path& path) {
  std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  XDINO_CHECK(file != nullptr, "cannot open the mask ", path.string());
  std::string error;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &error, png_fail, png_quiet);
  png_infop info = png_create_info_struct(png);
  cv::Mat labels;
  // libpng reports errors by longjmp: nothing with a destructor may be created below it.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    XDINO_FAIL("cannot read the mask ", path.string(), ": ", error.empty() ? "not a PNG" : error);
  }
  png_init_io(png, file.get());
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  const bool ok = (color == PNG_COLOR_TYPE_PALETTE && depth <= 8) ||
                  (color == PNG_COLOR_TYPE_GRAY && depth == 8);
  if (!ok) {
    error = "a label mask must be a palette PNG or an 8-bit greyscale PNG";
    png_longjmp(png, 1);
  }
  if (depth < 8) png_set_packing(png);
  png_read_update_info(png, info);
  const int width = static_cast<int>(png_get_image_width(png, info));
  const int height = static_cast<int>(png_get_image_height(png, info));
  labels.create(height, width, CV_8UC1);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int y = 0; y < height; ++y) rows[static_cast<size_t>(y)] = labels.ptr<uint8_t>(y);
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return labels;
}

void write_label_png(const std::filesystem::path& path, const cv::Mat& labels,
                     const Palette& palette) {
  XDINO_CHECK(labels.type() == CV_8UC1 && !labels.empty(), "a label PNG needs a CV_8UC1 image");
  XDINO_CHECK(!palette.empty() && palette.size() <= 256, "a palette has 1-256 colours");
  std::string bytes, error;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &error, png_fail, png_quiet);
  png_infop info = png_create_info_struct(png);
  std::vector<png_color> colours;
  for (const auto& c : palette) colours.push_back(png_color{c[0], c[1], c[2]});
  std::vector<png_bytep> rows;
  for (int y = 0; y < labels.rows; ++y)
    rows.push_back(const_cast<png_bytep>(labels.ptr<uint8_t>(y)));
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    XDINO_FAIL("cannot encode the mask ", path.string(), ": ", error);
  }
  png_set_write_fn(png, &bytes, png_append, png_no_flush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(labels.cols),
               static_cast<png_uint_32>(labels.rows), 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_PLTE(png, info, colours.data(), static_cast<int>(colours.size()));
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  write_file_atomically(path, bytes);
}

const Palette& davis_palette() {
  static const Palette palette = [] {
    Palette p(256);
    for (int i = 0; i < 256; ++i) {
      int label = i;
      std::array<uint8_t, 3> c{0, 0, 0};
      for (int shift = 7; shift >= 0 && label > 0; --shift, label >>= 3) {
        for (int ch = 0; ch < 3; ++ch) c[ch] |= static_cast<uint8_t>(((label >> ch) & 1) << shift);
      }
      p[static_cast<size_t>(i)] = c;
    }
    return p;
  }();
  return palette;
}

}  // namespace xdino::eval::video
