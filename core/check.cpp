#include "core/check.h"

#include <cstring>

namespace xdino::detail {

std::string located(const std::string& message, const char* condition, const char* file,
                    int line) {
  // Keep only the path below the repository root so messages stay short and stable.
  const char* rel = file;
  for (const char* tier : {"core/", "models/", "augment/", "ssl/", "eval/", "launch/", "tests/",
                           "bench/"}) {
    if (const char* p = std::strstr(file, tier)) {
      rel = p;
      break;
    }
  }
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
