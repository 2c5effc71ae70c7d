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
//  - Thread-safe: no shared state.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "augment/ops/image.h"

namespace xdino::augment {

Image decode_image(std::string_view bytes, const std::string& name, bool exif_orientation = true);

Image read_image(const std::filesystem::path& path, bool exif_orientation = true);

// True when `bytes` is not a JPEG, or is a JPEG whose entropy-coded data is followed by an
// end-of-image marker. Exposed for tests.
bool jpeg_is_complete(std::string_view bytes);

}  // namespace xdino::augment
