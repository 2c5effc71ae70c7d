// Per-epoch averages of the training statistics and the `log.txt` line they become.
//
// Contract:
//  - stat_fields(): every number of IterationStats by name, in one order: the meters', the
//    checkpoint's sums ("<name>_sum") and the tensors'. A new number is one field there; a
//    new loss term is not (its line in ssl/recipe.h's kLossTerms gives it its field).
//  - EpochMeters::add(stats) accumulates one iteration's values (double sums + a count).
//  - averages(comm) all-reduces sums and counts over the processes and returns the global
//    means (what MetricLogger.global_avg gives after synchronize_between_processes); it does
//    not change the meters.
//  - to_ivalue()/from_ivalue() carry the partial sums through a checkpoint, so an epoch
//    interrupted and resumed averages exactly the same iterations; to_tensor()/from_tensor()
//    carry one rank's (ssl/training_state.h keeps every rank's, so that each adds its own
//    iterations to its own sums in the same order as without the stop: bit for bit). The loss
//    terms' sums may be missing (a checkpoint from before DINOv2's options): the DINO term is then
//    the loss, the others 0.
//  - The loss terms: dino_loss (DINO's cross-entropy) and terms[i], kLossTerms[i]'s weighted
//    term as it is added (ssl/recipe.h; loss = dino_loss + terms[0] + terms[1] + ...), named
//    <name>_loss (koleo_loss, ibot_loss).
//  - log_line(epoch, averages) is one JSON object: train_loss, train_lr, train_wd, epoch (the
//    official keys in the official order), then our extras (train_momentum,
//    train_teacher_temp, train_teacher_entropy, train_kl_teacher_student (of the DINO term),
//    train_kl_uniform),
//    then `extra`'s fields (the trainer's images_seen, the online k-NN's knn_*);
//    numbers in the shortest form that reads back to the same double, like Python's json.
//  - loss_terms(averages, recipe): with a term beside DINO's on, each term of train_loss on
//    its own (train_dino_loss, and train_<name>_loss for each term on); they add up to it. An
//    empty object otherwise: the official run's line has none.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/ivalue.h"
#include "core/json.h"
#include "distributed/communicator.h"
#include "ssl/recipe.h"

namespace xdino::ssl {

struct IterationStats {
  double loss = 0, lr = 0, wd = 0, momentum = 0, teacher_temp = 0;
  double teacher_entropy = 0;              // mean H(p_t), nats
  double kl_uniform = 0;                   // KL(mean p_t || uniform), nats
  double dino_loss = 0;                    // DINO's term of the loss
  std::array<double, kTermCount> terms{};  // the recipe's, at kLossTerms' indices
};

// One number of IterationStats: a field (`value`), or the recipe's term `term` (value null).
struct StatField {
  std::string name;
  double IterationStats::*value = nullptr;
  size_t term = 0;
  double& of(IterationStats& s) const { return value ? s.*value : s.terms[term]; }
  double of(const IterationStats& s) const { return value ? s.*value : s.terms[term]; }
};
inline constexpr size_t kStatCount = 8 + kTermCount;
const std::array<StatField, kStatCount>& stat_fields();

class EpochMeters {
 public:
  static constexpr size_t kCount = kStatCount;

  void add(const IterationStats& s);
  void reset();
  int64_t count() const { return count_; }
  IterationStats averages(Communicator& comm) const;
  // All-reduced sums (so rank 0 alone can carry them through a checkpoint).
  EpochMeters reduced(Communicator& comm) const;

  c10::IValue to_ivalue() const;
  void from_ivalue(const c10::IValue& v);
  // The sums then the count, float64 (kCount + 1): one rank's, for an all-gather.
  torch::Tensor to_tensor() const;
  static EpochMeters from_tensor(const torch::Tensor& t);

 private:
  IterationStats sums_;
  int64_t count_ = 0;
};

// `extra` (an object) is appended after our extras, in its own order.
std::string log_line(int64_t epoch, const IterationStats& averages,
                     const Json& extra = Json::object());

Json loss_terms(const IterationStats& averages, const RecipeOptions& recipe);

}  // namespace xdino::ssl
