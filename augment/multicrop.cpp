#include "augment/multicrop.h"

#include "augment/ops/blur.h"
#include "augment/ops/crop.h"
#include "augment/ops/resize.h"
#include "core/check.h"

namespace xdino::augment {
namespace {

void check_range(const std::vector<double>& r, const char* name) {
  XDINO_CHECK_ARG(r.size() == 2 && r[0] > 0 && r[0] <= r[1], name,
                  " must be two numbers 0 < min <= max");
}

void check_probability(double p, const char* name) {
  XDINO_CHECK_ARG(p >= 0 && p <= 1, name, " must be a probability in [0, 1], got ", p);
}

}  // namespace

MultiCropAugmentation::MultiCropAugmentation(MultiCropOptions options)
    : options_(std::move(options)), normalizer_(options_.normalization) {
  const MultiCropOptions& o = options_;
  check_range(o.global_crops_scale, "global_crops_scale");
  check_range(o.local_crops_scale, "local_crops_scale");
  check_range(o.crop_ratio, "crop_ratio");
  XDINO_CHECK_ARG(o.local_crops_number >= 0, "local_crops_number must be >= 0, got ",
                  o.local_crops_number);
  XDINO_CHECK_ARG(o.global_crops_size > 0 && o.local_crops_size > 0,
                  "crop sizes must be positive, got ", o.global_crops_size, " and ",
                  o.local_crops_size);
  for (const auto& [p, name] : {std::pair{o.flip_p, "flip_p"},
                                {o.color_jitter_p, "color_jitter_p"},
                                {o.grayscale_p, "grayscale_p"},
                                {o.global1_blur_p, "global1_blur_p"},
                                {o.global2_blur_p, "global2_blur_p"},
                                {o.local_blur_p, "local_blur_p"},
                                {o.global2_solarize_p, "global2_solarize_p"}}) {
    check_probability(p, name);
  }
  XDINO_CHECK_ARG(0 <= o.blur_sigma_min && o.blur_sigma_min <= o.blur_sigma_max,
                  "blur sigma range must satisfy 0 <= min <= max, got ", o.blur_sigma_min, ", ",
                  o.blur_sigma_max);
  check_color_jitter_options(o.color_jitter);
}

int64_t MultiCropAugmentation::crop_size(int64_t index) const {
  XDINO_CHECK(index >= 0 && index < num_crops(), "crop index ", index, " out of range [0, ",
              num_crops(), ")");
  return index < 2 ? options_.global_crops_size : options_.local_crops_size;
}

CropPlan MultiCropAugmentation::plan(int64_t index, cv::Size image, Rng& rng) const {
  const MultiCropOptions& o = options_;
  const bool global = index < 2;
  const std::vector<double>& scale = global ? o.global_crops_scale : o.local_crops_scale;
  CropPlan p;
  p.size = static_cast<int>(crop_size(index));
  p.box = random_resized_crop_box(image, scale[0], scale[1], o.crop_ratio[0], o.crop_ratio[1], rng);
  p.flip = rng.uniform() < o.flip_p;
  // RandomApply skips when p < u.
  p.jitter = rng.uniform() <= o.color_jitter_p;
  if (p.jitter) p.jitter_params = sample_color_jitter(o.color_jitter, rng);
  p.grayscale = rng.uniform() < o.grayscale_p;
  const double blur_p = index == 0   ? o.global1_blur_p
                        : index == 1 ? o.global2_blur_p
                                     : o.local_blur_p;
  // DINO's GaussianBlur applies when random() <= p.
  p.blur = rng.uniform() <= blur_p;
  if (p.blur) p.sigma = rng.uniform(o.blur_sigma_min, o.blur_sigma_max);
  if (index == 1) p.solarize = rng.uniform() < o.global2_solarize_p;
  return p;
}

void MultiCropAugmentation::render(const Image& image, const CropPlan& plan, Image& out) {
  resize(image, plan.box, cv::Size(plan.size, plan.size), Interpolation::kBicubic, out);
  if (plan.flip) hflip(out);
  if (plan.jitter) apply_color_jitter(out, plan.jitter_params);
  if (plan.grayscale) to_grayscale(out);
  if (plan.blur) gaussian_blur(out, plan.sigma);
  if (plan.solarize) solarize(out, 128);
}

void MultiCropAugmentation::operator()(const Image& image, Rng& rng, float* const* out) const {
  normalizer_.check_input(image, "multi-crop");
  // One scratch image per crop size, so that the buffers are reused, not reallocated.
  thread_local Image global_crop, local_crop, gray;
  const Image& source = normalizer_.input(image, gray);
  for (int64_t c = 0; c < num_crops(); ++c) {
    const CropPlan p = plan(c, source.size(), rng);
    Image& crop = c < 2 ? global_crop : local_crop;
    render(source, p, crop);
    normalizer_(crop, out[c]);
  }
}

void MultiCropAugmentation::operator()(const Image& image, Rng& rng,
                                       const std::vector<torch::Tensor>& out) const {
  XDINO_CHECK(static_cast<int64_t>(out.size()) == num_crops(), "multi-crop fills ", num_crops(),
              " tensors, got ", out.size());
  std::vector<float*> ptrs(out.size());
  const int64_t channels = normalizer_.channels();
  for (size_t c = 0; c < out.size(); ++c) {
    const int64_t s = crop_size(static_cast<int64_t>(c));
    XDINO_CHECK(out[c].device().is_cpu() && out[c].scalar_type() == torch::kFloat32 &&
                    out[c].is_contiguous() && out[c].dim() == 3 && out[c].size(0) == channels &&
                    out[c].size(1) == s && out[c].size(2) == s,
                "multi-crop output ", c, " must be a contiguous float32 CPU tensor (", channels,
                ", ", s, ", ", s, "), got ", out[c].sizes(), " ", out[c].scalar_type());
    ptrs[c] = out[c].data_ptr<float>();
  }
  (*this)(image, rng, ptrs.data());
}

std::vector<torch::Tensor> MultiCropAugmentation::operator()(const Image& image, Rng& rng) const {
  std::vector<torch::Tensor> out;
  for (int64_t c = 0; c < num_crops(); ++c) {
    const int64_t s = crop_size(c);
    out.push_back(torch::empty({normalizer_.channels(), s, s}, torch::kFloat32));
  }
  (*this)(image, rng, out);
  return out;
}

}  // namespace xdino::augment
