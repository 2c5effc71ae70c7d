// The unpickler of load_pth: a pickle virtual machine over IValues. Python callables (GLOBAL)
// travel on the stack as their "module.name" string; REDUCE/NEWOBJ dispatch on that name.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/check.h"
#include "core/pth_pickle.h"

namespace xdino::pth {
namespace {

using c10::IValue;

#define PICKLE_CHECK(cond, ...) \
  XDINO_CHECK(cond, where_, ": pickle opcode at byte ", op_pos_, ": ", __VA_ARGS__)

IValue make_tuple(std::vector<IValue> items) { return c10::ivalue::Tuple::create(std::move(items)); }
c10::impl::GenericDict make_dict() {
  return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
}
c10::impl::GenericList make_list() { return c10::impl::GenericList(c10::AnyType::get()); }

std::optional<at::ScalarType> torch_dtype(const std::string& name) {
  static const std::unordered_map<std::string, at::ScalarType> kNames = {
      {"torch.float32", at::kFloat},   {"torch.float", at::kFloat},
      {"torch.float64", at::kDouble},  {"torch.double", at::kDouble},
      {"torch.float16", at::kHalf},    {"torch.half", at::kHalf},
      {"torch.bfloat16", at::kBFloat16}, {"torch.int64", at::kLong},
      {"torch.long", at::kLong},       {"torch.int32", at::kInt},
      {"torch.int", at::kInt},         {"torch.int16", at::kShort},
      {"torch.short", at::kShort},     {"torch.int8", at::kChar},
      {"torch.uint8", at::kByte},      {"torch.bool", at::kBool},
      {"torch.complex64", at::kComplexFloat}, {"torch.complex128", at::kComplexDouble}};
  const auto it = kNames.find(name);
  if (it == kNames.end()) return std::nullopt;
  return it->second;
}

// "module.name" of a GLOBAL, with the Python 2 module names protocols < 3 write mapped to
// Python 3's, as pickle's fix_imports does.
std::string global_name(const std::string& module, const std::string& name) {
  if (module == "__builtin__") return "builtins." + name;
  if (module == "copy_reg") return "copyreg." + name;
  return module + "." + name;
}

bool hashable_key(const IValue& v) {
  return v.isInt() || v.isString() || v.isDouble() || v.isBool() || v.isTensor();
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const StorageLoader& loader, const std::string& where)
      : data_(data), loader_(loader), where_(where) {}

  IValue run() {
    while (true) {
      op_pos_ = pos_;
      const uint8_t op = byte();
      if (op == '.') {
        PICKLE_CHECK(!stack_.empty(), "STOP with an empty stack");
        return pop();
      }
      step(op);
    }
  }

