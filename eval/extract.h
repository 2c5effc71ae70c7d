// Features of a whole dataset split through a frozen backbone (eval_knn.py's
// extract_features, and the cached features of the fast linear probe).
//
// Contract:
//  - Images go through augment::EvalTransform(image_size) (Resize image_size*256/224 bicubic,
//    CenterCrop, ToTensor, Normalize), decoded by the augment DataLoader's worker threads, in
//    dataset order, batches of batch_size, fp32 (no autocast), under no-grad.
//  - A row is model.forward(x) (kind kBackbone) or model.linear_features(x, n_last_blocks,
//    avgpool) (kind kLinear); L2-normalised (max(norm, 1e-12)) when `normalize`.
//  - Distributed: each process extracts its DistributedSampler shard (no shuffle); rows are
//    gathered to rank 0 through the Communicator by dataset index, so the padding duplicates
//    collapse. Rank 0 returns the whole set (CPU, float32) with labels and paths; the others
//    return a FeatureSet whose tensors are undefined.
//  - Unreadable images (reported once by the loader) have no row: they are left out of the
//    result, with a warning counting them. The order of the remaining rows is dataset order.
//  - The result's `indices` are the dataset indices of its rows.
//  - A progress line reports images per second.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>

#include "augment/data/dataset.h"
#include "augment/data/sample_transform.h"
#include "distributed/communicator.h"
#include "eval/checks_passed.h"
#include "eval/features_io.h"
#include "eval/frozen_backbone.h"
#include "eval/image_input.h"
#include "models/backbone.h"

namespace xdino::eval {

enum class FeatureKind { kBackbone, kLinear };

struct ExtractOptions {
  ImageInput input;  // batch, workers, crop, channels, normalisation (eval/image_input.h)
  bool normalize = true;
  FeatureKind kind = FeatureKind::kBackbone;
  int64_t n_last_blocks = 4;         // kLinear only
  bool avgpool_patchtokens = false;  // kLinear only
  // The retrieval-style evaluations (eval/retrieval/) set these: `transform` replaces the
  // EvalTransform (images of any size need batch_size 1), `rows` replaces the kind's feature,
  // and `description` says what a row is in the file attributes.
  augment::SampleTransform transform;
  std::function<torch::Tensor(models::Backbone&, const torch::Tensor&)> rows;
  std::string description;
  // `dino features --patch_tokens` (kBackbone only): every process also takes each image's
  // patch tokens from the same forward pass (models/backbone.h, patch_tokens), and rank 0 hands
  // them, gathered, batch by batch to `patch_token_sink` with their dataset indices
  // (features_io.h, write_features_with_patch_tokens).
  bool patch_tokens = false;
  PatchTokenSink patch_token_sink;  // rank 0's; empty elsewhere
};

FeatureSet extract_features(models::Backbone& model, const augment::DatasetPtr& dataset,
                            const ExtractOptions& options, Communicator& comm,
                            torch::Device device);

// "backbone" or "linear n=4 avgpool=false": what a row of the result is (file attribute).
std::string feature_description(const ExtractOptions& options);

// Which images an evaluation reads (ours, for quick runs; 0 = the whole split): a
// deterministic class-balanced subset of each split (augment::DatasetOptions::max_samples).
struct EvalSubset {
  int64_t max_train_samples = 0;
  int64_t max_val_samples = 0;
  // The bound of "train" or "val" (0: all).
  int64_t of(const std::string& split) const {
    return split == "train" ? max_train_samples : max_val_samples;
  }
};

// `dino features`: L2-normalised backbone features of one split written to one HDF5 file
// (features_io.h) by rank 0, with the model recorded in its attributes.
struct FeaturesOptions {
  BackboneSpec model;
  ImageInput input;
  std::string data_path = "/path/to/imagenet/";
  std::string split = "val";  // train | val
  std::string output = "features.h5";
  bool patch_tokens = false;  // also /patch_tokens [N, T, D] (features_io.h)
  // An existing --output that is not an earlier feature file is refused unless this is set;
  // what another command wrote (a checkpoint, a config, a log, a result) is refused anyway.
  bool force = false;
};

void run_features(const FeaturesOptions& options, Communicator& comm, torch::Device device,
                  const ChecksPassed& checks_passed = {});

}  // namespace xdino::eval
