// The online k-NN monitor of `dino train --knn_every N` (docs/dino.md, "Watching it learn"):
// the DINO teacher's backbone measured during training with the evaluation protocol of
// `dino knn` (weighted vote, T = 0.07, k = 20) on fixed class-balanced labelled subsets, so a
// run shows whether it learns while it trains.
//
// Contract:
//  - OnlineKnn::open(options) opens the train and val splits of options.data_path
//    (augment::open_dataset) limited to deterministic class-balanced subsets of
//    train_samples / val_samples images (augment::DatasetOptions::max_samples). It returns
//    nullptr, after one log line naming the reason, for unlabelled data (no k-NN without
//    labels). A missing val split throws xdino::UsageError naming what was looked for.
//  - measure(backbone, comm, device): every process calls it (features are extracted in
//    shards and gathered, eval/extract.h). The backbone runs in eval mode under no-grad, fp32,
//    on augment::EvalTransform(image_size) views; its train/eval mode is restored afterwards,
//    its weights and buffers are not touched. Rank 0 gets the accuracies (percent), the other
//    ranks NaN. The global torch RNG is not consumed (no dropout or drop path in eval mode),
//    so training with and without the monitor follows the same trajectory.
//  - pixels(comm): the same protocol on the raw pixels (models::Pixels at image_size), the
//    reference line of curves.png.
//  - measure_with_data_batch_norm(model, copy_options, comm, device): the reference a DINO
//    teacher must beat to show learning (docs/evaluation.md, "The random-weights reference"):
//    a copy of `model` (models::create_backbone(model.arch(), copy_options), every parameter
//    and buffer copied by name, on `device`) gets the BatchNorm running statistics of the
//    train subset (eval/batch_norm_stats.h, batch_size images a batch) and is measured as
//    measure() does. `model` itself is only read: its weights, buffers and mode stay as they
//    were, and the global torch RNG is not consumed (building the copy draws from it; its state
//    is put back). nullopt, with no work done, when the model has no BatchNorm: its initial
//    measurement is then the reference already. Every process calls it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "augment/data/dataset.h"
#include "distributed/communicator.h"
#include "eval/image_input.h"
#include "eval/knn.h"
#include "models/backbone.h"
#include "models/registry.h"

namespace xdino::eval {

struct OnlineKnnOptions {
  std::string data_path;
  int64_t train_samples = 5000;
  int64_t val_samples = 1000;
  // The images (eval/image_input.h): in_chans is pixels()'s; measure() reads as many channels
  // as the model takes.
  ImageInput input{256, 2, 224, 3};
  int64_t k = kReportedK;
  double temperature = KnnParams{}.temperature;
};

struct OnlineKnnResult {
  double top1 = 0, top5 = 0;  // percent (rank 0; NaN elsewhere)
  int64_t num_train = 0, num_val = 0;
  double seconds = 0;  // extraction + search
};

class OnlineKnn {
 public:
  static std::unique_ptr<OnlineKnn> open(const OnlineKnnOptions& options);

  OnlineKnnResult measure(models::Backbone& backbone, Communicator& comm, torch::Device device);
  OnlineKnnResult pixels(Communicator& comm);
  std::optional<OnlineKnnResult> measure_with_data_batch_norm(
      const models::Backbone& model, const models::BackboneOptions& copy_options,
      Communicator& comm, torch::Device device);

  const OnlineKnnOptions& options() const { return options_; }

 private:
  OnlineKnn(OnlineKnnOptions options, augment::DatasetPtr train, augment::DatasetPtr val);

  OnlineKnnOptions options_;
  augment::DatasetPtr train_, val_;
};

}  // namespace xdino::eval