 private:
  // ---- input ----
  uint8_t byte() {
    PICKLE_CHECK(pos_ < data_.size(), "the pickle ends before its STOP opcode (truncated data.pkl)");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  std::string_view take(uint64_t n) {
    PICKLE_CHECK(n <= data_.size() - pos_, "the pickle ends inside an argument of ", n, " bytes");
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint64_t le(int bytes) {
    const std::string_view s = take(bytes);
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[i]);
    return v;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    PICKLE_CHECK(end != std::string_view::npos, "unterminated text argument");
    std::string s(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  int64_t text_int(std::string s) {
    if (!s.empty() && s.back() == 'L') s.pop_back();
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    PICKLE_CHECK(!s.empty() && *end == '\0' && errno == 0, "integer '", s,
                 "' is not an int64");
    return v;
  }
  // Little-endian two's complement of any length (LONG1/LONG4).
  int64_t long_bytes(std::string_view s) {
    if (s.empty()) return 0;
    const bool negative = static_cast<uint8_t>(s.back()) & 0x80;
    uint64_t v = negative ? ~uint64_t(0) : 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto b = static_cast<uint8_t>(s[i]);
      if (i < 8) {
        v = (v & ~(uint64_t(0xFF) << (8 * i))) | uint64_t(b) << (8 * i);
      } else {
        PICKLE_CHECK(b == (negative ? 0xFF : 0x00), "integer of ", s.size(),
                     " bytes does not fit int64");
      }
    }
    PICKLE_CHECK(s.size() <= 8 || bool(v >> 63) == negative, "integer of ", s.size(),
                 " bytes does not fit int64");
    return static_cast<int64_t>(v);
  }

  // ---- stack ----
  void push(IValue v) { stack_.push_back(std::move(v)); }
  IValue pop() {
    PICKLE_CHECK(!stack_.empty() && (marks_.empty() || marks_.back() < stack_.size()),
                 "pop from an empty stack");
    IValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  IValue& top() {
    PICKLE_CHECK(!stack_.empty(), "empty stack");
    return stack_.back();
  }
  std::vector<IValue> pop_mark() {
    PICKLE_CHECK(!marks_.empty(), "no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<IValue> items(std::make_move_iterator(stack_.begin() + m),
                              std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }
  std::vector<IValue> tuple_items(const IValue& v, const char* what) {
    PICKLE_CHECK(v.isTuple(), what, " must be a tuple, not ", v.tagKind());
    return v.toTupleRef().elements().vec();
  }
  std::string name_of(const IValue& v, const char* what) {
    PICKLE_CHECK(v.isString(), what, " must be a class or function, not ", v.tagKind());
    return v.toStringRef();
  }

  // ---- containers ----
  void set_item(IValue& target, IValue key, IValue value) {
    PICKLE_CHECK(target.isGenericDict(), "SETITEM on a ", target.tagKind());
    PICKLE_CHECK(hashable_key(key), "dict key of type ", key.tagKind(), " is not supported");
    target.toGenericDict().insert_or_assign(std::move(key), std::move(value));
  }
  void append(IValue& target, IValue value) {
    PICKLE_CHECK(target.isList(), "APPEND on a ", target.tagKind());
    target.toList().push_back(std::move(value));
  }
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    PICKLE_CHECK(it != memo_.end(), "memo entry ", index, " is undefined");
    push(it->second);
  }

  void step(uint8_t op);
  IValue call(const std::string& fn, std::vector<IValue> args);
  IValue new_object(const std::string& cls, std::vector<IValue> args, IValue kwargs);
  void build(IValue& target, IValue state);
  IValue persistent(const IValue& pid);
  IValue rebuild_tensor(const std::vector<IValue>& args, std::optional<at::ScalarType> dtype);
  IValue numpy_scalar(const std::vector<IValue>& args);
  std::string latin1_bytes(const std::string& utf8);

  std::string_view data_;
  const StorageLoader& loader_;
  const std::string& where_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  std::vector<IValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, IValue> memo_;
  std::unordered_map<std::string, at::Tensor> storages_;
  std::unordered_set<const void*> objects_;  // dicts standing for instances of Python classes
};

void Unpickler::step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      const int proto = byte();
      PICKLE_CHECK(proto <= 5, "pickle protocol ", proto, " is newer than 5");
      break;
    }
    case 0x95: take(8); break;  // FRAME: framing only
    case '(': marks_.push_back(stack_.size()); break;
    case '0':  // POP (of a MARK too, as Python does)
      if (!marks_.empty() && marks_.back() == stack_.size()) marks_.pop_back();
      else pop();
      break;
    case '1': pop_mark(); break;
    case '2': push(top()); break;
    case 'N': push(IValue()); break;
    case 0x88: push(true); break;
    case 0x89: push(false); break;
    case 'I': {
      const std::string s = line();
      if (s == "00" || s == "01") push(s == "01");
      else push(text_int(s));
      break;
    }
    case 'J': push(static_cast<int64_t>(static_cast<int32_t>(le(4)))); break;
    case 'K': push(static_cast<int64_t>(le(1))); break;
    case 'M': push(static_cast<int64_t>(le(2))); break;
    case 'L': push(text_int(line())); break;
    case 0x8a: push(long_bytes(take(le(1)))); break;
    case 0x8b: push(long_bytes(take(static_cast<int32_t>(le(4))))); break;
    case 'F': push(std::strtod(line().c_str(), nullptr)); break;
    case 'G': {
      const uint64_t bits = __builtin_bswap64(le(8));
      double d;
      std::memcpy(&d, &bits, 8);
      push(d);
      break;
    }
    case 'V': push(line()); break;  // raw-unicode-escape; ASCII in practice
    case 'T': push(std::string(take(static_cast<int32_t>(le(4))))); break;
    case 'U': push(std::string(take(le(1)))); break;
    case 'X': push(std::string(take(le(4)))); break;
    case 0x8c: push(std::string(take(le(1)))); break;
    case 0x8d: push(std::string(take(le(8)))); break;
    case 'B': push(std::string(take(le(4)))); break;
    case 'C': push(std::string(take(le(1)))); break;
    case 0x8e: push(std::string(take(le(8)))); break;
    case 0x96: push(std::string(take(le(8)))); break;
    case ')': push(make_tuple({})); break;
    case 't': push(make_tuple(pop_mark())); break;
    case 0x85: case 0x86: case 0x87: {
      std::vector<IValue> items(op - 0x84);
      for (size_t i = items.size(); i-- > 0;) items[i] = pop();
      push(make_tuple(std::move(items)));
      break;
    }
    case ']': case 0x8f: push(make_list()); break;  // sets load as lists
    case 'l': case 0x91: {
      auto list = make_list();
      for (IValue& v : pop_mark()) list.push_back(std::move(v));
      push(list);
      break;
    }
    case 'a': {
      IValue v = pop();
      append(top(), std::move(v));
      break;
    }
    case 'e': case 0x90:
      for (IValue& v : pop_mark()) append(top(), std::move(v));
      break;
    case '}': push(make_dict()); break;
    case 'd': {
      std::vector<IValue> items = pop_mark();
      PICKLE_CHECK(items.size() % 2 == 0, "DICT with an odd number of items");
      IValue dict = make_dict();
      for (size_t i = 0; i < items.size(); i += 2) set_item(dict, items[i], items[i + 1]);
      push(dict);
      break;
    }
    case 's': {
      IValue value = pop();
      IValue key = pop();
      set_item(top(), std::move(key), std::move(value));
      break;
    }
    case 'u': {
      std::vector<IValue> items = pop_mark();
      PICKLE_CHECK(items.size() % 2 == 0, "SETITEMS with an odd number of items");
      for (size_t i = 0; i < items.size(); i += 2) set_item(top(), items[i], items[i + 1]);
      break;
    }
    case 'c': {
      std::string module = line();
      push(global_name(module, line()));
      break;
    }
    case 0x93: {
      const std::string name = name_of(pop(), "STACK_GLOBAL's name");
      push(global_name(name_of(pop(), "STACK_GLOBAL's module"), name));
      break;
    }
    case 'R': {
      IValue args = pop();
      const std::string fn = name_of(pop(), "REDUCE's callable");
      push(call(fn, tuple_items(args, "REDUCE's arguments")));
      break;
    }
    case 'b': {
      IValue state = pop();
      build(top(), std::move(state));
      break;
    }
    case 0x81: {
      IValue args = pop();
      const std::string cls = name_of(pop(), "NEWOBJ's class");
      push(new_object(cls, tuple_items(args, "NEWOBJ's arguments"), IValue()));
      break;
    }
    case 0x92: {
      IValue kwargs = pop();
      IValue args = pop();
      const std::string cls = name_of(pop(), "NEWOBJ_EX's class");
      push(new_object(cls, tuple_items(args, "NEWOBJ_EX's arguments"), std::move(kwargs)));
      break;
    }
    case 'i': {
      std::string module = line();
      const std::string cls = global_name(module, line());
      push(new_object(cls, pop_mark(), IValue()));
      break;
    }
    case 'o': {
      std::vector<IValue> items = pop_mark();
      PICKLE_CHECK(!items.empty(), "OBJ without a class");
      const std::string cls = name_of(items[0], "OBJ's class");
      push(new_object(cls, std::vector<IValue>(items.begin() + 1, items.end()), IValue()));
      break;
    }
    case 'p': memo_put(static_cast<uint64_t>(text_int(line()))); break;
    case 'q': memo_put(le(1)); break;
    case 'r': memo_put(le(4)); break;
    case 0x94: memo_put(memo_.size()); break;
    case 'g': memo_get(static_cast<uint64_t>(text_int(line()))); break;
    case 'h': memo_get(le(1)); break;
    case 'j': memo_get(le(4)); break;
    case 'Q': {
      IValue pid = pop();
      push(persistent(pid));
      break;
    }
    case 'P':
      PICKLE_CHECK(false, "text persistent ids (protocol 0) are not torch.save's format");
      break;
    case 'S':
      PICKLE_CHECK(false, "quoted text strings (protocol 0) are not supported; re-save with ",
                   "torch.save's default protocol");
      break;
    case 0x82: case 0x83: case 0x84:
      PICKLE_CHECK(false, "copyreg extension codes are not supported");
      break;
    case 0x97: case 0x98:
      PICKLE_CHECK(false, "out-of-band buffers (protocol 5 buffer_callback) are not supported");
      break;
    default:
      PICKLE_CHECK(false, "unknown opcode ", int(op), " (not a pickle, or a damaged data.pkl)");
  }
}

IValue Unpickler::call(const std::string& fn, std::vector<IValue> args) {
  const auto arg = [&](size_t i) -> const IValue& {
    PICKLE_CHECK(i < args.size(), fn, " needs at least ", i + 1, " arguments, got ",
                 args.size());
    return args[i];
  };
  if (fn == "collections.OrderedDict") {
    IValue dict = make_dict();
    if (!args.empty() && args[0].isList())
      for (const IValue& pair : args[0].toListRef()) {
        const std::vector<IValue> kv = tuple_items(pair, "OrderedDict item");
        PICKLE_CHECK(kv.size() == 2, "OrderedDict item of size ", kv.size());
        set_item(dict, kv[0], kv[1]);
      }
    return dict;
  }
  if (fn == "torch._utils._rebuild_tensor" || fn == "torch._utils._rebuild_tensor_v2")
    return rebuild_tensor(args, std::nullopt);
  if (fn == "torch._utils._rebuild_tensor_v3") {
    const std::string dtype_name = name_of(arg(6), "_rebuild_tensor_v3's dtype");
    const auto dtype = torch_dtype(dtype_name);
    PICKLE_CHECK(dtype.has_value(), "tensor dtype ", dtype_name, " is not supported");
    return rebuild_tensor(args, dtype);
  }
  if (fn == "torch._utils._rebuild_parameter" ||
      fn == "torch._utils._rebuild_parameter_with_state") {
    PICKLE_CHECK(arg(0).isTensor() && arg(1).isBool(), fn, " expects (tensor, bool, ...)");
    at::Tensor t = arg(0).toTensor();
    if (arg(1).toBool() && t.is_floating_point()) t.set_requires_grad(true);
    return t;
  }
  if (fn == "torch._tensor._rebuild_from_type_v2" || fn == "torch._tensor._rebuild_from_type")
    return call(name_of(arg(0), "the rebuild function"), tuple_items(arg(2), "its arguments"));
  PICKLE_CHECK(fn.rfind("torch._utils._rebuild_", 0) != 0, "tensor kind ", fn,
               " (sparse, quantized, nested or device-only tensors) is not supported");
  if (fn == "numpy.core.multiarray.scalar" || fn == "numpy._core.multiarray.scalar")
    return numpy_scalar(args);
  if (fn == "_codecs.encode") {
    const std::string encoding = name_of(arg(1), "_codecs.encode's encoding");
    PICKLE_CHECK(encoding == "latin1" || encoding == "latin-1", "bytes in encoding ", encoding,
                 " are not supported");
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
    return new_object(name_of(arg(0), "copyreg._reconstructor's class"), {}, IValue());
  if (fn == "copyreg.__newobj__")
    return new_object(name_of(arg(0), "copyreg.__newobj__'s class"),
                      std::vector<IValue>(args.begin() + 1, args.end()), IValue());
  return new_object(fn, std::move(args), IValue());
}

IValue Unpickler::new_object(const std::string& cls, std::vector<IValue> args, IValue kwargs) {
  if (cls == "collections.OrderedDict") return make_dict();
  auto obj = make_dict();
  obj.insert(std::string("__class__"), cls);
  if (!args.empty()) obj.insert(std::string("__args__"), make_tuple(std::move(args)));
  if (kwargs.isGenericDict() && kwargs.toGenericDict().size() > 0)
    obj.insert(std::string("__kwargs__"), kwargs);
  IValue value(obj);
  objects_.insert(value.internalToPointer());
  return value;
}

void Unpickler::build(IValue& target, IValue state) {
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

IValue Unpickler::persistent(const IValue& pid) {
  const std::vector<IValue> id = tuple_items(pid, "a persistent id");
  PICKLE_CHECK(id.size() >= 5 && id[0].isString() && id[0].toStringRef() == "storage" &&
                   id[1].isString() && id[2].isString() && id[4].isInt(),
               "persistent id is not torch.save's ('storage', class, key, location, numel)");
  std::string cls = id[1].toStringRef();
  if (cls.rfind("torch.cuda.", 0) == 0) cls = "torch." + cls.substr(11);
  PICKLE_CHECK(cls.rfind("torch.", 0) == 0 && storage_dtype(cls.substr(6)).has_value(),
               "storage class ", cls, " is not supported");
  const at::ScalarType dtype = *storage_dtype(cls.substr(6));
  const std::string& key = id[2].toStringRef();
  const int64_t numel = id[4].toInt();
  PICKLE_CHECK(numel >= 0, "storage '", key, "' has a negative size");
  auto it = storages_.find(key);
  if (it == storages_.end()) it = storages_.emplace(key, loader_(key, dtype, numel)).first;
  const at::Tensor& storage = it->second;
  if (storage.scalar_type() == dtype) return storage;
  return at::empty({0}, storage.options().dtype(dtype))
      .set_(storage.storage(), 0, {int64_t(storage.storage().nbytes() / at::elementSize(dtype))},
            {1});
}

IValue Unpickler::rebuild_tensor(const std::vector<IValue>& args,
                                 std::optional<at::ScalarType> dtype) {
  PICKLE_CHECK(args.size() >= 4 && args[0].isTensor() && args[1].isInt(),
               "_rebuild_tensor expects (storage, offset, size, stride, ...)");
  const at::Tensor& storage = args[0].toTensor();
  const at::ScalarType type = dtype.value_or(storage.scalar_type());
  const int64_t offset = args[1].toInt();
  std::vector<int64_t> size, stride;
  for (const IValue& v : tuple_items(args[2], "tensor size")) {
    PICKLE_CHECK(v.isInt() && v.toInt() >= 0, "tensor size holds ", v.tagKind());
    size.push_back(v.toInt());
  }
  for (const IValue& v : tuple_items(args[3], "tensor stride")) {
    PICKLE_CHECK(v.isInt() && v.toInt() >= 0, "tensor stride holds ", v.tagKind());
    stride.push_back(v.toInt());
  }
  PICKLE_CHECK(size.size() == stride.size(), "tensor size and stride differ in length");
  // The view must lie inside the storage (set_ would otherwise grow it silently).
  int64_t extent = 1;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] == 0) extent = 0;
    if (extent > 0) extent += (size[d] - 1) * stride[d];
  }
  const int64_t capacity = int64_t(storage.storage().nbytes() / at::elementSize(type));
  PICKLE_CHECK(offset >= 0 && (extent == 0 || offset + extent <= capacity),
               "tensor of size ", c10::IntArrayRef(size), " at offset ", offset,
               " reaches past its storage of ", capacity, " elements");
  at::Tensor t =
      at::empty({0}, storage.options().dtype(type)).set_(storage.storage(), offset, size, stride);
  if (args.size() > 4 && args[4].isBool() && args[4].toBool() && t.is_floating_point())
    t.set_requires_grad(true);
  return t;
}

