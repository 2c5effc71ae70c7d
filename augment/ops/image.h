// The image type of the data pipeline.
//
// Contract: an Image is a cv::Mat of type CV_8UC3 holding R, G, B in that channel order (not
// OpenCV's usual BGR), rows contiguous (isContinuous()). Decoders convert grayscale, RGBA and
// palette images to this, like PIL's convert("RGB"); transforms take and return it, so the
// uint8 rounding between steps is PIL's. Only to_tensor() leaves uint8.
#pragma once

#include <opencv2/core.hpp>

namespace xdino::augment {

using Image = cv::Mat;

}  // namespace xdino::augment
