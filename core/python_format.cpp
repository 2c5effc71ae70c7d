#include "core/python_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <utility>

namespace xdino {
namespace {

// The shortest digits that parse back to a finite v (as Python's repr and numpy's dragon4
// take them): v = [-]d.ddd x 10^exp.
struct Shortest {
  bool negative = false;
  std::string digits;
  int exp = 0;
};

Shortest shortest(double v, int max_digits = 0) {
  char buf[64];
  const auto res =
      max_digits > 0
          ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, max_digits - 1)
          : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const auto e = sci.find('e');
  Shortest s;
  s.exp = std::atoi(sci.c_str() + e + 1);
  std::string mantissa = sci.substr(0, e);
  s.negative = mantissa[0] == '-';
  if (s.negative) mantissa.erase(0, 1);
  for (char c : mantissa)
    if (c != '.') s.digits += c;
  while (s.digits.size() > 1 && s.digits.back() == '0') s.digits.pop_back();  // fixed precision
  return s;
}

// numpy's dragon4 with unique digits, at most `precision` after the point: the integer part
// (with its sign) and the fraction, split at the point ("100." -> "100", "").
std::pair<std::string, std::string> positional_parts(double v, int precision) {
  Shortest s = shortest(v);
  if (static_cast<int>(s.digits.size()) - (s.exp + 1) > precision) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.*f", precision, std::fabs(v));
    std::string text(buf);
    while (text.back() == '0') text.pop_back();
    const auto dot = text.find('.');
    return {(s.negative ? "-" : "") + text.substr(0, dot), text.substr(dot + 1)};
  }
  std::string whole, fraction;
  if (s.exp < 0) {
    whole = "0";
    fraction = std::string(static_cast<size_t>(-s.exp - 1), '0') + s.digits;
  } else {
    const auto point = static_cast<size_t>(s.exp + 1);
    whole = s.digits.substr(0, std::min(point, s.digits.size()));
    if (point > s.digits.size()) whole += std::string(point - s.digits.size(), '0');
    if (point < s.digits.size()) fraction = s.digits.substr(point);
  }
  if (fraction == "0") fraction.clear();
  return {(s.negative ? "-" : "") + whole, fraction};
}

}  // namespace

std::string python_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // std::to_chars gives the shortest round-trip digits (as Python's repr does); only the
  // layout differs, so take the digits and exponent and lay them out as Python does.
  const Shortest s = shortest(v);
  const bool negative = s.negative;
  const std::string& digits = s.digits;
  const int exp = s.exp;
  const auto point = static_cast<size_t>(exp + 1);  // digits before the decimal point
  std::string out;
  if (exp >= -4 && exp < 16) {
    if (exp < 0)
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    else if (point >= digits.size())
      out = digits + std::string(point - digits.size(), '0') + ".0";
    else
      out = digits.substr(0, point) + "." + digits.substr(point);
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += exp_text;
  }
  return negative ? "-" + out : out;
}

double numpy_around(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::nearbyint(v * scale) / scale;  // numpy: multiply, rint (half to even), divide
}

std::string numpy_str(const std::vector<double>& values) {
  constexpr int kPrecision = 8;  // numpy's default print precision
  double max_abs = 0, min_abs = 0;
  for (double v : values) {
    if (!std::isfinite(v) || v == 0) continue;
    max_abs = std::max(max_abs, std::fabs(v));
    min_abs = min_abs == 0 ? std::fabs(v) : std::min(min_abs, std::fabs(v));
  }
  const bool exp_format =
      max_abs != 0 && (max_abs >= 1e8 || min_abs < 1e-4 || max_abs / min_abs > 1000.0);
  struct Parts {
    std::string whole, fraction, exp;
  };
  std::vector<Parts> parts;
  size_t pad_left = 0, pad_right = 0, exp_size = 0;
  for (double v : values) {
    Parts p;
    if (!std::isfinite(v)) {
      parts.push_back(p);
      continue;
    }
    if (exp_format) {
      const Shortest s = v == 0 ? Shortest{false, "0", 0} : shortest(v, kPrecision + 1);
      p.whole = (s.negative ? "-" : "") + s.digits.substr(0, 1);
      p.fraction = s.digits.substr(1);
      char e[16];
      std::snprintf(e, sizeof e, "%c%02d", s.exp < 0 ? '-' : '+', std::abs(s.exp));
      p.exp = e;
      exp_size = std::max(exp_size, p.exp.size() - 1);
    } else {
      std::tie(p.whole, p.fraction) = positional_parts(v, kPrecision);
    }
    pad_left = std::max(pad_left, p.whole.size());
    pad_right = std::max(pad_right, p.fraction.size());
    parts.push_back(p);
  }
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ' ';
    const Parts& p = parts[i];
    std::string item;
    if (!std::isfinite(values[i])) {
      const std::string word = std::isnan(values[i]) ? "nan" : values[i] > 0 ? "inf" : "-inf";
      const size_t width = pad_left + pad_right + 1 + (exp_format ? exp_size + 2 : 0);
      item = std::string(width > word.size() ? width - word.size() : 0, ' ') + word;
    } else if (exp_format) {  // every mantissa to the same digits, zeros added
      const std::string exp_digits = p.exp.substr(1);
      item = std::string(pad_left - p.whole.size(), ' ') + p.whole + "." + p.fraction +
             std::string(pad_right - p.fraction.size(), '0') + "e" + p.exp[0] +
             std::string(exp_size - exp_digits.size(), '0') + exp_digits;
    } else {  // trailing zeros trimmed, the point kept, spaces for the missing digits
      item = std::string(pad_left - p.whole.size(), ' ') + p.whole + "." + p.fraction +
             std::string(pad_right - p.fraction.size(), ' ');
    }
    out += item;
  }
  return out + "]";
}

std::string python_json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return python_repr(v);
}

}  // namespace xdino
