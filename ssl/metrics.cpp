#include "ssl/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/check.h"
#include "core/json.h"

namespace xdino::ssl {

const std::array<StatField, kStatCount>& stat_fields() {
  static const std::array<StatField, kStatCount> fields = [] {
    std::array<StatField, kStatCount> f = {{
        {"loss", &IterationStats::loss},
        {"lr", &IterationStats::lr},
        {"wd", &IterationStats::wd},
        {"momentum", &IterationStats::momentum},
        {"teacher_temp", &IterationStats::teacher_temp},
        {"teacher_entropy", &IterationStats::teacher_entropy},
        {"kl_uniform", &IterationStats::kl_uniform},
        {"dino_loss", &IterationStats::dino_loss},
    }};
    for (size_t i = 0; i < kTermCount; ++i)
      f[kStatCount - kTermCount + i] = {loss_name(kLossTerms[i]), nullptr, i};
    return f;
  }();
  return fields;
}

void EpochMeters::add(const IterationStats& s) {
  for (const StatField& f : stat_fields()) f.of(sums_) += f.of(s);
  ++count_;
}

void EpochMeters::reset() {
  sums_ = IterationStats{};
  count_ = 0;
}

EpochMeters EpochMeters::reduced(Communicator& comm) const {
  auto t = to_tensor();
  comm.all_reduce_sum(t);
  return from_tensor(t);
}

IterationStats EpochMeters::averages(Communicator& comm) const {
  const EpochMeters all = reduced(comm);
  IterationStats avg;
  for (const StatField& f : stat_fields())
    f.of(avg) = all.count_ > 0 ? f.of(all.sums_) / static_cast<double>(all.count_) : NAN;
  return avg;
}

c10::IValue EpochMeters::to_ivalue() const {
  auto d = make_dict();
  d.insert("count", count_);
  for (const StatField& f : stat_fields()) d.insert(f.name + "_sum", f.of(sums_));
  return d;
}

void EpochMeters::from_ivalue(const c10::IValue& v) {
  const auto d = as_dict(v, "epoch statistics");
  count_ = as_int(get(d, "count", "epoch statistics"), "count");
  for (const StatField& f : stat_fields()) {
    const std::string key = f.name + "_sum";
    const c10::IValue* found = find(d, key);
    if (found == nullptr && f.name.find("_loss") != std::string::npos) {
      // Saved before the loss had terms: DINO's alone.
      f.of(sums_) = f.value == &IterationStats::dino_loss ? sums_.loss : 0.0;
      continue;
    }
    f.of(sums_) = as_double(get(d, key, "epoch statistics"), key);
  }
}

torch::Tensor EpochMeters::to_tensor() const {
  auto t = torch::empty({static_cast<int64_t>(kCount) + 1}, torch::kDouble);
  int64_t i = 0;
  for (const StatField& f : stat_fields()) t[i++] = f.of(sums_);
  t[kCount] = static_cast<double>(count_);
  return t;
}

EpochMeters EpochMeters::from_tensor(const torch::Tensor& t) {
  XDINO_CHECK(t.dim() == 1 && t.size(0) == static_cast<int64_t>(kCount) + 1 &&
                  t.scalar_type() == torch::kDouble,
              "epoch statistics of one rank should be ", kCount + 1, " float64 values, got ",
              t.sizes(), " ", t.scalar_type());
  const auto c = t.contiguous().cpu();
  const auto a = c.accessor<double, 1>();
  EpochMeters out;
  int64_t i = 0;
  for (const StatField& f : stat_fields()) f.of(out.sums_) = a[i++];
  out.count_ = static_cast<int64_t>(a[kCount]);
  return out;
}

std::string log_line(int64_t epoch, const IterationStats& a, const Json& extra) {
  // The first four keys are main_dino.py's, in its order.
  Json j = Json::object();
  j["train_loss"] = a.loss;
  j["train_lr"] = a.lr;
  j["train_wd"] = a.wd;
  j["epoch"] = epoch;
  j["train_momentum"] = a.momentum;
  j["train_teacher_temp"] = a.teacher_temp;
  j["train_teacher_entropy"] = a.teacher_entropy;
  j["train_kl_teacher_student"] = a.dino_loss - a.teacher_entropy;
  j["train_kl_uniform"] = a.kl_uniform;
  for (const auto& [key, value] : extra.items()) j[key] = value;
  return python_dumps(j);
}

Json loss_terms(const IterationStats& a, const RecipeOptions& recipe) {
  Json j = Json::object();
  if (!recipe.adds_terms()) return j;
  j["train_dino_loss"] = a.dino_loss;
  for (size_t i = 0; i < kTermCount; ++i)
    if (recipe.*kLossTerms[i].weight > 0) j["train_" + loss_name(kLossTerms[i])] = a.terms[i];
  return j;
}

}  // namespace xdino::ssl
