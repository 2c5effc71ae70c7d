#include "core/check.h"

namespace xdino::detail {

std::string one_line(std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  return message;
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
