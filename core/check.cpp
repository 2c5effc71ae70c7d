#include "core/check.h"

namespace xdino::detail {

std::string located(const std::string& message, const char* condition, const char* file,
                    int line) {
  // `file` is already relative to the repository root (-fmacro-prefix-map in CMakeLists.txt).
  const char* rel = file;
  std::string out = message;
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
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
