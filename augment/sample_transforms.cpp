#include "augment/sample_transforms.h"

#include <memory>

namespace xdino::augment {

SampleTransform multi_crop_transform(const MultiCropOptions& options) {
  auto crops = std::make_shared<const MultiCropAugmentation>(options);
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t i = 0; i < crops->num_crops(); ++i)
    shapes.push_back({crops->channels(), crops->crop_size(i), crops->crop_size(i)});
  return SampleTransform(std::move(shapes),
                         [crops](const Image& image, Rng& rng, const SampleTransform::Views& out) {
                           (*crops)(image, rng, out);
                         });
}

SampleTransform eval_transform(const EvalTransformOptions& options) {
  auto t = std::make_shared<const EvalTransform>(options);
  return SampleTransform(
      {{t->channels(), t->crop_size(), t->crop_size()}},
      [t](const Image& image, Rng&, const SampleTransform::Views& out) { (*t)(image, out[0]); });
}

SampleTransform linear_train_transform(const LinearTrainOptions& options) {
  auto t = std::make_shared<const LinearTrainTransform>(options);
  return SampleTransform({{t->channels(), t->crop_size(), t->crop_size()}},
                         [t](const Image& image, Rng& rng, const SampleTransform::Views& out) {
                           (*t)(image, rng, out[0]);
                         });
}

}  // namespace xdino::augment
