// The linear evaluation of `dino linear` (eval_linear.py), and its fast cached-features mode.
//
// Contract:
//  - LinearEvalOptions: eval_linear.py's flags with its defaults (member initialisers), plus
//    ours: image_size (in `model`), cached_features, load_features, dump_features,
//    linear_weights, seed.
//  - Official protocol (cached_features false): frozen backbone in eval mode; training images
//    of data_path/train through augment::LinearTrainTransform (RandomResizedCrop(image_size,
//    scale (0.08, 1), bilinear) + flip), shuffled by a DistributedSampler (seed + epoch), no
//    drop_last; validation images of data_path/val through the eval transform; the classifier
//    input is Backbone::linear_features(x, n_last_blocks, avgpool_patchtokens) (XCiT: the
//    backbone output). Training per linear.h (SGD momentum 0.9, lr * batch * world / 256,
//    cosine per epoch, cross-entropy), validated every val_freq epochs and at the last.
//  - Cached-features mode: features of the train and val images are computed once with the
//    eval transform (no augmentation), unnormalised (or read from --load_features DIR:
//    trainfeat.h5, testfeat.h5), then the same training runs on them. It is fast and NOT the
//    official protocol: linear.json, log lines and the report say so.
//  - Outputs (rank 0, in output_dir): log.txt, one JSON line per epoch with the official keys
//    train_lr, train_loss, epoch, then test_loss, test_acc1, test_acc5 on validation epochs
//    (test_acc5 absent under 5 labels); checkpoint.pth after every epoch, atomically, in the
//    official layout {epoch (next), state_dict {module.linear.weight, module.linear.bias},
//    optimizer (torch.optim.SGD state_dict), scheduler (CosineAnnealingLR state_dict),
//    best_acc} plus our best_epoch, best_acc5, protocol; linear.json at the end.
//    An existing output_dir/checkpoint.pth is resumed from, as eval_linear.py does.
//  - linear.json keys, in order: protocol, arch, patch_size, image_size, pretrained_weights,
//    checkpoint_key, weights, feature, feature_dim, num_labels, num_train, num_val, epochs, lr,
//    batch_size_per_gpu, world_size, scaled_lr, best {epoch, acc1, acc5}, last {epoch,
//    train_loss, test_loss, acc1, acc5}, seconds. acc5 is null under 5 labels.
//  - --evaluate: loads the classifier from --linear_weights (default
//    output_dir/checkpoint.pth; official linear-weight files load too), validates, prints the
//    accuracy, writes nothing. The official script would download reference linear weights.
//  - --num_labels smaller than the data's classes is a UsageError.
#pragma once

#include <torch/torch.h>

#include <string>

#include "core/json.h"
#include "distributed/communicator.h"
#include "eval/checks_passed.h"
#include "eval/extract.h"
#include "eval/frozen_backbone.h"
#include "eval/linear.h"

namespace xdino::eval {

// The probe's schedule (epochs, lr, val_freq) and its defaults are LinearSchedule's (linear.h);
// its batch is the images' (input.batch_size, --batch_size_per_gpu).
struct LinearEvalOptions : LinearSchedule {
  int64_t n_last_blocks = 4;
  bool avgpool_patchtokens = false;
  BackboneSpec model;
  ImageInput input;  // --batch_size_per_gpu, --num_workers, --image_size, --in_chans, --mean/std
  std::string data_path = "/path/to/imagenet/";
  std::string output_dir = ".";
  int64_t num_labels = 1000;
  bool evaluate = false;
  // Ours.
  bool cached_features = false;
  std::string load_features;
  std::string dump_features;
  std::string linear_weights;
  int64_t seed = 0;
  EvalSubset subset;
};

extern const char* const kOfficialLinearProtocol;
extern const char* const kCachedLinearProtocol;

struct LinearEvalResult {
  LinearOutcome outcome;
  Json json;  // linear.json (rank 0, training runs)
};

LinearEvalResult run_linear_eval(const LinearEvalOptions& options, Communicator& comm,
                                 torch::Device device, const ChecksPassed& checks_passed = {});

}  // namespace xdino::eval
