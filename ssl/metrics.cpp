#include "ssl/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/check.h"
#include "core/json.h"

namespace xdino::ssl {
namespace {

constexpr size_t kFirstTerm = 7;  // dino_loss's index in keys()

}  // namespace

const std::array<const char*, EpochMeters::kCount>& EpochMeters::keys() {
  static const std::array<const char*, kCount> k = {
      "loss",       "lr",        "wd",         "momentum", "teacher_temp", "teacher_entropy",
      "kl_uniform", "dino_loss", "koleo_loss", "ibot_loss"};
  return k;
}

void EpochMeters::add(const IterationStats& s) {
  const std::array<double, kCount> v = {
      s.loss,       s.lr,        s.wd,         s.momentum, s.teacher_temp, s.teacher_entropy,
      s.kl_uniform, s.dino_loss, s.koleo_loss, s.ibot_loss};
  for (size_t i = 0; i < kCount; ++i) sums_[i] += v[i];
  ++count_;
}

void EpochMeters::reset() {
  sums_.fill(0.0);
  count_ = 0;
}

EpochMeters EpochMeters::reduced(Communicator& comm) const {
  auto t = to_tensor();
  comm.all_reduce_sum(t);
  return from_tensor(t);
}

std::array<double, EpochMeters::kCount> EpochMeters::averages(Communicator& comm) const {
  const EpochMeters all = reduced(comm);
  std::array<double, kCount> avg{};
  for (size_t i = 0; i < kCount; ++i)
    avg[i] = all.count_ > 0 ? all.sums_[i] / static_cast<double>(all.count_) : NAN;
  return avg;
}

c10::IValue EpochMeters::to_ivalue() const {
  auto d = make_dict();
  d.insert("count", count_);
  for (size_t i = 0; i < kCount; ++i) d.insert(std::string(keys()[i]) + "_sum", sums_[i]);
  return d;
}

void EpochMeters::from_ivalue(const c10::IValue& v) {
  const auto d = as_dict(v, "epoch statistics");
  count_ = as_int(get(d, "count", "epoch statistics"), "count");
  for (size_t i = 0; i < kCount; ++i) {
    const std::string key = std::string(keys()[i]) + "_sum";
    const c10::IValue* v = find(d, key);
    if (v == nullptr && i >= kFirstTerm) {  // saved before the loss had terms: DINO's alone
      sums_[i] = i == kFirstTerm ? sums_[0] : 0.0;
      continue;
    }
    sums_[i] = as_double(get(d, key, "epoch statistics"), key);
  }
}

torch::Tensor EpochMeters::to_tensor() const {
  auto t = torch::empty({static_cast<int64_t>(kCount) + 1}, torch::kDouble);
  for (size_t i = 0; i < kCount; ++i) t[static_cast<int64_t>(i)] = sums_[i];
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
  for (size_t i = 0; i < kCount; ++i) out.sums_[i] = a[static_cast<int64_t>(i)];
  out.count_ = static_cast<int64_t>(a[kCount]);
  return out;
}

std::string log_line(int64_t epoch, const std::array<double, EpochMeters::kCount>& a,
                     const Json& extra) {
  // a: loss, lr, wd, momentum, teacher_temp, teacher_entropy, kl_uniform, then the loss's
  // terms. The first four keys are main_dino.py's, in its order.
  Json j = Json::object();
  j["train_loss"] = a[0];
  j["train_lr"] = a[1];
  j["train_wd"] = a[2];
  j["epoch"] = epoch;
  j["train_momentum"] = a[3];
  j["train_teacher_temp"] = a[4];
  j["train_teacher_entropy"] = a[5];
  j["train_kl_teacher_student"] = a[kFirstTerm] - a[5];
  j["train_kl_uniform"] = a[6];
  for (const auto& [key, value] : extra.items()) j[key] = value;
  return python_dumps(j);
}

}  // namespace xdino::ssl
