#include "eval/online_knn.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>

#include "core/check.h"
#include "core/log.h"
#include "eval/batch_norm_stats.h"
#include "eval/extract.h"
#include "eval/knn.h"
#include "models/pixels.h"
#include "models/weights.h"

namespace xdino::eval {

std::unique_ptr<OnlineKnn> OnlineKnn::open(const OnlineKnnOptions& o) {
  XDINO_CHECK_ARG(o.train_samples >= o.k, "--knn_train_samples must be at least k = ", o.k,
                  ", got ", o.train_samples);
  XDINO_CHECK_ARG(o.val_samples >= 1, "--knn_val_samples must be positive, got ", o.val_samples);
  auto train = o.input.open(o.data_path, "train", o.train_samples);
  if (train->num_classes() == 0) {
    log::info("online k-NN skipped: ", train->describe(),
              " has no labels (it needs a labelled train and val split)");
    return nullptr;
  }
  auto val = o.input.open(o.data_path, "val", o.val_samples);
  XDINO_CHECK_ARG(val->num_classes() == train->num_classes(), "online k-NN: the val split of ",
                  o.data_path, " has ", val->num_classes(), " classes and its train split ",
                  train->num_classes());
  return std::unique_ptr<OnlineKnn>(new OnlineKnn(o, std::move(train), std::move(val)));
}

OnlineKnn::OnlineKnn(OnlineKnnOptions options, augment::DatasetPtr train, augment::DatasetPtr val)
    : options_(std::move(options)), train_(std::move(train)), val_(std::move(val)) {}

OnlineKnnResult OnlineKnn::measure(models::Backbone& backbone, Communicator& comm,
                                   torch::Device device) {
  const auto start = std::chrono::steady_clock::now();
  const bool was_training = backbone.is_training();
  backbone.eval();
  ExtractOptions e;
  e.input = options_.input;
  FeatureSet train, val;
  try {
    train = extract_features(backbone, train_, e, comm, device);
    val = extract_features(backbone, val_, e, comm, device);
  } catch (...) {
    backbone.train(was_training);
    throw;
  }
  backbone.train(was_training);

  OnlineKnnResult r;
  r.num_train = train_->size();
  r.num_val = val_->size();
  r.top1 = r.top5 = std::numeric_limits<double>::quiet_NaN();
  if (comm.is_main()) {
    KnnParams p;
    p.ks = {std::min(options_.k, train.features.size(0))};
    p.temperature = options_.temperature;
    const KnnResult knn = knn_classify(train.features, train.labels, val.features, val.labels, p);
    r.top1 = knn.per_k[0].top1;
    r.top5 = knn.per_k[0].top5;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::optional<OnlineKnnResult> OnlineKnn::measure_with_data_batch_norm(
    const models::Backbone& model, const models::BackboneOptions& copy_options, Communicator& comm,
    torch::Device device) {
  if (!has_batch_norm(model)) return std::nullopt;
  std::shared_ptr<models::Backbone> copy;
  {
    // The copy's initial weights are drawn and then overwritten: put the generator back, so
    // a run follows the same trajectory with and without the monitor.
    at::Generator generator = at::globalContext().defaultGenerator(torch::kCPU);
    torch::Tensor state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      state = generator.get_state();
    }
    copy = models::create_backbone(model.arch(), copy_options);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
  if (model.has_mask_token()) copy->add_mask_token();  // iBOT's (ssl/recipe.h): all of it
  copy->to(device);
  models::load_state_dict(*copy, models::state_dict(model), /*strict=*/true, "the teacher");
  recalibrate_batch_norm(*copy, train_, options_.input, comm, device);
  return measure(*copy, comm, device);
}

OnlineKnnResult OnlineKnn::pixels(Communicator& comm) {
  models::Pixels pixels(options_.input.image_size, options_.input.in_chans);
  return measure(pixels, comm, torch::kCPU);
}

}  // namespace xdino::eval
