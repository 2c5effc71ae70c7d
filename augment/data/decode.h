// Encoded image bytes or files → Image (CV_8UC3 RGB, see augment/ops/image.h), through OpenCV.
//
// Contract:
//  - Formats: those torchvision's ImageFolder accepts (JPEG, PNG, BMP, WebP, TIFF, PPM, PGM,
//    PBM), recognised by their first bytes and decoded by OpenCV; anything else is an error
//    before OpenCV sees it (its other decoders, DICOM among them, can abort on bad input).
//  - Conversion as PIL's Image.convert("RGB") in torchvision's default loader: greyscale is
//    replicated, alpha is dropped (not composited), palettes are expanded (transparency
//    ignored). Bit-exact with Pillow for these (same libjpeg-turbo / libpng math).
//  - 16-bit samples keep their high byte (v >> 8). PIL differs for 16-bit greyscale only:
//    its "I" → "RGB" conversion saturates every value above 255, so such images come out
//    almost white; we scale instead.
//  - EXIF orientation (JPEG, and whatever OpenCV reads it for) is applied when
//    `exif_orientation` is true. torchvision's loader does not apply it; pass false to get
//    its pixels exactly.
//  - A truncated JPEG (no end-of-image marker after the first scan) is an error, as in PIL
//    (libjpeg would silently pad it with grey).
//  - An image whose header declares more than 2 x 89478485 pixels (Pillow's
//    DecompressionBombError bound) is an error before anything is allocated (JPEG and PNG
//    headers are read here; other formats keep OpenCV's own limit of 2^30 pixels).
//  - Every failure (unreadable file, unknown format, corrupt or truncated data) throws
//    xdino::Error whose message names `name` (the path or identifier given by the caller).
//  - DecodeOptions::pixels kFloat is the float pipeline's decode (augment/ops/float_image.h):
//    the image as stored (OpenCV's IMREAD_UNCHANGED), turned by a JPEG's EXIF orientation as
//    the 8-bit path turns it (unless exif_orientation is false), 8-bit
//    samples / 255, 16-bit / 65535, 32-bit float kept (an image with a NaN, infinite or
//    beyond-1e12 sample is an error naming it: such values overflow the network's float32
//    sums), as float32; channels R, G, B (, A) in
//    that order for 3 or 4, as stored otherwise. With `channels` > 0 they are converted to
//    that count (augment/ops/float_image.h, convert_channels; a count it cannot convert
//    throws xdino::Error naming the file); with 0, kept as stored.
//  - kAuto is resolved once per dataset by resolve_pixels() from its first image that decodes:
//    kFloat
//    when `channels` is not 0 (not known yet: the model's), 1 or 3, or when that image is not
//    8-bit; k8Bit otherwise.
//  - Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "augment/ops/image.h"

namespace xdino::augment {

struct DecodeOptions {
  enum class Pixels { k8Bit, kFloat, kAuto };
  bool exif_orientation = true;
  Pixels pixels = Pixels::k8Bit;
  int64_t channels = 3;  // of kFloat (and kAuto) images
};

Image decode_image(std::string_view bytes, const std::string& name, bool exif_orientation = true);
Image decode_image(std::string_view bytes, const std::string& name, const DecodeOptions& options);

Image read_image(const std::filesystem::path& path, bool exif_orientation = true);
Image read_image(const std::filesystem::path& path, const DecodeOptions& options);

// What a data set of `channels`-channel images decodes with: kAuto (8-bit RGB unless the data
// needs the float pipeline).
inline DecodeOptions float_pixels_if_needed(int64_t channels) {
  return {true, DecodeOptions::Pixels::kAuto, channels};
}

// kAuto -> k8Bit or kFloat, from the encoded bytes of a dataset's first image (named `name`);
// logs the choice when it is kFloat. Other values are returned unchanged. Throws
// xdino::Error if the image does not decode.
DecodeOptions resolve_pixels(const DecodeOptions& options, std::string_view first_image,
                             const std::string& name);

// The same for a dataset of `count` images: the first of at most 16 that reads and decodes
// (image i's bytes from `encoded(i)`, its name from `name(i)`) decides. A corrupt one is passed
// over, for the loader to report and skip as usual (loader.h); none readable: k8Bit (kFloat
// when the channel count needs it).
DecodeOptions resolve_pixels(const DecodeOptions& options, int64_t count,
                             const std::function<std::string(int64_t)>& encoded,
                             const std::function<std::string(int64_t)>& name);

// True when `bytes` is not a JPEG, or is a JPEG whose entropy-coded data is followed by an
// end-of-image marker. Exposed for tests.
bool jpeg_is_complete(std::string_view bytes);

}  // namespace xdino::augment
