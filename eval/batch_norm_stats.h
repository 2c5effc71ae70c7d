// BatchNorm running statistics of the data for a backbone that has not learned anything: the
// honest random-weights reference (docs/evaluation.md, "The random-weights reference"). A DINO
// teacher runs its forwards in train mode, so its BatchNorm running statistics adapt to the
// data while its weights stay where the EMA puts them; a k-NN margin over random weights with
// the initial statistics (mean 0, variance 1) counts that adaptation as learning.
//
// Contract:
//  - A BatchNorm is models::BatchNorm (the backbones', SyncBatchNorm with a communicator) or
//    LibTorch's BatchNorm1d/2d/3d, with running statistics. has_batch_norm(module): whether
//    `module` or any module below it is one.
//  - recalibrate_batch_norm(model, next_batch, comm) is torch.optim.swa_utils.update_bn:
//    without a BatchNorm it returns false and neither touches the model nor calls next_batch.
//    Otherwise it resets every BatchNorm's running_mean to 0, running_var to 1 and
//    num_batches_tracked to 0, runs model.forward on every batch next_batch() gives (an
//    undefined tensor ends them; at least one: else xdino::Error) under NoGradGuard, with the
//    k-th batch at momentum 1/k (update_bn's momentum=None, a cumulative average): each
//    running_mean becomes the mean of its batch means, each running_var the mean of its
//    unbiased batch variances. Then it restores every BatchNorm's momentum and every module's
//    train/eval mode, and returns true. Parameters are not touched.
//  - During the pass only the BatchNorms are in train mode (update_bn puts the whole model
//    there): dropout and drop path stay off, so the statistics are those of the network that
//    is evaluated, and the global torch RNG is not consumed.
//  - A BatchNorm must run once in every forward or in none (the average counts its runs):
//    else xdino::Error naming it.
//  - Processes: with `comm` of world > 1 the models::BatchNorms take their batch statistics
//    over every process's batch (models/batch_norm.h), so every process ends with the same
//    statistics; every process must give the same number of batches. They are left without a
//    communicator (meant for evaluation models and copies, which have none). LibTorch's
//    BatchNorms use their process's batch.
//  - The dataset overload: the images as the k-NN reads them (the ImageInput's transform and
//    batches, eval/image_input.h), each process its DistributedSampler shard on `device`, fp32; a
//    last, incomplete batch is left out when there is a full one, so every batch weighs the same in
//    the average. It returns the number of images the statistics come from, over all processes (0:
//    no BatchNorm, no image read), and one log line says so.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "augment/data/dataset.h"
#include "distributed/communicator.h"
#include "eval/image_input.h"
#include "models/backbone.h"

namespace xdino::eval {

bool has_batch_norm(const torch::nn::Module& module);

// The next batch of images (B, 3, H, W) on the model's device; undefined: no more.
using ImageBatches = std::function<torch::Tensor()>;

bool recalibrate_batch_norm(models::Backbone& model, const ImageBatches& next_batch,
                            Communicator& comm);

int64_t recalibrate_batch_norm(models::Backbone& model, const augment::DatasetPtr& images,
                               const ImageInput& input, Communicator& comm, torch::Device device);

}  // namespace xdino::eval
