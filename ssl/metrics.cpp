#include "ssl/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/check.h"

namespace xdino::ssl {

const std::array<const char*, EpochMeters::kCount>& EpochMeters::keys() {
  static const std::array<const char*, kCount> k = {
      "loss", "lr", "wd", "momentum", "teacher_temp", "teacher_entropy", "kl_uniform"};
  return k;
}

void EpochMeters::add(const IterationStats& s) {
  const std::array<double, kCount> v = {s.loss,         s.lr,          s.wd,
                                        s.momentum,     s.teacher_temp, s.teacher_entropy,
                                        s.kl_uniform};
  for (size_t i = 0; i < kCount; ++i) sums_[i] += v[i];
  ++count_;
}

void EpochMeters::reset() {
  sums_.fill(0.0);
  count_ = 0;
}

EpochMeters EpochMeters::reduced(Communicator& comm) const {
  auto t = torch::empty({static_cast<int64_t>(kCount) + 1}, torch::kDouble);
  for (size_t i = 0; i < kCount; ++i) t[static_cast<int64_t>(i)] = sums_[i];
  t[kCount] = static_cast<double>(count_);
  comm.all_reduce_sum(t);
  EpochMeters out;
  const auto a = t.accessor<double, 1>();
  for (size_t i = 0; i < kCount; ++i) out.sums_[i] = a[static_cast<int64_t>(i)];
  out.count_ = static_cast<int64_t>(a[kCount]);
  return out;
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
    sums_[i] = as_double(get(d, key, "epoch statistics"), key);
  }
}

std::string json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  // Shortest round-trip digits, then Python's repr layout: positional for exponents in
  // [-4, 16), else d.ddde[+-]XX; positional floats always show a fractional digit.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const auto e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string mant = sci.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp + 1) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
            digits.substr(static_cast<size_t>(exp + 1));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += ebuf;
  }
  return neg ? "-" + out : out;
}

std::string log_line(int64_t epoch, const std::array<double, EpochMeters::kCount>& a) {
  // a: loss, lr, wd, momentum, teacher_temp, teacher_entropy, kl_uniform.
  std::string s = "{\"train_loss\": " + json_number(a[0]) + ", \"train_lr\": " +
                  json_number(a[1]) + ", \"train_wd\": " + json_number(a[2]) +
                  ", \"epoch\": " + std::to_string(epoch);
  s += ", \"train_momentum\": " + json_number(a[3]);
  s += ", \"train_teacher_temp\": " + json_number(a[4]);
  s += ", \"train_teacher_entropy\": " + json_number(a[5]);
  s += ", \"train_kl_teacher_student\": " + json_number(a[0] - a[5]);
  s += ", \"train_kl_uniform\": " + json_number(a[6]);
  return s + "}";
}

}  // namespace xdino::ssl
