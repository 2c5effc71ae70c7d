#include "core/check.h"

namespace xdino {
namespace {

bool control(unsigned char c) { return c < 0x20 || c == 0x7f; }

void append_hex(std::string& out, unsigned char c) {
  static const char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 15];
}

}  // namespace

std::string first_line(std::string_view message) {
  return std::string(message.substr(0, message.find('\n')));
}

std::string quote(std::string_view s) {
  std::string out = "'";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (control(c)) {
      append_hex(out, c);
    } else {
      out += ch;
    }
  }
  return out + "'";
}

}  // namespace xdino

namespace xdino::detail {

std::string one_line(std::string message) {
  std::string out;
  out.reserve(message.size());
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n' || c == '\r')
      out += ' ';
    else if (control(c) && c != '\t')
      append_hex(out, c);
    else
      out += ch;
  }
  return out;
}

std::string located(const std::string& message, const char* condition, const char* file, int line) {
  // `file` is already relative to the repository root (-fmacro-prefix-map in CMakeLists.txt).
  const char* rel = file;
  std::string out = one_line(message);
  out += " [";
  if (condition != nullptr) {
    out += "check '";
    out += condition;
    out += "' failed at ";
  }
  out += rel;
  out += ":";
  out += std::to_string(line);
  out += "]";
  return out;
}

}  // namespace xdino::detail
