#include "eval/linear.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "core/check.h"
#include "core/log.h"
#include "core/progress.h"

namespace xdino::eval {

LinearClassifierImpl::LinearClassifierImpl(int64_t dim, int64_t labels) : num_labels(labels) {
  XDINO_CHECK_ARG(dim > 0 && labels > 0, "linear classifier needs dim > 0 and num_labels > 0, got ",
                  dim, " and ", labels);
  linear = register_module("linear", torch::nn::Linear(dim, labels));
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, 0.01);
  linear->bias.zero_();
}

torch::Tensor LinearClassifierImpl::forward(torch::Tensor x) {
  return linear->forward(x.reshape({x.size(0), -1}));
}

double cosine_lr(double base_lr, int64_t epoch, int64_t epochs) {
  return base_lr * 0.5 *
         (1.0 + std::cos(M_PI * static_cast<double>(epoch) / static_cast<double>(epochs)));
}

double scaled_lr(const LinearSchedule& schedule, int64_t batch_size_per_gpu, int world_size) {
  return schedule.lr * static_cast<double>(batch_size_per_gpu * world_size) / 256.0;
}

std::unique_ptr<train::Optimizer> make_linear_optimizer(LinearClassifier& classifier, double lr) {
  train::ParamGroup group;
  for (const auto& p : classifier->named_parameters()) {
    group.names.push_back(p.key());
    group.params.push_back(p.value());
  }
  group.lr = lr;
  group.weight_decay = 0.0;
  return train::make_sgd({std::move(group)});
}

namespace {

void set_lr(train::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.lr = lr;
}

// Sums `values` over processes (in place) through one float64 all-reduce.
void reduce_sums(std::vector<double>& values, Communicator& comm) {
  if (comm.world_size() == 1) return;
  torch::Tensor t = torch::tensor(values, torch::kFloat64);
  comm.all_reduce_sum(t);
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[static_cast<int64_t>(i)].item<double>();
}

}  // namespace

ValidationStats validate_linear(LinearClassifier& classifier, FeatureBatches& val,
                                Communicator& comm) {
  classifier->eval();
  torch::NoGradGuard no_grad;
  const int64_t labels = classifier->num_labels;
  // loss sum (over samples), correct@1, correct@5, samples
  std::vector<double> sums(4, 0.0);
  val.start_epoch(0);
  torch::Tensor x, y;
  while (val.next(x, y)) {
    const torch::Tensor logits = classifier->forward(x);
    const int64_t b = y.size(0);
    sums[0] += torch::nn::functional::cross_entropy(logits, y).item<double>() * b;
    const torch::Tensor top = std::get<1>(logits.topk(std::min<int64_t>(5, labels), 1));
    const torch::Tensor hit = top.eq(y.view({-1, 1}));
    sums[1] += hit.narrow(1, 0, 1).sum().item<double>();
    sums[2] += hit.sum().item<double>();
    sums[3] += static_cast<double>(b);
  }
  reduce_sums(sums, comm);
  XDINO_CHECK(sums[3] > 0, "the validation set is empty: nothing to evaluate the classifier on");
  ValidationStats s;
  s.samples = static_cast<int64_t>(sums[3]);
  s.loss = sums[0] / sums[3];
  s.acc1 = 100.0 * sums[1] / sums[3];
  if (labels >= 5) s.acc5 = 100.0 * sums[2] / sums[3];
  return s;
}

