#include "eval/retrieval/features.h"

#include <cmath>
#include <memory>

#include "augment/data/image_list.h"
#include "augment/eval_transforms.h"
#include "augment/ops/resize.h"
#include "augment/ops/tensor.h"
#include "core/check.h"
#include "eval/extract.h"

namespace xdino::eval::retrieval {
namespace {

FeatureSet extract_list(models::Backbone& model, const std::vector<std::string>& paths,
                        const std::string& what, ExtractOptions e, Communicator& comm,
                        torch::Device device) {
  XDINO_CHECK_ARG(!paths.empty(), "no image in ", what);
  const auto dataset = std::make_shared<const augment::ImageListDataset>(paths, what);
  FeatureSet set = extract_features(model, dataset, e, comm, device);
  if (comm.is_main()) {
    XDINO_CHECK(set.features.size(0) == static_cast<int64_t>(paths.size()),
                static_cast<int64_t>(paths.size()) - set.features.size(0), " of ", paths.size(),
                " images of ", what,
                " could not be read; every image must be readable (the ground truth counts "
                "them by position)");
  }
  return set;
}

// What both extractions share: raw rows (normalised later, after any whitening).
ExtractOptions list_options(const ImageInput& input, int64_t batch_size) {
  XDINO_CHECK_ARG(input.image_size >= 1, "--imsize must be >= 1, got ", input.image_size);
  ExtractOptions e;
  e.input = input;
  e.input.batch_size = batch_size;
  e.normalize = false;
  return e;
}

}  // namespace

torch::Tensor gem(const torch::Tensor& tokens, double p) {
  return tokens.clamp_min(1e-6).pow(p).mean(1).pow(1.0 / p);
}

torch::Tensor multi_scale_feature(const FeatureFunction& rows, const torch::Tensor& images) {
  torch::Tensor v;
  for (const double s : {1.0, 1.0 / std::pow(2.0, 0.5), 0.5}) {
    torch::Tensor input = s == 1.0 ? images
                                   : torch::nn::functional::interpolate(
                                         images, torch::nn::functional::InterpolateFuncOptions()
                                                     .scale_factor(std::vector<double>{s, s})
                                                     .mode(torch::kBilinear)
                                                     .align_corners(false)
                                                     .recompute_scale_factor(false));
    const torch::Tensor f = rows(input);
    v = v.defined() ? v + f : f.clone();
  }
  v = v / 3;
  return v / v.norm();
}

torch::Tensor multi_scale_feature(models::Backbone& model, const torch::Tensor& images) {
  return multi_scale_feature([&model](const torch::Tensor& x) { return model.forward(x); }, images);
}

FeatureSet copy_detection_features(models::Backbone& model, const std::vector<std::string>& paths,
                                   const std::string& what, const ImageInput& input,
                                   Communicator& comm, torch::Device device) {
  ExtractOptions e = list_options(input, input.batch_size);
  const int side = static_cast<int>(input.image_size);
  const auto normalizer = std::make_shared<const augment::Normalizer>();
  e.transform =
      augment::SampleTransform({{3, input.image_size, input.image_size}},
                               [side, normalizer](const augment::Image& image, augment::Rng&,
                                                  const augment::SampleTransform::Views& out) {
                                 const augment::Image resized = augment::resize(
                                     image, cv::Size(side, side), augment::Interpolation::kBicubic);
                                 (*normalizer)(resized, out[0]);
                               });
  e.rows = [](models::Backbone& m, const torch::Tensor& x) {
    models::ProbeRequest request;
    request.patch_tokens = true;
    const models::Probe probe = m.probe(x, request);
    return torch::cat({probe.feature, gem(probe.patch_tokens)}, 1);
  };
  e.description = "copy detection: CLS + GeM(p=4) of the patch tokens";
  return extract_list(model, paths, what, e, comm, device);
}

FeatureSet retrieval_features(models::Backbone& model, const std::vector<std::string>& paths,
                              const std::string& what, const ImageInput& input, bool multiscale,
                              Communicator& comm, torch::Device device) {
  ExtractOptions e = list_options(input, 1);  // thumbnails keep each image's aspect ratio
  const int side = static_cast<int>(input.image_size);
  const auto normalizer = std::make_shared<const augment::Normalizer>();
  e.transform =
      augment::SampleTransform([side, normalizer](const augment::Image& image, augment::Rng&) {
        return std::vector<torch::Tensor>{(*normalizer)(augment::thumbnail(image, side))};
      });
  if (multiscale) {
    e.rows = [](models::Backbone& m, const torch::Tensor& x) { return multi_scale_feature(m, x); };
    e.description = "retrieval: CLS, multi-scale (1, 1/sqrt 2, 1/2)";
  } else {
    e.rows = [](models::Backbone& m, const torch::Tensor& x) { return m.forward(x); };
    e.description = "retrieval: CLS";
  }
  return extract_list(model, paths, what, e, comm, device);
}

}  // namespace xdino::eval::retrieval
