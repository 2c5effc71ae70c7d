// The unpickler of load_pth: a pickle virtual machine over IValues. Python callables (GLOBAL)
// travel on the stack as their "module.name" string; REDUCE/NEWOBJ dispatch on that name.
//
// The machine itself is a loop, but what it builds is walked recursively afterwards: LibTorch
// destroys a nested c10::List by recursion, and so do our readers of the result. A pickle of
// 10^6 nested lists is 2 MB and would exhaust the stack, so the nesting of every container is
// counted as it is built and bounded by kMaxNesting (Nesting, below).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

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

// Real checkpoints, official ones included, nest fewer than 20 levels; a test loads 50.
constexpr int kMaxNesting = 256;

// The nesting depth of every container the pickle builds (a scalar, string or tensor: 0; a
// container: 1 + its deepest element). Exact because a container may not change once it is
// nested in another: Python's pickler finishes each object (its items, its BUILD state)
// before it saves the parent, so only recursive or aliased structures, which torch.save does
// not write, are refused by that rule. Every container stays referenced until the end, so
// that no address is reused by another while it is a key here.
class Nesting {
 public:
  Nesting(const std::string& where, const size_t& op_pos) : where_(where), op_pos_(op_pos) {}

  // `child` goes into a container: from now on it may not change. Returns its depth.
  int nest(const IValue& child) {
    const auto it = depth_.find(key(child));
    if (it == depth_.end()) return 0;
    sealed_.insert(it->first);
    return it->second;
  }
  // A new container whose deepest element has depth `inner` (unless it is one already known,
  // as when a callable returns one of its arguments).
  void made(const IValue& container, int inner) {
    if (key(container) == nullptr || depth_.count(key(container))) return;
    alive_.push_back(container);
    set(container, inner + 1);
  }
  // `target` is about to change (APPEND, SETITEM, BUILD).
  void check_mutable(const IValue& target, const IValue& incoming) const {
    XDINO_PICKLE_CHECK(
        sealed_.count(key(target)) == 0 && (key(target) == nullptr || key(target) != key(incoming)),
        "a container is changed after it was nested in another (a recursive or "
        "shared structure, which torch.save does not write)");
  }
  // `target` gained an element of depth `inner`.
  void grew(const IValue& target, int inner) {
    const auto it = depth_.find(key(target));
    if (it != depth_.end() && inner + 1 > it->second) set(target, inner + 1);
  }

 private:
  static const void* key(const IValue& v) {
    return v.isList() || v.isTuple() || v.isGenericDict() || v.isObject() ? v.internalToPointer()
                                                                          : nullptr;
  }
  void set(const IValue& container, int depth) {
    XDINO_PICKLE_CHECK(depth <= kMaxNesting, "containers nest deeper than ", kMaxNesting,
                       " levels (torch.save's checkpoints nest fewer than 20): refused before "
                       "reading it could exhaust the stack");
    depth_[key(container)] = depth;
  }

  const std::string& where_;
  const size_t& op_pos_;
  std::unordered_map<const void*, int> depth_;
  std::unordered_set<const void*> sealed_;
  std::vector<IValue> alive_;
};

