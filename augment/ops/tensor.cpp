#include "augment/ops/tensor.h"

#include "augment/ops/color.h"
#include "core/check.h"

namespace xdino::augment {

Normalization default_normalization(int64_t channels) {
  XDINO_CHECK_ARG(channels == 1 || channels == 3, "--in_chans ", channels,
                  ": the data pipeline reads 8-bit RGB or grayscale images (1 or 3 channels); "
                  "models of other channel counts take tensors from your own code");
  Normalization n;
  if (channels == 1) {
    n.mean = {0.449, 0.449, 0.449};  // (0.485 + 0.456 + 0.406) / 3
    n.std = {0.226, 0.226, 0.226};   // (0.229 + 0.224 + 0.225) / 3
    n.channels = 1;
  }
  return n;
}

Normalizer::Normalizer(const Normalization& n) : channels_(n.channels) {
  XDINO_CHECK_ARG(n.channels == 1 || n.channels == 3,
                  "normalisation has 1 (grayscale) or 3 (RGB) channels, not ", n.channels);
  for (int c = 0; c < 3; ++c) {
    XDINO_CHECK_ARG(n.std[c] != 0, "normalisation std must be non-zero, channel ", c);
    const float mean = static_cast<float>(n.mean[c]), std = static_cast<float>(n.std[c]);
    for (int v = 0; v < 256; ++v) lut_[c][v] = (static_cast<float>(v) / 255.0f - mean) / std;
  }
}

const Image& Normalizer::input(const Image& image, Image& scratch) const {
  if (channels_ == 3) return image;
  XDINO_CHECK(image.type() == CV_8UC3,
              "the grayscale pipeline reads RGB uint8 images, got cv type ", image.type());
  image.copyTo(scratch);
  to_grayscale(scratch);
  return scratch;
}

void Normalizer::operator()(const Image& image, float* dst) const {
  XDINO_CHECK(image.type() == CV_8UC3, "to_tensor expects an RGB uint8 image, got cv type ",
              image.type());
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
