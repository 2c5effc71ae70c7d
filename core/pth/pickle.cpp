// The pickler of save_pth: protocol 2, the opcodes Python's pickle emits for the same values.
#include "core/pth/pickle.h"

#include <ATen/ATen.h>

#include <cstring>
#include <unordered_map>

#include "core/check.h"

namespace xdino::pth {
namespace {

using c10::IValue;

constexpr int kMaxDepth = 512;
constexpr size_t kBatch = 1000;  // pickle's batch size for APPENDS/SETITEMS

struct StorageName {
  at::ScalarType dtype;
  const char* name;
};
constexpr StorageName kStorages[] = {{at::kFloat, "FloatStorage"},
                                     {at::kDouble, "DoubleStorage"},
                                     {at::kHalf, "HalfStorage"},
                                     {at::kBFloat16, "BFloat16Storage"},
                                     {at::kLong, "LongStorage"},
                                     {at::kInt, "IntStorage"},
                                     {at::kShort, "ShortStorage"},
                                     {at::kChar, "CharStorage"},
                                     {at::kByte, "ByteStorage"},
                                     {at::kBool, "BoolStorage"},
                                     {at::kComplexFloat, "ComplexFloatStorage"},
                                     {at::kComplexDouble, "ComplexDoubleStorage"}};

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<uint8_t>(s[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 0;
    if (n == 0 || i + n > s.size() || (n == 2 && c < 0xC2)) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<uint8_t>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

class Pickler {
 public:
  explicit Pickler(const std::string& where) : where_(where) {}

  Pickled run(const IValue& value) {
    op(0x80);
    op(2);
    write(value, 0);
    op('.');
    return std::move(out_);
  }

 private:
  void op(uint8_t code) { out_.bytes.push_back(static_cast<char>(code)); }
  void raw(const void* data, size_t n) { out_.bytes.append(static_cast<const char*>(data), n); }
  void le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) op(static_cast<uint8_t>(v >> (8 * i)));
  }

  void memo_put() {
    const uint32_t index = next_memo_++;
    if (index < 256) {
      op('q');
      le(index, 1);
    } else {
      op('r');
      le(index, 4);
    }
  }
  void memo_get(uint32_t index) {
    if (index < 256) {
      op('h');
      le(index, 1);
    } else {
      op('j');
      le(index, 4);
    }
  }

  void global(const std::string& module, const std::string& name) {
    const std::string key = module + "\n" + name + "\n";
    const auto it = globals_.find(key);
    if (it != globals_.end()) return memo_get(it->second);
    op('c');
    raw(key.data(), key.size());
    globals_[key] = next_memo_;
    memo_put();
  }

  void integer(int64_t v) {
    if (v >= 0 && v <= 0xFF) {
      op('K');
      le(uint64_t(v), 1);
    } else if (v >= 0 && v <= 0xFFFF) {
      op('M');
      le(uint64_t(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {  // LONG1: shortest little-endian two's complement
      int n = 8;
      const auto u = static_cast<uint64_t>(v);
      while (n > 1) {
        const uint8_t last = uint8_t(u >> (8 * (n - 1))), prev = uint8_t(u >> (8 * (n - 2)));
        if ((last == 0x00 && !(prev & 0x80)) || (last == 0xFF && (prev & 0x80)))
          --n;
        else
          break;
      }
      op(0x8a);
      le(uint64_t(n), 1);
      le(u, n);
    }
  }

  void floating(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    op('G');
    bits = __builtin_bswap64(bits);
    raw(&bits, 8);
  }

  void text(const std::string& s) {
    if (!valid_utf8(s)) {  // bytes, as protocol 2 writes them: _codecs.encode(latin-1 text)
      std::string latin;
      for (const char ch : s) {
        const auto c = static_cast<uint8_t>(ch);
        if (c < 0x80) {
          latin.push_back(ch);
        } else {
          latin.push_back(static_cast<char>(0xC0 | (c >> 6)));
          latin.push_back(static_cast<char>(0x80 | (c & 0x3F)));
        }
      }
      global("_codecs", "encode");
      text(latin);
      text("latin1");
      op(0x86);  // TUPLE2
      op('R');
      return;
    }
    op('X');
    le(s.size(), 4);
    raw(s.data(), s.size());
  }

  void int_tuple(c10::IntArrayRef values) {
    if (values.empty()) return op(')');
    if (values.size() > 3) op('(');
    for (const int64_t v : values) integer(v);
    op(values.size() > 3 ? 't' : static_cast<uint8_t>(0x84 + values.size()));
  }

  void tensor(const at::Tensor& t) {
    const auto seen = tensors_.find(t.unsafeGetTensorImpl());
    if (seen != tensors_.end()) return memo_get(seen->second);
    XDINO_CHECK(t.layout() == at::kStrided && !t.is_quantized() && !t.is_conj() && !t.is_neg(),
                "cannot save ", where_, ": only dense tensors can be saved, got a ", t.layout(),
                " tensor",
                t.is_conj() || t.is_neg() ? " with a conj/neg bit (call resolve_conj())" : "");
    const std::string cls = storage_class(t.scalar_type());
    XDINO_CHECK(!cls.empty(), "cannot save ", where_, ": tensors of dtype ", t.scalar_type(),
                " have no torch.save storage type");
    const c10::Storage& storage = t.storage();
    const size_t element = t.element_size();
    auto& slot = storage_keys_[storage.unsafeGetStorageImpl()];
    if (slot.first.empty()) {
      slot = {std::to_string(out_.storages.size()), t.scalar_type()};
      const int64_t numel = int64_t(storage.nbytes() / element);
      out_.storages.push_back(
          {slot.first,
           at::empty({0}, t.options().requires_grad(false)).set_(storage, 0, {numel}, {1})});
    }
    XDINO_CHECK(slot.second == t.scalar_type(), "cannot save ", where_,
                ": two tensors view one storage as ", slot.second, " and ", t.scalar_type(),
                " (torch.load cannot restore that); clone one of them");

    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');
    text("storage");
    global("torch", cls);
    text(slot.first);
    text("cpu");  // written from host memory; torch.load puts it on the CPU
    integer(int64_t(storage.nbytes() / element));
    op('t');
    op('Q');  // BINPERSID
    integer(t.storage_offset());
    int_tuple(t.sizes());
    int_tuple(t.strides());
    op(t.requires_grad() ? 0x88 : 0x89);
    global("collections", "OrderedDict");  // backward hooks, always empty
    op(')');
    op('R');
    op('t');
    op('R');
    tensors_[t.unsafeGetTensorImpl()] = next_memo_;
    memo_put();
  }

  void object(const c10::impl::GenericDict& dict, const std::string& cls, int depth) {
    const size_t dot = cls.rfind('.');
    XDINO_CHECK(dot != std::string::npos && dot > 0 && dot + 1 < cls.size() &&
                    cls.find('\n') == std::string::npos,
                "cannot save ", where_, ": \"__class__\" '", cls, "' is not module.Name");
    XDINO_CHECK(!dict.contains(std::string("__kwargs__")), "cannot save ", where_,
                ": objects with \"__kwargs__\" are not supported");
    global(cls.substr(0, dot), cls.substr(dot + 1));
    const auto args = dict.find(std::string("__args__"));
    if (args != dict.end()) {
      write(args->value(), depth + 1);
      op('R');
    } else {
      op(')');
      op(0x81);  // NEWOBJ
    }
    const auto state = dict.find(std::string("__state__"));
    if (state != dict.end()) {
      write(state->value(), depth + 1);
      op('b');
      return;
    }
    auto attrs = c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
    for (const auto& item : dict) {
      const IValue& k = item.key();
      if (k.isString() && (k.toStringRef() == "__class__" || k.toStringRef() == "__args__"))
        continue;
      attrs.insert(k, item.value());
    }
    if (attrs.size() == 0) return;
    write(attrs, depth + 1);
    op('b');
  }

  void write(const IValue& v, int depth) {
    XDINO_CHECK(depth < kMaxDepth, "cannot save ", where_, ": values nest deeper than ", kMaxDepth,
                " levels (a container holding itself?)");
    if (v.isNone()) return op('N');
    if (v.isBool()) return op(v.toBool() ? 0x88 : 0x89);
    if (v.isInt()) return integer(v.toInt());
    if (v.isDouble()) return floating(v.toDouble());
    if (v.isString()) return text(v.toStringRef());
    if (v.isDevice()) return text(v.toDevice().str());
    if (v.isTensor()) {
      if (!v.toTensor().defined()) return op('N');
      return tensor(v.toTensor());
    }
    if (v.isTuple()) {
      const auto& items = v.toTupleRef().elements();
      if (items.empty()) return op(')');
      if (items.size() > 3) op('(');
      for (const IValue& item : items) write(item, depth + 1);
      return op(items.size() > 3 ? 't' : static_cast<uint8_t>(0x84 + items.size()));
    }
    if (v.isList()) {
      const c10::ArrayRef<IValue> items = v.toListRef();
      op(']');
      for (size_t i = 0; i < items.size(); i += kBatch) {
        const size_t n = std::min(kBatch, items.size() - i);
        if (n > 1) op('(');
        for (size_t k = i; k < i + n; ++k) write(items[k], depth + 1);
        op(n > 1 ? 'e' : 'a');
      }
      return;
    }
    if (v.isGenericDict()) {
      const auto dict = v.toGenericDict();
      if (dict.size() > 0) {
        const IValue& first = dict.begin()->key();
        if (first.isString() && first.toStringRef() == "__class__" &&
            dict.begin()->value().isString())
          return object(dict, dict.begin()->value().toStringRef(), depth);
      }
      op('}');
      auto it = dict.begin();
      for (size_t i = 0; i < dict.size(); i += kBatch) {
        const size_t n = std::min(kBatch, dict.size() - i);
        if (n > 1) op('(');
        for (size_t k = 0; k < n; ++k, ++it) {
          write(it->key(), depth + 1);
          write(it->value(), depth + 1);
        }
        op(n > 1 ? 'u' : 's');
      }
      return;
    }
    XDINO_FAIL("cannot save ", where_, ": values of kind ", v.tagKind(),
               " have no Python equivalent");
  }

  const std::string& where_;
  Pickled out_;
  uint32_t next_memo_ = 0;
  std::unordered_map<std::string, uint32_t> globals_;
  std::unordered_map<const c10::TensorImpl*, uint32_t> tensors_;
  std::unordered_map<const c10::StorageImpl*, std::pair<std::string, at::ScalarType>> storage_keys_;
};

}  // namespace

std::string storage_class(at::ScalarType dtype) {
  for (const StorageName& s : kStorages)
    if (s.dtype == dtype) return s.name;
  return "";
}

std::optional<at::ScalarType> storage_dtype(std::string_view class_name) {
  if (class_name == "UntypedStorage") return at::kByte;
  for (const StorageName& s : kStorages)
    if (class_name == s.name) return s.dtype;
  return std::nullopt;
}

Pickled pickle(const c10::IValue& value, const std::string& where) {
  return Pickler(where).run(value);
}

}  // namespace xdino::pth
