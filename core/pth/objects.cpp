// What the Python callables a torch.save pickle names rebuild, as IValues.
#include "core/pth/objects.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace xdino::pth {
namespace {

using c10::IValue;

std::optional<at::ScalarType> torch_dtype(const std::string& name) {
  static const std::unordered_map<std::string, at::ScalarType> kNames = {
      {"torch.float32", at::kFloat},
      {"torch.float", at::kFloat},
      {"torch.float64", at::kDouble},
      {"torch.double", at::kDouble},
      {"torch.float16", at::kHalf},
      {"torch.half", at::kHalf},
      {"torch.bfloat16", at::kBFloat16},
      {"torch.int64", at::kLong},
      {"torch.long", at::kLong},
      {"torch.int32", at::kInt},
      {"torch.int", at::kInt},
      {"torch.int16", at::kShort},
      {"torch.short", at::kShort},
      {"torch.int8", at::kChar},
      {"torch.uint8", at::kByte},
      {"torch.bool", at::kBool},
      {"torch.complex64", at::kComplexFloat},
      {"torch.complex128", at::kComplexDouble}};
  const auto it = kNames.find(name);
  if (it == kNames.end()) return std::nullopt;
  return it->second;
}

bool hashable_key(const IValue& v) {
  return v.isInt() || v.isString() || v.isDouble() || v.isBool() || v.isTensor();
}

}  // namespace

PythonObjects::PythonObjects(const StorageLoader& loader, const std::string& where,
                             const size_t& op_pos)
    : loader_(loader), where_(where), op_pos_(op_pos) {}

std::vector<IValue> PythonObjects::tuple_items(const IValue& v, const char* what) const {
  XDINO_PICKLE_CHECK(v.isTuple(), what, " must be a tuple, not ", v.tagKind());
  return v.toTupleRef().elements().vec();
}

std::string PythonObjects::name_of(const IValue& v, const char* what) const {
  XDINO_PICKLE_CHECK(v.isString(), what, " must be a class or function, not ", v.tagKind());
  return v.toStringRef();
}

void PythonObjects::set_item(IValue& target, IValue key, IValue value) const {
  XDINO_PICKLE_CHECK(target.isGenericDict(), "SETITEM on a ", target.tagKind());
  XDINO_PICKLE_CHECK(hashable_key(key), "dict key of type ", key.tagKind(), " is not supported");
  target.toGenericDict().insert_or_assign(std::move(key), std::move(value));
}

IValue PythonObjects::call(const std::string& fn, std::vector<IValue> args) {
  const auto arg = [&](size_t i) -> const IValue& {
    XDINO_PICKLE_CHECK(i < args.size(), fn, " needs at least ", i + 1, " arguments, got ",
                       args.size());
    return args[i];
  };
  if (fn == "collections.OrderedDict") {
    IValue dict = make_any_dict();
    if (!args.empty() && args[0].isList())
      for (const IValue& pair : args[0].toListRef()) {
        const std::vector<IValue> kv = tuple_items(pair, "OrderedDict item");
        XDINO_PICKLE_CHECK(kv.size() == 2, "OrderedDict item of size ", kv.size());
        set_item(dict, kv[0], kv[1]);
      }
    return dict;
  }
  if (fn == "torch._utils._rebuild_tensor" || fn == "torch._utils._rebuild_tensor_v2")
    return rebuild_tensor(args, std::nullopt);
  if (fn == "torch._utils._rebuild_tensor_v3") {
    const std::string dtype_name = name_of(arg(6), "_rebuild_tensor_v3's dtype");
    const auto dtype = torch_dtype(dtype_name);
    XDINO_PICKLE_CHECK(dtype.has_value(), "tensor dtype ", dtype_name, " is not supported");
    return rebuild_tensor(args, dtype);
  }
  if (fn == "torch._utils._rebuild_parameter" ||
      fn == "torch._utils._rebuild_parameter_with_state") {
    XDINO_PICKLE_CHECK(arg(0).isTensor() && arg(1).isBool(), fn, " expects (tensor, bool, ...)");
    at::Tensor t = arg(0).toTensor();
    if (arg(1).toBool() && t.is_floating_point()) t.set_requires_grad(true);
    return t;
  }
  if (fn == "torch._tensor._rebuild_from_type_v2" || fn == "torch._tensor._rebuild_from_type")
    return call(name_of(arg(0), "the rebuild function"), tuple_items(arg(2), "its arguments"));
  XDINO_PICKLE_CHECK(fn.rfind("torch._utils._rebuild_", 0) != 0, "tensor kind ", fn,
                     " (sparse, quantized, nested or device-only tensors) is not supported");
  if (fn == "numpy.core.multiarray.scalar" || fn == "numpy._core.multiarray.scalar")
    return numpy_scalar(args);
  if (fn == "_codecs.encode") {
    const std::string encoding = name_of(arg(1), "_codecs.encode's encoding");
    XDINO_PICKLE_CHECK(encoding == "latin1" || encoding == "latin-1", "bytes in encoding ",
                       encoding, " are not supported");
    return latin1_bytes(name_of(arg(0), "_codecs.encode's text"));
  }
  if (fn == "builtins.bytes" || fn == "builtins.bytearray") {
    if (args.empty()) return std::string();
    const std::string text = name_of(args[0], "bytes' argument");
    return args.size() > 1 ? latin1_bytes(text) : text;
  }
  if (fn == "builtins.set" || fn == "builtins.frozenset") {
    auto list = make_list();
    if (!args.empty() && args[0].isList())
      for (const IValue& v : args[0].toListRef()) list.push_back(v);
    return list;
  }
  if (fn == "torch.Size") return args.empty() ? make_tuple({}) : arg(0);
  if (fn == "torch.device") {
    std::string device = name_of(arg(0), "torch.device's type");
    if (args.size() > 1 && args[1].isInt()) device += ":" + std::to_string(args[1].toInt());
    return device;
  }
  if (fn == "copyreg._reconstructor")
    return instance(name_of(arg(0), "copyreg._reconstructor's class"), {}, IValue());
  if (fn == "copyreg.__newobj__")
    return instance(name_of(arg(0), "copyreg.__newobj__'s class"),
                    std::vector<IValue>(args.begin() + 1, args.end()), IValue());
  return instance(fn, std::move(args), IValue());
}

