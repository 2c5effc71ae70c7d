#include "augment/eval_transforms.h"

#include <algorithm>
#include <cmath>

#include "augment/ops/crop.h"
#include "augment/ops/resize.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

void check_output(const torch::Tensor& dst, int64_t channels, int64_t s) {
  XDINO_CHECK(dst.device().is_cpu() && dst.scalar_type() == torch::kFloat32 &&
                  dst.is_contiguous() && dst.dim() == 3 && dst.size(0) == channels &&
                  dst.size(1) == s && dst.size(2) == s,
              "transform output must be a contiguous float32 CPU tensor (", channels, ", ", s, ", ",
              s, "), got ", dst.sizes(), " ", dst.scalar_type());
}

}  // namespace

EvalTransform::EvalTransform(EvalTransformOptions options)
    : options_(std::move(options)), normalizer_(options_.normalization) {
  XDINO_CHECK_ARG(options_.crop_size > 0, "eval crop size must be positive, got ",
                  options_.crop_size);
  resize_size_ = options_.resize_size > 0 ? options_.resize_size : options_.crop_size * 256 / 224;
  XDINO_CHECK_ARG(resize_size_ >= options_.crop_size, "eval resize size ", resize_size_,
                  " is smaller than the crop size ", options_.crop_size);
}

void EvalTransform::crop(const Image& image, Image& out) const {
  normalizer_.check_input(image, "eval transform");
  const cv::Size resized = resize_shorter_side(image.size(), resize_size_);
  const int s = static_cast<int>(options_.crop_size);
  const cv::Rect window = center_crop_box(resized, cv::Size(s, s));
  resize_window(image, cv::Rect(0, 0, image.cols, image.rows), resized, window,
                Interpolation::kBicubic, out);
}

void EvalTransform::operator()(const Image& image, float* dst) const {
  thread_local Image scratch, gray;
  crop(normalizer_.input(image, gray), scratch);
  normalizer_(scratch, dst);
}

void EvalTransform::operator()(const Image& image, const torch::Tensor& dst) const {
  check_output(dst, channels(), options_.crop_size);
  (*this)(image, dst.data_ptr<float>());
}

torch::Tensor EvalTransform::operator()(const Image& image) const {
  torch::Tensor t =
      torch::empty({channels(), options_.crop_size, options_.crop_size}, torch::kFloat32);
  (*this)(image, t.data_ptr<float>());
  return t;
}

LinearTrainTransform::LinearTrainTransform(LinearTrainOptions options)
    : options_(std::move(options)), normalizer_(options_.normalization) {
  const LinearTrainOptions& o = options_;
  XDINO_CHECK_ARG(o.crop_size > 0, "linear train crop size must be positive, got ", o.crop_size);
  XDINO_CHECK_ARG(o.scale.size() == 2 && o.scale[0] > 0 && o.scale[0] <= o.scale[1],
                  "linear train crop scale must be two numbers 0 < min <= max");
  XDINO_CHECK_ARG(o.ratio.size() == 2 && o.ratio[0] > 0 && o.ratio[0] <= o.ratio[1],
                  "linear train crop ratio must be two numbers 0 < min <= max");
  XDINO_CHECK_ARG(o.flip_p >= 0 && o.flip_p <= 1, "flip probability must be in [0, 1], got ",
                  o.flip_p);
}

void LinearTrainTransform::crop(const Image& image, Rng& rng, Image& out) const {
  normalizer_.check_input(image, "linear train transform");
  const LinearTrainOptions& o = options_;
  const cv::Rect box =
      random_resized_crop_box(image.size(), o.scale[0], o.scale[1], o.ratio[0], o.ratio[1], rng);
  const int s = static_cast<int>(o.crop_size);
  resize(image, box, cv::Size(s, s), Interpolation::kBilinear, out);
  if (rng.uniform() < o.flip_p) hflip(out);
}

void LinearTrainTransform::operator()(const Image& image, Rng& rng, float* dst) const {
  thread_local Image scratch, gray;
  crop(normalizer_.input(image, gray), rng, scratch);
  normalizer_(scratch, dst);
}

void LinearTrainTransform::operator()(const Image& image, Rng& rng,
                                      const torch::Tensor& dst) const {
  check_output(dst, channels(), options_.crop_size);
  (*this)(image, rng, dst.data_ptr<float>());
}

torch::Tensor LinearTrainTransform::operator()(const Image& image, Rng& rng) const {
  torch::Tensor t =
      torch::empty({channels(), options_.crop_size, options_.crop_size}, torch::kFloat32);
  (*this)(image, rng, t.data_ptr<float>());
  return t;
}

cv::Size thumbnail_size(int width, int height, int max_size) {
  XDINO_CHECK_ARG(max_size >= 1, "thumbnail size must be >= 1, got ", max_size);
  int x = max_size, y = max_size;
  if (x >= width && y >= height) return {width, height};
  const double aspect = static_cast<double>(width) / height;
  // Pillow's round_aspect: of floor and ceil, the one whose aspect is nearer (floor on a tie),
  // at least 1.
  const auto round_aspect = [](double number, auto distance) {
    const double lo = std::floor(number), hi = std::ceil(number);
    return static_cast<int>(std::max(distance(hi) < distance(lo) ? hi : lo, 1.0));
  };
  if (static_cast<double>(x) / y >= aspect) {
    x = round_aspect(y * aspect, [&](double n) { return std::abs(aspect - n / y); });
  } else {
    y = round_aspect(x / aspect, [&](double n) { return n == 0 ? 0.0 : std::abs(aspect - x / n); });
  }
  return {x, y};
}

Image thumbnail(const Image& image, int max_size) {
  const cv::Size size = thumbnail_size(image.cols, image.rows, max_size);
  if (size == image.size()) return image.clone();
  // Image.resize(size, LANCZOS, reducing_gap=2.0): reduce first by the integer factor that
  // keeps at least twice the target size, then resample the rest.
  constexpr double kReducingGap = 2.0;
  const int fx =
      std::max(1, static_cast<int>(image.cols / static_cast<double>(size.width) / kReducingGap));
  const int fy =
      std::max(1, static_cast<int>(image.rows / static_cast<double>(size.height) / kReducingGap));
  Image out;
  if (fx > 1 || fy > 1) {
    const Image reduced = reduce(image, fx, fy);
    resize_pillow_box(
        reduced,
        {0.0, 0.0, static_cast<double>(image.cols) / fx, static_cast<double>(image.rows) / fy},
        size, Interpolation::kLanczos, out);
  } else {
    resize_pillow_box(image,
                      {0.0, 0.0, static_cast<double>(image.cols), static_cast<double>(image.rows)},
                      size, Interpolation::kLanczos, out);
  }
  return out;
}

}  // namespace xdino::augment
