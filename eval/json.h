// A small JSON value for the evaluation outputs (knn.json, linear.json, log.txt lines, the
// JSON report) and for reading them back.
//
// Contract:
//  - Json holds null, bool, number (double; integers up to 2^53 print without a fraction),
//    string (UTF-8, escaped on output), array, or object. Objects keep insertion order, like
//    Python's dict, so files list keys in the order the official scripts write them.
//  - dump(-1) gives one line (json.dumps style, ", " and ": " separators); dump(n) indents by n.
//    Non-finite numbers print as NaN / Infinity, as Python's json module does.
//  - parse(text, what) reads RFC 8259 JSON (plus NaN/Infinity); a syntax error throws
//    xdino::Error naming `what` (e.g. the file) and the byte offset.
//  - Accessors throw xdino::Error naming the key or the expected type when the value is not
//    what the caller asks for.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xdino::eval {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::kBool), bool_(b) {}
  Json(double v) : type_(Type::kNumber), number_(v) {}
  Json(int v) : Json(static_cast<double>(v)) {}
  Json(int64_t v) : Json(static_cast<double>(v)) {}
  Json(const char* s) : type_(Type::kString), string_(s) {}
  Json(std::string s) : type_(Type::kString), string_(std::move(s)) {}

  static Json array();
  static Json object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;
  const std::string& as_string() const;
  const std::vector<Json>& items() const;                             // array elements
  const std::vector<std::pair<std::string, Json>>& members() const;  // object members

  // Arrays: append. Objects: set (replaces an existing key in place, else appends).
  Json& push_back(Json value);
  Json& set(const std::string& key, Json value);
  // Objects: the member or nullptr / throw naming the key.
  const Json* find(const std::string& key) const;
  const Json& at(const std::string& key) const;

  std::string dump(int indent = -1) const;
  static Json parse(std::string_view text, const std::string& what);

 private:
  void dump_to(std::string& out, int indent, int depth) const;

  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0.0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

}  // namespace xdino::eval
