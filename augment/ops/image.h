// The image type of the data pipeline.
//
// Contract: an Image is a cv::Mat of type CV_8UC3 holding R, G, B in that channel order (not
// OpenCV's usual BGR), rows contiguous (isContinuous()). Decoders convert grayscale, RGBA and
// palette images to this, like PIL's convert("RGB"); transforms take and return it, so the
// uint8 rounding between steps is PIL's. Only to_tensor() leaves uint8.
#pragma once

#include <cstdint>
#include <opencv2/core.hpp>

namespace xdino::augment {

using Image = cv::Mat;

// The most channels an image read here can have: OpenCV's TIFF and PNG codecs stop at 4 (its
// imencode refuses 5), and the float pipeline makes no channels an image does not hold
// (augment/ops/float_image.h). --in_chans above it cannot be fed from files.
constexpr int64_t kMaxImageChannels = 4;

}  // namespace xdino::augment
