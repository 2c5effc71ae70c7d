// The image type of the data pipeline.
//
// Contract: an Image is a cv::Mat of type CV_8UC3 holding R, G, B in that channel order (not
// OpenCV's usual BGR), rows contiguous (isContinuous()). Decoders convert grayscale, RGBA and
// palette images to this, like PIL's convert("RGB"); transforms take and return it, so the
// uint8 rounding between steps is PIL's. Only to_tensor() leaves uint8.
#pragma once

#include <cstdint>
#include <opencv2/core.hpp>

#include "core/check.h"

namespace xdino::augment {

using Image = cv::Mat;

// A float image of the float pipeline (augment/ops/float_image.h): depth CV_32F, any channel
// count; the 8-bit Image above is CV_8UC3.
inline bool is_float_image(const Image& image) { return image.depth() == CV_32F; }

// Throws xdino::Error naming `what` unless `image` is a continuous float image.
inline void check_float_image(const Image& image, const char* what) {
  XDINO_CHECK(is_float_image(image) && image.isContinuous(), what,
              " expects a continuous float32 image, got cv type ", image.type());
}

// The most channels an image read here can have: OpenCV's TIFF and PNG codecs stop at 4 (its
// imencode refuses 5), and the float pipeline makes no channels an image does not hold
// (augment/ops/float_image.h). --in_chans above it cannot be fed from files.
constexpr int64_t kMaxImageChannels = 4;

}  // namespace xdino::augment