IValue PythonObjects::instance(const std::string& cls, std::vector<IValue> args, IValue kwargs) {
  if (cls == "collections.OrderedDict") return make_any_dict();
  auto obj = make_any_dict();
  obj.insert(std::string("__class__"), cls);
  if (!args.empty()) obj.insert(std::string("__args__"), make_tuple(std::move(args)));
  if (kwargs.isGenericDict() && kwargs.toGenericDict().size() > 0)
    obj.insert(std::string("__kwargs__"), kwargs);
  IValue value(obj);
  objects_.insert(value.internalToPointer());
  return value;
}

void PythonObjects::build(IValue& target, IValue state) {
  // State of dicts (OrderedDict's `_metadata`), tensors and plain values is dropped.
  if (!target.isGenericDict() || objects_.count(target.internalToPointer()) == 0) return;
  auto obj = target.toGenericDict();
  const auto merge = [&](const IValue& attrs) {
    for (const auto& item : attrs.toGenericDict()) obj.insert_or_assign(item.key(), item.value());
  };
  if (state.isGenericDict()) {
    merge(state);
    return;
  }
  if (state.isTuple() && state.toTupleRef().elements().size() == 2) {
    const auto& parts = state.toTupleRef().elements();
    if ((parts[0].isGenericDict() || parts[0].isNone()) &&
        (parts[1].isGenericDict() || parts[1].isNone())) {
      for (const IValue& p : parts)
        if (p.isGenericDict()) merge(p);
      return;
    }
  }
  obj.insert_or_assign(std::string("__state__"), std::move(state));
}

IValue PythonObjects::persistent(const IValue& pid) {
  const std::vector<IValue> id = tuple_items(pid, "a persistent id");
  XDINO_PICKLE_CHECK(id.size() >= 5 && id[0].isString() && id[0].toStringRef() == "storage" &&
                         id[1].isString() && id[2].isString() && id[4].isInt(),
                     "persistent id is not torch.save's ('storage', class, key, location, numel)");
  std::string cls = id[1].toStringRef();
  if (cls.rfind("torch.cuda.", 0) == 0) cls = "torch." + cls.substr(11);
  XDINO_PICKLE_CHECK(cls.rfind("torch.", 0) == 0 && storage_dtype(cls.substr(6)).has_value(),
                     "storage class ", cls, " is not supported");
  const at::ScalarType dtype = *storage_dtype(cls.substr(6));
  const std::string& key = id[2].toStringRef();
  const int64_t numel = id[4].toInt();
  XDINO_PICKLE_CHECK(numel >= 0, "storage '", key, "' has a negative size");
  auto it = storages_.find(key);
  if (it == storages_.end()) it = storages_.emplace(key, loader_(key, dtype, numel)).first;
  const at::Tensor& storage = it->second;
  if (storage.scalar_type() == dtype) return storage;
  return at::empty({0}, storage.options().dtype(dtype))
      .set_(storage.storage(), 0, {int64_t(storage.storage().nbytes() / at::elementSize(dtype))},
            {1});
}

