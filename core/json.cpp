#include "core/json.h"

#include "core/check.h"
#include "core/python_format.h"

namespace xdino {
namespace {

void dump_to(const Json& j, int indent, int depth, std::string& out) {
  const auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(d), ' ');
  };
  // Python puts no space after the comma when indenting (the newline separates).
  const char* comma = indent < 0 ? ", " : ",";
  if (j.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) out += comma;
      first = false;
      newline(depth + 1);
      out += Json(key).dump(-1, ' ', /*ensure_ascii=*/true);
      out += ": ";
      dump_to(value, indent, depth + 1, out);
    }
    if (!j.empty()) newline(depth);
    out += '}';
  } else if (j.is_array()) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out += comma;
      newline(depth + 1);
      dump_to(j[i], indent, depth + 1, out);
    }
    if (!j.empty()) newline(depth);
    out += ']';
  } else if (j.is_number_float()) {
    out += python_json_number(j.get<double>());
  } else {
    out += j.dump(-1, ' ', /*ensure_ascii=*/true);  // null, bools, integers, strings
  }
}

// nlohmann's parser and its values' destructor recurse once per nesting level: 10^6 '[' crash
// the process. Count the levels first (brackets outside strings), without building anything.
void check_nesting(std::string_view text, const std::string& what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      XDINO_CHECK(++depth <= kMaxJsonNesting, "cannot parse ", what,
                  " as JSON: it nests deeper "
                  "than ",
                  kMaxJsonNesting, " levels at byte ", i, " (no result file does)");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

std::string python_dumps(const Json& j, int indent) {
  std::string out;
  dump_to(j, indent, 0, out);
  return out;
}

Json parse_json(std::string_view text, const std::string& what) {
  check_nesting(text, what);
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    XDINO_FAIL("cannot parse ", what, " as JSON at byte ", e.byte, ": ", e.what());
  }
}

}  // namespace xdino