// numpy.core.multiarray.scalar(dtype, raw bytes): numpy scalars become int/double/bool.
IValue Unpickler::numpy_scalar(const std::vector<IValue>& args) {
  PICKLE_CHECK(args.size() == 2 && args[0].isGenericDict() && args[1].isString(),
               "numpy scalar expects (dtype, bytes)");
  const auto dtype = args[0].toGenericDict();
  const auto args_it = dtype.find(std::string("__args__"));
  PICKLE_CHECK(args_it != dtype.end() && args_it->value().isTuple() &&
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
  PICKLE_CHECK(descr.size() >= 2 && std::to_string(raw.size()) == descr.substr(1),
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
    PICKLE_CHECK(kind == 'i' || n < 8 || (v >> 63) == 0, "numpy uint64 ", v,
                 " does not fit int64");
    return static_cast<int64_t>(v);
  }
  PICKLE_CHECK(false, "numpy scalar of dtype '", descr, "' is not supported");
  return IValue();
}

// Protocol 2 carries bytes as _codecs.encode(text, 'latin1'): one code point per byte.
std::string Unpickler::latin1_bytes(const std::string& utf8) {
  std::string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<uint8_t>(utf8[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    PICKLE_CHECK((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size(),
                 "latin-1 text holds a character above U+00FF");
    out.push_back(static_cast<char>(((c & 0x03) << 6) | (static_cast<uint8_t>(utf8[++i]) & 0x3F)));
  }
  return out;
}

}  // namespace

c10::IValue unpickle(std::string_view bytes, const StorageLoader& load_storage,
                     const std::string& where) {
  return Unpickler(bytes, load_storage, where).run();
}

}  // namespace xdino::pth
