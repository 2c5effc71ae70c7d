#include "augment/ops/tensor.h"

#include <cmath>

#include "augment/ops/color.h"
#include "augment/ops/float_image.h"
#include "core/check.h"

namespace xdino::augment {

namespace {

void check_channels(int64_t channels) {
  XDINO_CHECK_ARG(channels >= 1, "--in_chans must be >= 1, got ", channels);
  XDINO_CHECK_ARG(channels <= kMaxImageChannels, "--in_chans ", channels,
                  ": the images read here hold at most ", kMaxImageChannels,
                  " channels (OpenCV's TIFF and PNG codecs); split or choose bands to ",
                  kMaxImageChannels, " or fewer");
}

}  // namespace

Normalization default_normalization(int64_t channels) {
  check_channels(channels);
  XDINO_CHECK_ARG(channels == 1 || channels == 3, "--in_chans ", channels,
                  ": give --mean and --std, one value or ", channels,
                  " each (the per-channel mean and std of your images on the [0, 1] scale, "
                  "16-bit values / 65535); only RGB and grayscale have a default");
  Normalization n;
  if (channels == 1) {
    n.mean = {(kImageNetMean[0] + kImageNetMean[1] + kImageNetMean[2]) / 3};  // 0.449
    n.std = {(kImageNetStd[0] + kImageNetStd[1] + kImageNetStd[2]) / 3};      // 0.226
    n.channels = 1;
  }
  return n;
}

Normalization normalization_for(int64_t channels, const std::vector<double>& mean,
                                const std::vector<double>& std) {
  if (mean.empty() && std.empty()) return default_normalization(channels);
  check_channels(channels);
  XDINO_CHECK_ARG(!mean.empty() && !std.empty(), "--mean and --std go together: give both");
  for (double m : mean) XDINO_CHECK_ARG(std::isfinite(m), "--mean ", m, " is not a finite number");
  for (double s : std)
    XDINO_CHECK_ARG(std::isfinite(s) && s > 0, "--std ", s,
                    " is not a positive finite number (a standard deviation)");
  const auto values = [&](const std::vector<double>& v, const char* flag) {
    XDINO_CHECK_ARG(v.size() == 1 || static_cast<int64_t>(v.size()) == channels, flag, " has ",
                    v.size(), " values; give one or ", channels, " (--in_chans)");
    return v.size() == 1 ? std::vector<double>(channels, v[0]) : v;
  };
  Normalization n;
  n.channels = channels;
  n.mean = values(mean, "--mean");
  n.std = values(std, "--std");
  return n;
}

Normalizer::Normalizer(const Normalization& n) : channels_(n.channels) {
  XDINO_CHECK_ARG(n.channels >= 1, "normalisation needs at least one channel, got ", n.channels);
  XDINO_CHECK_ARG(static_cast<int64_t>(n.mean.size()) == n.channels &&
                      static_cast<int64_t>(n.std.size()) == n.channels,
                  "normalisation of ", n.channels, " channels needs as many means and stds, got ",
                  n.mean.size(), " and ", n.std.size());
  for (int64_t c = 0; c < n.channels; ++c) {
    XDINO_CHECK_ARG(n.std[c] != 0, "normalisation std must be non-zero, channel ", c);
    mean_.push_back(static_cast<float>(n.mean[c]));
    std_.push_back(static_cast<float>(n.std[c]));
    if (c >= 3) continue;
    for (int v = 0; v < 256; ++v)
      lut_[c][v] = (static_cast<float>(v) / 255.0f - mean_[c]) / std_[c];
  }
}

void Normalizer::check_input(const Image& image, const char* what) const {
  XDINO_CHECK(!image.empty(), what, " got an empty image");
  if (is_float_image(image)) {
    XDINO_CHECK(image.isContinuous(), what, " expects a continuous float image");
    return;  // input() converts its channels
  }
  XDINO_CHECK(image.type() == CV_8UC3, what, " expects an RGB uint8 or a float image, got ",
              image.cols, "x", image.rows, " of cv type ", image.type());
  XDINO_CHECK(channels_ == 1 || channels_ == 3, what, ": 8-bit RGB images cannot feed ", channels_,
              " channels; --in_chans ", channels_,
              " reads images with that many channels (TIFF/PNG, decode.h)");
}

const Image& Normalizer::input(const Image& image, Image& scratch) const {
  if (is_float_image(image)) {
    if (image.channels() == channels_) return image;
    image.copyTo(scratch);
    convert_channels(scratch, channels_, "an image");
    return scratch;
  }
  if (channels_ == 3) return image;
  XDINO_CHECK(image.type() == CV_8UC3,
              "the grayscale pipeline reads RGB uint8 images, got cv type ", image.type());
  image.copyTo(scratch);
  to_grayscale(scratch);
  return scratch;
}

void Normalizer::operator()(const Image& image, float* dst) const {
  if (is_float_image(image)) {
    XDINO_CHECK(image.channels() == channels_ && image.isContinuous(), "to_tensor expects ",
                channels_, " channels (--in_chans), got a float image of ", image.channels());
    const size_t plane = image.total();
    const float* v = image.ptr<float>();
    for (int64_t c = 0; c < channels_; ++c) {
      float* out = dst + c * plane;
      for (size_t p = 0; p < plane; ++p) out[p] = (v[p * channels_ + c] - mean_[c]) / std_[c];
    }
    return;
  }
  XDINO_CHECK(image.type() == CV_8UC3 && (channels_ == 1 || channels_ == 3),
              "to_tensor expects a float image of ", channels_,
              " channels (--in_chans), got cv type ", image.type());
  if (channels_ == 1) {  // input() made the three channels equal: R is the L value
    for (int y = 0; y < image.rows; ++y) {
      const uint8_t* p = image.ptr<uint8_t>(y);
      for (int x = 0; x < image.cols; ++x, p += 3) *dst++ = lut_[0][p[0]];
    }
    return;
  }
  const size_t plane = image.total();
  float* r = dst;
  float* g = dst + plane;
  float* b = dst + 2 * plane;
  for (int y = 0; y < image.rows; ++y) {
    const uint8_t* p = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols; ++x, p += 3) {
      *r++ = lut_[0][p[0]];
      *g++ = lut_[1][p[1]];
      *b++ = lut_[2][p[2]];
    }
  }
}

void Normalizer::operator()(const Image& image, const torch::Tensor& dst) const {
  XDINO_CHECK(dst.device().is_cpu() && dst.scalar_type() == torch::kFloat32 &&
                  dst.is_contiguous() && dst.dim() == 3 && dst.size(0) == channels_ &&
                  dst.size(1) == image.rows && dst.size(2) == image.cols,
              "to_tensor needs a contiguous float32 CPU tensor of shape (", channels_, ", ",
              image.rows, ", ", image.cols, "), got ", dst.sizes(), " ", dst.scalar_type());
  (*this)(image, dst.data_ptr<float>());
}

torch::Tensor Normalizer::operator()(const Image& image) const {
  torch::Tensor t = torch::empty({channels_, image.rows, image.cols}, torch::kFloat32);
  (*this)(image, t.data_ptr<float>());
  return t;
}

}  // namespace xdino::augment
