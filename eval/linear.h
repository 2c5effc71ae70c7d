// Training a linear classifier on frozen features (the loop of eval_linear.py).
//
// Contract:
//  - LinearClassifier(dim, num_labels): the official head, one nn.Linear registered as
//    "linear" (so its state_dict keys are linear.weight [num_labels, dim] and linear.bias, and
//    module.linear.* in the DDP-style checkpoint), weight ~ N(0, 0.01^2), bias 0. forward()
//    flattens (B, ...) to (B, dim).
//  - cosine_lr(): the learning rate of epoch e under CosineAnnealingLR(T_max = epochs,
//    eta_min = 0) stepped after every epoch: base * (1 + cos(pi e / epochs)) / 2.
//  - FeatureBatches: where batches come from. The official protocol computes features of
//    augmented images with the frozen backbone; the fast mode slices cached features. Each
//    process sees its own shard; in training every process must yield the same number of
//    batches (the sampler pads, as DistributedSampler does), in validation shards may differ.
//  - train_linear() runs epochs [start_epoch, epochs): SGD (momentum 0.9, dampening 0, weight
//    decay 0, no Nesterov) at lr = base_lr * batch_size_per_gpu * world / 256 scaled by the
//    cosine factor, cross-entropy (mean), gradients averaged over processes through the
//    Communicator; validation on epochs where e % val_freq == 0 and on the last epoch. After
//    each epoch it calls on_epoch (rank 0 writes log.txt / checkpoint there).
//  - Accuracies are percentages over all validation samples of all processes; losses are
//    means over batches (training, like the official MetricLogger) and over samples
//    (validation). acc5 is absent (NaN) when there are fewer than 5 labels, as officially.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

#include "distributed/communicator.h"
#include "train/optim.h"

namespace xdino::eval {

struct LinearClassifierImpl : torch::nn::Module {
  LinearClassifierImpl(int64_t dim, int64_t num_labels);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear linear{nullptr};
  int64_t num_labels;
};
TORCH_MODULE(LinearClassifier);

double cosine_lr(double base_lr, int64_t epoch, int64_t epochs);

class FeatureBatches {
 public:
  virtual ~FeatureBatches() = default;
  // Re-seeds the shuffle (training) and rewinds.
  virtual void start_epoch(int64_t epoch) = 0;
  // features (B, dim) float32 on the training device, targets (B) int64; false at the end.
  virtual bool next(torch::Tensor& features, torch::Tensor& targets) = 0;
  virtual int64_t batches_per_epoch() const = 0;
};

struct ValidationStats {
  double loss = 0.0;
  double acc1 = 0.0;
  double acc5 = std::numeric_limits<double>::quiet_NaN();  // NaN: fewer than 5 labels
  int64_t samples = 0;
};

struct EpochStats {
  int64_t epoch = 0;
  double train_lr = 0.0;
  double train_loss = 0.0;
  std::optional<ValidationStats> test;  // set on validation epochs
};

struct LinearSchedule {
  int64_t epochs = 100;
  double lr = 0.001;  // per 256 images
  int64_t val_freq = 1;
};

struct LinearOutcome {
  double best_acc = 0.0;    // best validation top-1 over the run (the reported number)
  int64_t best_epoch = -1;  // -1: not known (no validation yet, or resumed without it)
  double best_acc5 = std::numeric_limits<double>::quiet_NaN();  // top-5 at best_epoch
  std::optional<EpochStats> last;                               // last epoch trained
};

// The optimiser train_linear() builds, for checkpoints: SGD over {linear.weight, linear.bias}.
// SGD, momentum 0.9, no weight decay, one parameter group (weight, bias) as eval_linear.py.
std::unique_ptr<train::Optimizer> make_linear_optimizer(LinearClassifier& classifier,
                                                        double scaled_lr);

// eval_linear.py's lr * batch_size_per_gpu * world_size / 256.
double scaled_lr(const LinearSchedule& schedule, int64_t batch_size_per_gpu, int world_size);

ValidationStats validate_linear(LinearClassifier& classifier, FeatureBatches& val,
                                Communicator& comm);

// Trains from start_epoch (0, or the epoch of a resumed checkpoint) with `optimizer` (from
// make_linear_optimizer, possibly restored) along the cosine from `base_lr` (scaled_lr);
// `resumed` carries a resumed run's best (default: none). on_epoch(stats, outcome so far) runs
// after every epoch on every process.
LinearOutcome train_linear(
    LinearClassifier& classifier, train::Optimizer& optimizer, FeatureBatches& train,
    FeatureBatches& val, const LinearSchedule& schedule, double base_lr, Communicator& comm,
    int64_t start_epoch, LinearOutcome resumed,
    const std::function<void(const EpochStats&, const LinearOutcome&)>& on_epoch);

// Cached features as batches: a DistributedSampler-style shard (shuffled per epoch with
// seed + epoch and padded to equal size when `shuffle`, a plain contiguous shard otherwise).
class CachedBatches : public FeatureBatches {
 public:
  CachedBatches(torch::Tensor features, torch::Tensor labels, int64_t batch_size, bool shuffle,
                uint64_t seed, int rank, int world_size, torch::Device device);
  void start_epoch(int64_t epoch) override;
  bool next(torch::Tensor& features, torch::Tensor& targets) override;
  int64_t batches_per_epoch() const override;

 private:
  torch::Tensor features_, labels_, order_;
  int64_t batch_size_;
  bool shuffle_;
  uint64_t seed_;
  int rank_, world_size_;
  torch::Device device_;
  int64_t cursor_ = 0;
};

}  // namespace xdino::eval