IValue PythonObjects::rebuild_tensor(const std::vector<IValue>& args,
                                     std::optional<at::ScalarType> dtype) {
  XDINO_PICKLE_CHECK(args.size() >= 4 && args[0].isTensor() && args[1].isInt(),
                     "_rebuild_tensor expects (storage, offset, size, stride, ...)");
  const at::Tensor& storage = args[0].toTensor();
  const at::ScalarType type = dtype.value_or(storage.scalar_type());
  const int64_t offset = args[1].toInt();
  std::vector<int64_t> size, stride;
  for (const IValue& v : tuple_items(args[2], "tensor size")) {
    XDINO_PICKLE_CHECK(v.isInt() && v.toInt() >= 0, "tensor size holds ", v.tagKind());
    size.push_back(v.toInt());
  }
  for (const IValue& v : tuple_items(args[3], "tensor stride")) {
    XDINO_PICKLE_CHECK(v.isInt() && v.toInt() >= 0, "tensor stride holds ", v.tagKind());
    stride.push_back(v.toInt());
  }
  XDINO_PICKLE_CHECK(size.size() == stride.size(), "tensor size and stride differ in length");
  // The view must lie inside the storage (set_ would otherwise grow it silently). The sums
  // are overflow-checked: an untrusted pickle can declare sizes and strides near 2^63, whose
  // product would wrap (undefined behaviour) and pass the bound below.
  int64_t extent = 1;
  bool overflow = false;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == 0) extent = 0;
  }
  for (size_t d = 0; d < size.size() && extent > 0; ++d) {
    int64_t span = 0;
    overflow = overflow || __builtin_mul_overflow(size[d] - 1, stride[d], &span) ||
               __builtin_add_overflow(extent, span, &extent);
  }
  int64_t end = 0;
  overflow = overflow || __builtin_add_overflow(offset, extent, &end);
  const int64_t capacity = int64_t(storage.storage().nbytes() / at::elementSize(type));
  XDINO_PICKLE_CHECK(!overflow && offset >= 0 && (extent == 0 || end <= capacity),
                     "tensor of size ", c10::IntArrayRef(size), " at offset ", offset,
                     " reaches past its storage of ", capacity, " elements");
  at::Tensor t =
      at::empty({0}, storage.options().dtype(type)).set_(storage.storage(), offset, size, stride);
  if (args.size() > 4 && args[4].isBool() && args[4].toBool() && t.is_floating_point())
    t.set_requires_grad(true);
  return t;
}

// numpy.core.multiarray.scalar(dtype, raw bytes): numpy scalars become int/double/bool.
IValue PythonObjects::numpy_scalar(const std::vector<IValue>& args) {
  XDINO_PICKLE_CHECK(args.size() == 2 && args[0].isGenericDict() && args[1].isString(),
                     "numpy scalar expects (dtype, bytes)");
  const auto dtype = args[0].toGenericDict();
  const auto args_it = dtype.find(std::string("__args__"));
  XDINO_PICKLE_CHECK(args_it != dtype.end() && args_it->value().isTuple() &&
                         !args_it->value().toTupleRef().elements().empty() &&
                         args_it->value().toTupleRef().elements()[0].isString(),
                     "numpy scalar without a dtype string");
  std::string descr = args_it->value().toTupleRef().elements()[0].toStringRef();
  char order = '<';
  const auto state_it = dtype.find(std::string("__state__"));
  if (state_it != dtype.end() && state_it->value().isTuple()) {
    const auto& st = state_it->value().toTupleRef().elements();
    if (st.size() > 1 && st[1].isString() && st[1].toStringRef().size() == 1)
      order = st[1].toStringRef()[0];
  }
  if (!descr.empty() && std::strchr("<>|=", descr[0])) {
    order = descr[0];
    descr.erase(0, 1);
  }
  std::string raw = args[1].toStringRef();
  XDINO_PICKLE_CHECK(descr.size() >= 2 && std::to_string(raw.size()) == descr.substr(1),
                     "numpy scalar of dtype '", descr, "' holds ", raw.size(), " bytes");
  if (order == '>') std::reverse(raw.begin(), raw.end());
  const char kind = descr[0];
  const size_t n = raw.size();
  const auto bits = [&]() {
    uint64_t v = 0;
    std::memcpy(&v, raw.data(), n);
    return v;
  };
  if (kind == 'f' && n == 8) {
    double d;
    std::memcpy(&d, raw.data(), 8);
    return d;
  }
  if (kind == 'f' && n == 4) {
    float f;
    std::memcpy(&f, raw.data(), 4);
    return static_cast<double>(f);
  }
  if (kind == 'f' && n == 2) {
    return static_cast<double>(c10::Half(static_cast<uint16_t>(bits()), c10::Half::from_bits()));
  }
  if (kind == 'b' && n == 1) return raw[0] != 0;
  if ((kind == 'i' || kind == 'u') && (n == 1 || n == 2 || n == 4 || n == 8)) {
    uint64_t v = bits();
    if (kind == 'i' && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);
    XDINO_PICKLE_CHECK(kind == 'i' || n < 8 || (v >> 63) == 0, "numpy uint64 ", v,
                       " does not fit int64");
    return static_cast<int64_t>(v);
  }
  XDINO_PICKLE_CHECK(false, "numpy scalar of dtype '", descr, "' is not supported");
  return IValue();
}

// Protocol 2 carries bytes as _codecs.encode(text, 'latin1'): one code point per byte.
std::string PythonObjects::latin1_bytes(const std::string& utf8) const {
  std::string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<uint8_t>(utf8[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    XDINO_PICKLE_CHECK((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size(),
                       "latin-1 text holds a character above U+00FF");
    out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<uint8_t>(utf8[++i]) & 0x3F)));
  }
  return out;
}

}  // namespace xdino::pth
