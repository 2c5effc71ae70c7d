#include "core/ivalue.h"

#include "core/check.h"

namespace xdino {

IDict make_dict() { return IDict(c10::StringType::get(), c10::AnyType::get()); }
IDict make_int_dict() { return IDict(c10::IntType::get(), c10::AnyType::get()); }
IDict make_any_dict() { return IDict(c10::AnyType::get(), c10::AnyType::get()); }
c10::impl::GenericList make_list() { return c10::impl::GenericList(c10::AnyType::get()); }
c10::IValue make_tuple(std::vector<c10::IValue> items) {
  return c10::ivalue::Tuple::create(std::move(items));
}

const c10::IValue* find(const IDict& d, const std::string& key) {
  const auto it = d.find(c10::IValue(key));
  return it == d.end() ? nullptr : &it->value();
}

const c10::IValue& get(const IDict& d, const std::string& key, const std::string& what) {
  const c10::IValue* v = find(d, key);
  XDINO_CHECK(v != nullptr, what, " has no key '", key, "'");
  return *v;
}

IDict as_dict(const c10::IValue& v, const std::string& what) {
  XDINO_CHECK(v.isGenericDict(), what, " should be a dict, found ", v.tagKind());
  return v.toGenericDict();
}

double as_double(const c10::IValue& v, const std::string& what) {
  if (v.isDouble()) return v.toDouble();
  if (v.isInt()) return static_cast<double>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.0 : 0.0;
  if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
  XDINO_FAIL(what, " should be a number, found ", v.tagKind());
}

int64_t as_int(const c10::IValue& v, const std::string& what) {
  if (v.isInt()) return v.toInt();
  if (v.isBool()) return v.toBool() ? 1 : 0;
  if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
  if (v.isDouble() && v.toDouble() == static_cast<double>(static_cast<int64_t>(v.toDouble())))
    return static_cast<int64_t>(v.toDouble());
  XDINO_FAIL(what, " should be an integer, found ", v.tagKind());
}

}  // namespace xdino
