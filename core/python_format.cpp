#include "core/python_format.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace xdino {

std::string python_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // std::to_chars gives the shortest round-trip digits (as Python's repr does); only the
  // layout differs, so take the digits and exponent and lay them out as Python does.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const auto e = sci.find('e');
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string mantissa = sci.substr(0, e);
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
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

std::string python_json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return python_repr(v);
}

}  // namespace xdino