class Unpickler {
 public:
  Unpickler(std::string_view data, const StorageLoader& loader, const std::string& where)
      : data_(data), where_(where), objects_(loader, where, op_pos_), nesting_(where, op_pos_) {}

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
  // New containers from the stack's items, their nesting counted.
  IValue new_tuple(std::vector<IValue> items) {
    const int inner = nest_all(items);
    IValue tuple = make_tuple(std::move(items));
    nesting_.made(tuple, inner);
    return tuple;
  }
  IValue new_list(std::vector<IValue> items) {
    const int inner = nest_all(items);
    auto list = make_list();
    for (IValue& v : items) list.push_back(std::move(v));
    IValue value(list);
    nesting_.made(value, inner);
    return value;
  }
  IValue new_dict(std::vector<IValue> items) {
    XDINO_PICKLE_CHECK(items.size() % 2 == 0, "DICT with an odd number of items");
    const int inner = nest_all(items);
    IValue dict = make_any_dict();
    nesting_.made(dict, 0);
    for (size_t i = 0; i < items.size(); i += 2) objects_.set_item(dict, items[i], items[i + 1]);
    nesting_.grew(dict, inner);
    return dict;
  }
  int nest_all(const std::vector<IValue>& items) {
    int inner = 0;
    for (const IValue& v : items) inner = std::max(inner, nesting_.nest(v));
    return inner;
  }
  // What a callable (REDUCE, NEWOBJ, ...) made of its arguments: a container counts as one
  // level above them.
  IValue made_from(IValue result, int inner) {
    nesting_.made(result, inner);
    return result;
  }
  void append(IValue& target, IValue value) {
    XDINO_PICKLE_CHECK(target.isList(), "APPEND on a ", target.tagKind());
    nesting_.check_mutable(target, value);
    nesting_.grew(target, nesting_.nest(value));
    target.toList().push_back(std::move(value));
  }
  void set_item(IValue& target, IValue key, IValue value) {
    nesting_.check_mutable(target, value);
    nesting_.check_mutable(target, key);
    nesting_.grew(target, std::max(nesting_.nest(key), nesting_.nest(value)));
    objects_.set_item(target, std::move(key), std::move(value));
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
  Nesting nesting_;
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
      push(new_tuple({}));
      break;
    case 't':
      push(new_tuple(pop_mark()));
      break;
    case 0x85:
    case 0x86:
    case 0x87: {
      std::vector<IValue> items(op - 0x84);
      for (size_t i = items.size(); i-- > 0;) items[i] = pop();
      push(new_tuple(std::move(items)));
      break;
    }
    case ']':
    case 0x8f:
      push(new_list({}));
      break;  // sets load as lists
    case 'l':
    case 0x91:
      push(new_list(pop_mark()));
      break;
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
      push(new_dict({}));
      break;
    case 'd':
      push(new_dict(pop_mark()));
      break;
    case 's': {
      IValue value = pop();
      IValue key = pop();
      set_item(top(), std::move(key), std::move(value));
      break;
    }
    case 'u': {
      std::vector<IValue> items = pop_mark();
      XDINO_PICKLE_CHECK(items.size() % 2 == 0, "SETITEMS with an odd number of items");
      for (size_t i = 0; i < items.size(); i += 2) set_item(top(), items[i], items[i + 1]);
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
      const int inner = nesting_.nest(args);
      push(made_from(objects_.call(fn, objects_.tuple_items(args, "REDUCE's arguments")), inner));
      break;
    }
    case 'b': {
      IValue state = pop();
      nesting_.check_mutable(top(), state);
      nesting_.grew(top(), nesting_.nest(state));
      objects_.build(top(), std::move(state));
      break;
    }
    case 0x81: {
      IValue args = pop();
      const std::string cls = objects_.name_of(pop(), "NEWOBJ's class");
      const int inner = nesting_.nest(args) + 1;  // the arguments are kept in a tuple
      push(made_from(
          objects_.instance(cls, objects_.tuple_items(args, "NEWOBJ's arguments"), IValue()),
          inner));
      break;
    }
    case 0x92: {
      IValue kwargs = pop();
      IValue args = pop();
      const std::string cls = objects_.name_of(pop(), "NEWOBJ_EX's class");
      const int inner = std::max(nesting_.nest(args) + 1, nesting_.nest(kwargs));
      push(made_from(objects_.instance(cls, objects_.tuple_items(args, "NEWOBJ_EX's arguments"),
                                       std::move(kwargs)),
                     inner));
      break;
    }
    case 'i': {
      std::string module = line();
      const std::string cls = global_name(module, line());
      std::vector<IValue> items = pop_mark();
      const int inner = nest_all(items) + 1;
      push(made_from(objects_.instance(cls, std::move(items), IValue()), inner));
      break;
    }
    case 'o': {
      std::vector<IValue> items = pop_mark();
      XDINO_PICKLE_CHECK(!items.empty(), "OBJ without a class");
      const std::string cls = objects_.name_of(items[0], "OBJ's class");
      const int inner = nest_all(items) + 1;
      push(made_from(
          objects_.instance(cls, std::vector<IValue>(items.begin() + 1, items.end()), IValue()),
          inner));
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
