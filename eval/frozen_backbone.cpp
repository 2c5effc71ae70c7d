#include "eval/frozen_backbone.h"

#include <filesystem>

#include "augment/ops/tensor.h"
#include "core/check.h"
#include "core/log.h"
#include "core/paths.h"
#include "models/weights.h"

namespace xdino::eval {

std::string weights_kind(const BackboneSpec& spec) {
  if (spec.arch == "pixels") return "none";
  return spec.pretrained_weights.empty() ? "random" : "pretrained";
}

models::BackboneOptions eval_backbone_options(const std::string& arch, int64_t patch_size,
                                              int64_t image_size) {
  models::BackboneOptions o;
  o.num_classes = 0;
  o.drop_path_rate = 0.0;
  o.patch_size = patch_size;
  o.img_size = arch == "pixels" ? image_size : 224;
  return o;
}

namespace {

std::shared_ptr<models::Backbone> frozen(std::shared_ptr<models::Backbone> model,
                                         torch::Device device, const char* rgb_only) {
  if (model->in_chans() != 3) {
    XDINO_CHECK_ARG(rgb_only == nullptr, rgb_only, " reads RGB images; this ", model->arch(),
                    " takes ", model->in_chans(),
                    "-channel images (its --pretrained_weights or --in_chans): evaluate it with "
                    "dino knn, linear or features");
    log::info(model->arch(), " reads ", model->in_chans(), "-channel images");
  }
  model->to(device);
  model->eval();
  for (auto& p : model->parameters()) p.set_requires_grad(false);
  return model;
}

}  // namespace

FrozenBackbone load_frozen_backbone(const BackboneSpec& spec, const ImageInput& input,
                                    torch::Device device, const char* rgb_only) {
  XDINO_CHECK_ARG(input.image_size >= 1, "--image_size must be positive, got ", input.image_size);
  // LibTorch seeds its generator randomly per process: without this, random weights would
  // differ between the processes of one distributed run.
  torch::manual_seed(static_cast<uint64_t>(spec.seed));
  models::BackboneOptions options =
      eval_backbone_options(spec.arch, spec.patch_size, input.image_size);
  const std::string kind = weights_kind(spec);
  options.in_chans = input.in_chans;
  if (kind != "pretrained") {
    if (options.in_chans == models::kInChansFromWeights) options.in_chans = 3;
    std::shared_ptr<models::Backbone> model = models::create_backbone(spec.arch, options);
    if (kind == "random") {
      log::warn("no --pretrained_weights given: evaluating RANDOMLY INITIALISED weights of ",
                spec.arch,
                " (the official scripts would download the reference DINO weights; this "
                "build never downloads: pass the .pth file with --pretrained_weights)");
    }
    ImageInput for_model =
        input.for_model(model->in_chans(), {}, {}, "random " + spec.arch + " weights");
    return {frozen(model, device, rgb_only), std::move(for_model)};
  }
  const std::string problem = file_problem(spec.pretrained_weights);
  XDINO_CHECK_ARG(problem.empty(), "weights file ", quote(spec.pretrained_weights), " ", problem,
                  " (--pretrained_weights)");
  const models::PretrainedWeights weights =
      models::read_pretrained(spec.pretrained_weights, spec.checkpoint_key);
  std::shared_ptr<models::Backbone> model =
      models::create_backbone_for(spec.arch, options, weights);
  // load_pretrained logs what it loaded, ignored and missed.
  const models::LoadReport report = models::load_pretrained(*model, weights, /*strict=*/false);
  XDINO_CHECK(report.loaded > 0, "no tensor of ", spec.pretrained_weights, " matches ", spec.arch,
              ": wrong --arch or --checkpoint_key?");
  ImageInput for_model = input.for_model(model->in_chans(), weights.mean, weights.std,
                                         "the weights " + weights.source);
  return {frozen(model, device, rgb_only), std::move(for_model)};
}

void add_model_fields(Json& json, const BackboneSpec& spec, int64_t image_size) {
  json["arch"] = spec.arch;
  json["patch_size"] =
      models::patch_size_of(spec.arch, spec.patch_size);  // the model's, not the flag's
  json["image_size"] = image_size;
  json["pretrained_weights"] = spec.pretrained_weights;
  json["checkpoint_key"] = spec.checkpoint_key;
  json["weights"] = weights_kind(spec);
}

void set_model_attributes(FeatureAttributes& attributes, const BackboneSpec& spec,
                          const std::string& split) {
  attributes.arch = spec.arch;
  attributes.checkpoint = spec.pretrained_weights;
  attributes.checkpoint_key = spec.checkpoint_key;
  attributes.patch_size = models::patch_size_of(spec.arch, spec.patch_size);
  attributes.split = split;
}

}  // namespace xdino::eval
