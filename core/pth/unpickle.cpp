// The unpickler of load_pth: a pickle virtual machine over IValues. Python callables (GLOBAL)
// travel on the stack as their "module.name" string; REDUCE/NEWOBJ dispatch on that name.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "core/pth/objects.h"

namespace xdino::pth {
namespace {

using c10::IValue;

// "module.name" of a GLOBAL, with the Python 2 module names protocols < 3 write mapped to
// Python 3's, as pickle's fix_imports does.
std::string global_name(const std::string& module, const std::string& name) {
  if (module == "__builtin__") return "builtins." + name;
  if (module == "copy_reg") return "copyreg." + name;
  return module + "." + name;
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const StorageLoader& loader, const std::string& where)
      : data_(data), where_(where), objects_(loader, where, op_pos_) {}

  IValue run() {
    while (true) {
      op_pos_ = pos_;
      const uint8_t op = byte();
      if (op == '.') {
        XDINO_PICKLE_CHECK(!stack_.empty(), "STOP with an empty stack");
        return pop();
      }
      step(op);
    }
  }

 private:
  // ---- input ----
  uint8_t byte() {
    XDINO_PICKLE_CHECK(pos_ < data_.size(),
                       "the pickle ends before its STOP opcode (truncated data.pkl)");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  std::string_view take(uint64_t n) {
    XDINO_PICKLE_CHECK(n <= data_.size() - pos_, "the pickle ends inside an argument of ", n,
                       " bytes");
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
    XDINO_PICKLE_CHECK(end != std::string_view::npos, "unterminated text argument");
    std::string s(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  int64_t text_int(std::string s) {
    if (!s.empty() && s.back() == 'L') s.pop_back();
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    XDINO_PICKLE_CHECK(!s.empty() && *end == '\0' && errno == 0, "integer '", s,
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
        XDINO_PICKLE_CHECK(b == (negative ? 0xFF : 0x00), "integer of ", s.size(),
                           " bytes does not fit int64");
      }
    }
    XDINO_PICKLE_CHECK(s.size() <= 8 || bool(v >> 63) == negative, "integer of ", s.size(),
                       " bytes does not fit int64");
    return static_cast<int64_t>(v);
  }

  // ---- stack ----
  void push(IValue v) { stack_.push_back(std::move(v)); }
  IValue pop() {
    XDINO_PICKLE_CHECK(!stack_.empty() && (marks_.empty() || marks_.back() < stack_.size()),
                       "pop from an empty stack");
    IValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  IValue& top() {
    XDINO_PICKLE_CHECK(!stack_.empty(), "empty stack");
    return stack_.back();
  }
  std::vector<IValue> pop_mark() {
    XDINO_PICKLE_CHECK(!marks_.empty(), "no MARK on the stack");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<IValue> items(std::make_move_iterator(stack_.begin() + m),
                              std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  // ---- containers ----
  void append(IValue& target, IValue value) {
    XDINO_PICKLE_CHECK(target.isList(), "APPEND on a ", target.tagKind());
    target.toList().push_back(std::move(value));
  }
  void memo_put(uint64_t index) { memo_[index] = top(); }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    XDINO_PICKLE_CHECK(it != memo_.end(), "memo entry ", index, " is undefined");
    push(it->second);
  }

  void step(uint8_t op);

  std::string_view data_;
  const std::string& where_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  PythonObjects objects_;
  std::vector<IValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, IValue> memo_;
};

void Unpickler::step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      const int proto = byte();
      XDINO_PICKLE_CHECK(proto <= 5, "pickle protocol ", proto, " is newer than 5");
      break;
    }
    case 0x95:
      take(8);
      break;  // FRAME: framing only
    case '(':
      marks_.push_back(stack_.size());
      break;
    case '0':  // POP (of a MARK too, as Python does)
      if (!marks_.empty() && marks_.back() == stack_.size())
        marks_.pop_back();
      else
        pop();
      break;
    case '1':
      pop_mark();
      break;
    case '2':
      push(top());
      break;
    case 'N':
      push(IValue());
      break;
    case 0x88:
      push(true);
      break;
    case 0x89:
      push(false);
      break;
    case 'I': {
      const std::string s = line();
      if (s == "00" || s == "01")
        push(s == "01");
      else
        push(text_int(s));
      break;
    }
    case 'J':
      push(static_cast<int64_t>(static_cast<int32_t>(le(4))));
      break;
    case 'K':
      push(static_cast<int64_t>(le(1)));
      break;
    case 'M':
      push(static_cast<int64_t>(le(2)));
      break;
    case 'L':
      push(text_int(line()));
      break;
    case 0x8a:
      push(long_bytes(take(le(1))));
      break;
    case 0x8b:
      push(long_bytes(take(static_cast<int32_t>(le(4)))));
      break;
    case 'F':
      push(std::strtod(line().c_str(), nullptr));
      break;
    case 'G': {
      const uint64_t bits = __builtin_bswap64(le(8));
      double d;
      std::memcpy(&d, &bits, 8);
      push(d);
      break;
    }
    case 'V':
      push(line());
      break;  // raw-unicode-escape; ASCII in practice
    case 'T':
      push(std::string(take(static_cast<int32_t>(le(4)))));
      break;
    case 'U':
      push(std::string(take(le(1))));
      break;
    case 'X':
      push(std::string(take(le(4))));
      break;
    case 0x8c:
      push(std::string(take(le(1))));
      break;
    case 0x8d:
      push(std::string(take(le(8))));
      break;
    case 'B':
      push(std::string(take(le(4))));
      break;
    case 'C':
      push(std::string(take(le(1))));
      break;
    case 0x8e:
      push(std::string(take(le(8))));
      break;
    case 0x96:
      push(std::string(take(le(8))));
      break;
    case ')':
      push(make_tuple({}));
      break;
    case 't':
      push(make_tuple(pop_mark()));
      break;
    case 0x85:
    case 0x86:
    case 0x87: {
      std::vector<IValue> items(op - 0x84);
      for (size_t i = items.size(); i-- > 0;) items[i] = pop();
      push(make_tuple(std::move(items)));
      break;
    }
    case ']':
    case 0x8f:
      push(make_list());
      break;  // sets load as lists
    case 'l':
    case 0x91: {
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
    case 'e':
    case 0x90:
      for (IValue& v : pop_mark()) append(top(), std::move(v));
      break;
    case '}':
      push(make_any_dict());
      break;
    case 'd': {
      std::vector<IValue> items = pop_mark();
      XDINO_PICKLE_CHECK(items.size() % 2 == 0, "DICT with an odd number of items");
      IValue dict = make_any_dict();
      for (size_t i = 0; i < items.size(); i += 2) objects_.set_item(dict, items[i], items[i + 1]);
      push(dict);
      break;
    }
    case 's': {
      IValue value = pop();
      IValue key = pop();
      objects_.set_item(top(), std::move(key), std::move(value));
      break;
    }
    case 'u': {
      std::vector<IValue> items = pop_mark();
      XDINO_PICKLE_CHECK(items.size() % 2 == 0, "SETITEMS with an odd number of items");
      for (size_t i = 0; i < items.size(); i += 2) objects_.set_item(top(), items[i], items[i + 1]);
      break;
    }
    case 'c': {
      std::string module = line();
      push(global_name(module, line()));
      break;
    }
    case 0x93: {
      const std::string name = objects_.name_of(pop(), "STACK_GLOBAL's name");
      push(global_name(objects_.name_of(pop(), "STACK_GLOBAL's module"), name));
      break;
    }
    case 'R': {
      IValue args = pop();
      const std::string fn = objects_.name_of(pop(), "REDUCE's callable");
      push(objects_.call(fn, objects_.tuple_items(args, "REDUCE's arguments")));
      break;
    }
    case 'b': {
      IValue state = pop();
      objects_.build(top(), std::move(state));
      break;
    }
    case 0x81: {
      IValue args = pop();
      const std::string cls = objects_.name_of(pop(), "NEWOBJ's class");
      push(objects_.instance(cls, objects_.tuple_items(args, "NEWOBJ's arguments"), IValue()));
      break;
    }
    case 0x92: {
      IValue kwargs = pop();
      IValue args = pop();
      const std::string cls = objects_.name_of(pop(), "NEWOBJ_EX's class");
      push(objects_.instance(cls, objects_.tuple_items(args, "NEWOBJ_EX's arguments"),
                             std::move(kwargs)));
      break;
    }
    case 'i': {
      std::string module = line();
      const std::string cls = global_name(module, line());
      push(objects_.instance(cls, pop_mark(), IValue()));
      break;
    }
    case 'o': {
      std::vector<IValue> items = pop_mark();
      XDINO_PICKLE_CHECK(!items.empty(), "OBJ without a class");
      const std::string cls = objects_.name_of(items[0], "OBJ's class");
      push(objects_.instance(cls, std::vector<IValue>(items.begin() + 1, items.end()), IValue()));
      break;
    }
    case 'p':
      memo_put(static_cast<uint64_t>(text_int(line())));
      break;
    case 'q':
      memo_put(le(1));
      break;
    case 'r':
      memo_put(le(4));
      break;
    case 0x94:
      memo_put(memo_.size());
      break;
    case 'g':
      memo_get(static_cast<uint64_t>(text_int(line())));
      break;
    case 'h':
      memo_get(le(1));
      break;
    case 'j':
      memo_get(le(4));
      break;
    case 'Q': {
      IValue pid = pop();
      push(objects_.persistent(pid));
      break;
    }
    case 'P':
      XDINO_PICKLE_CHECK(false, "text persistent ids (protocol 0) are not torch.save's format");
      break;
    case 'S':
      XDINO_PICKLE_CHECK(false, "quoted text strings (protocol 0) are not supported; re-save with ",
                         "torch.save's default protocol");
      break;
    case 0x82:
    case 0x83:
    case 0x84:
      XDINO_PICKLE_CHECK(false, "copyreg extension codes are not supported");
      break;
    case 0x97:
    case 0x98:
      XDINO_PICKLE_CHECK(false,
                         "out-of-band buffers (protocol 5 buffer_callback) are not supported");
      break;
    default:
      XDINO_PICKLE_CHECK(false, "unknown opcode ", int(op),
                         " (not a pickle, or a damaged data.pkl)");
  }
}

}  // namespace

c10::IValue unpickle(std::string_view bytes, const StorageLoader& load_storage,
                     const std::string& where) {
  return Unpickler(bytes, load_storage, where).run();
}

}  // namespace xdino::pth