LinearOutcome train_linear(
    LinearClassifier& classifier, train::Optimizer& optimizer, FeatureBatches& train,
    FeatureBatches& val, const LinearSchedule& schedule, double base, Communicator& comm,
    int64_t start_epoch, LinearOutcome resumed,
    const std::function<void(const EpochStats&, const LinearOutcome&)>& on_epoch) {
  XDINO_CHECK_ARG(schedule.epochs >= 1, "--epochs must be >= 1, got ", schedule.epochs);
  XDINO_CHECK_ARG(schedule.val_freq >= 1, "--val_freq must be >= 1, got ", schedule.val_freq);
  LinearOutcome outcome = std::move(resumed);
  for (int64_t epoch = start_epoch; epoch < schedule.epochs; ++epoch) {
    EpochStats stats;
    stats.epoch = epoch;
    stats.train_lr = cosine_lr(base, epoch, schedule.epochs);
    set_lr(optimizer, stats.train_lr);
    classifier->train();
    train.start_epoch(epoch);
    std::vector<double> loss_sum{0.0, 0.0};  // sum of batch losses, batches
    Progress progress("linear epoch " + std::to_string(epoch), train.batches_per_epoch());
    torch::Tensor x, y;
    while (train.next(x, y)) {
      const torch::Tensor loss = torch::nn::functional::cross_entropy(classifier->forward(x), y);
      optimizer.zero_grad();
      loss.backward();
      if (comm.world_size() > 1) {  // DDP: gradients averaged over processes
        std::vector<torch::Tensor> grads;
        for (auto& p : classifier->parameters()) grads.push_back(p.grad());
        comm.all_reduce_sum(grads);
        for (auto& g : grads) g.div_(comm.world_size());
      }
      optimizer.step();
      const double l = loss.item<double>();
      XDINO_CHECK(std::isfinite(l), "linear probe loss is ", l, " at epoch ", epoch,
                  ": lower --lr or check the features");
      loss_sum[0] += l;
      loss_sum[1] += 1;
      progress.step(1, "loss " + std::to_string(l));
    }
    progress.finish();
    reduce_sums(loss_sum, comm);
    stats.train_loss = loss_sum[1] > 0 ? loss_sum[0] / loss_sum[1] : 0.0;
    if (epoch % schedule.val_freq == 0 || epoch == schedule.epochs - 1) {
      stats.test = validate_linear(classifier, val, comm);
      const double acc1 = stats.test->acc1;
      if (acc1 > outcome.best_acc || (outcome.best_epoch < 0 && acc1 >= outcome.best_acc)) {
        outcome.best_epoch = epoch;
        outcome.best_acc5 = stats.test->acc5;
      }
      outcome.best_acc = std::max(outcome.best_acc, acc1);
      log::info("Accuracy at epoch ", epoch, ": top-1 ", stats.test->acc1, "%, top-5 ",
                stats.test->acc5, "%, loss ", stats.test->loss, " (best top-1 so far ",
                outcome.best_acc, "%)");
    }
    outcome.last = stats;
    if (on_epoch) on_epoch(stats, outcome);
  }
  return outcome;
}

CachedBatches::CachedBatches(torch::Tensor features, torch::Tensor labels, int64_t batch_size,
                             bool shuffle, uint64_t seed, int rank, int world_size,
                             torch::Device device)
    : features_(std::move(features)),
      labels_(labels.to(torch::kInt64)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      seed_(seed),
      rank_(rank),
      world_size_(world_size),
      device_(device) {
  XDINO_CHECK_ARG(batch_size_ >= 1, "batch size must be >= 1, got ", batch_size_);
  XDINO_CHECK(features_.dim() == 2 && labels_.dim() == 1 && features_.size(0) == labels_.size(0),
              "cached features [N, C] and labels [N] disagree: ", features_.sizes(), " vs ",
              labels_.sizes());
  start_epoch(0);
}

void CachedBatches::start_epoch(int64_t epoch) {
  const int64_t n = features_.size(0);
  cursor_ = 0;
  if (!shuffle_) {  // contiguous, unpadded shard: every sample counted exactly once
    const int64_t per = (n + world_size_ - 1) / world_size_;
    const int64_t begin = std::min(n, per * rank_);
    order_ = torch::arange(begin, std::min(n, begin + per), torch::kInt64);
    return;
  }
  // DistributedSampler: randperm seeded with seed + epoch, padded by wrapping, every world-th.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch));
  torch::Tensor perm = torch::randperm(n, gen, torch::kInt64);
  const int64_t total = (n + world_size_ - 1) / world_size_ * world_size_;
  while (perm.size(0) < total)
    perm = torch::cat({perm, perm.narrow(0, 0, std::min(total - perm.size(0), perm.size(0)))});
  order_ = perm.slice(0, rank_, total, world_size_);
}

bool CachedBatches::next(torch::Tensor& features, torch::Tensor& targets) {
  if (cursor_ >= order_.size(0)) return false;
  const int64_t b = std::min(batch_size_, order_.size(0) - cursor_);
  const torch::Tensor idx = order_.narrow(0, cursor_, b);
  cursor_ += b;
  features = features_.index_select(0, idx).to(device_);
  targets = labels_.index_select(0, idx).to(device_);
  return true;
}

int64_t CachedBatches::batches_per_epoch() const {
  return (order_.size(0) + batch_size_ - 1) / batch_size_;
}

}  // namespace xdino::eval
