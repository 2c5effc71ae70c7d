// The k-NN evaluation of `dino knn` (eval_knn.py): features of data_path/train and
// data_path/val through the frozen backbone (or loaded from --load_features), weighted k-NN
// for every k, knn.json.
//
// Contract:
//  - KnnEvalOptions: eval_knn.py's flags with its defaults (the member initialisers), plus
//    ours: output_dir (knn.json, config.ini), image_size (in `input`), knn_backend.
//  - run_knn_eval(): every process extracts its shard (extract.h); rank 0 normalises, dumps
//    (--dump_features DIR: DIR/trainfeat.h5 and DIR/testfeat.h5, features_io.h format),
//    classifies (knn.h) and writes <output_dir>/knn.json atomically; the official result lines
//    "{k}-NN classifier result: Top1: ..., Top5: ..." are printed. Other ranks return an empty
//    result after a barrier.
//  - --load_features DIR reads DIR/trainfeat.h5 + DIR/testfeat.h5, or the official dumps
//    DIR/trainfeat.pth, testfeat.pth, trainlabels.pth, testlabels.pth (torch.save'd tensors);
//    the model fields of knn.json then come from the HDF5 attributes where present. Missing
//    files are a UsageError naming what was looked for.
//  - knn.json (one object, keys in this order): protocol, arch, patch_size, image_size,
//    pretrained_weights, checkpoint_key, weights, temperature, num_train, num_test,
//    num_classes, feature_dim, backend, features ("extracted" | "loaded from DIR"),
//    results [{k, top1, top5}...] in --nb_knn order, reported {k, top1, top5} (k = 20 or the
//    nearest given, knn.h reported_k), seconds {extraction, knn}; with random weights also
//    batch_norm: "initial" (the model's BatchNorms have their initial running statistics) or
//    "none" (it has no BatchNorm), and with --recalibrate_bn data_batch_norm (below).
//    Accuracies in percent.
//  - --recalibrate_bn N (ours; random weights only, else xdino::UsageError): the honest
//    reference for learning (docs/evaluation.md, "The random-weights reference"). After the
//    random-init k-NN, the same model gets the BatchNorm running statistics of a
//    class-balanced subset of N train images (batch_norm_stats.h) and both splits are
//    extracted and classified again: knn.json's data_batch_norm {images (those the statistics
//    come from: a last incomplete batch is left out), results, reported, seconds {extraction,
//    knn}}, and result lines of their own. A model without BatchNorm is measured once: its
//    random-init row is already the one with the data's statistics (batch_norm "none", one
//    log line says so). --dump_features DIR also writes the reference's features,
//    DIR/trainfeat_data_bn.h5 and DIR/testfeat_data_bn.h5.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "distributed/communicator.h"
#include "eval/checks_passed.h"
#include "eval/extract.h"
#include "eval/frozen_backbone.h"
#include "eval/knn.h"

namespace xdino::eval {

struct KnnEvalOptions {
  BackboneSpec model;
  ImageInput input;  // --batch_size_per_gpu, --num_workers, --image_size, --in_chans, --mean/std
  std::vector<int64_t> nb_knn = KnnParams{}.ks;
  double temperature = KnnParams{}.temperature;
  bool use_cuda = true;  // keep the features on the GPU for the search (when there is one)
  std::string dump_features;
  std::string load_features;
  std::string data_path = "/path/to/imagenet/";
  // Ours.
  std::string output_dir = ".";
  std::string knn_backend = "faiss";  // faiss | torch
  EvalSubset subset;
  int64_t recalibrate_bn = 0;  // train images for the BatchNorm-statistics reference; 0: none
};

struct KnnEvalResult {
  KnnResult knn;                                 // rank 0 only
  std::optional<KnnResult> knn_data_batch_norm;  // rank 0, with --recalibrate_bn and BatchNorm
  Json json;                                     // what knn.json holds (rank 0 only)
};

KnnEvalResult run_knn_eval(const KnnEvalOptions& options, Communicator& comm, torch::Device device,
                           const ChecksPassed& checks_passed = {});

}  // namespace xdino::eval
