#include "core/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"

namespace xdino {
namespace {

namespace fs = std::filesystem;

// The reference reader's bound (safetensors' MAX_HEADER_SIZE): a header past it is refused
// before it is read.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DType {
  const char* name;
  torch::ScalarType type;
};
// In the order the reference writer lays tensors out (safetensors' Dtype enum, descending:
// the widest alignment first), which write_safetensors follows.
constexpr DType kDTypes[] = {{"I64", torch::kLong},      {"F64", torch::kDouble},
                             {"F32", torch::kFloat},     {"I32", torch::kInt},
                             {"BF16", torch::kBFloat16}, {"F16", torch::kHalf},
                             {"I16", torch::kShort},     {"I8", torch::kChar},
                             {"U8", torch::kByte},       {"BOOL", torch::kBool}};

size_t dtype_index(torch::ScalarType t) {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (kDTypes[i].type == t) return i;
  XDINO_FAIL("safetensors has no dtype for ", t);
}

// "4.0 TB", "1.5 GB", "12.0 MB".
std::string gigabytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  char text[32];
  if (b >= 1e12)
    std::snprintf(text, sizeof text, "%.1f TB", b / 1e12);
  else if (b >= 1e9)
    std::snprintf(text, sizeof text, "%.1f GB", b / 1e9);
  else
    std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  return text;
}

// Physical memory of this machine, in bytes (0: unknown).
uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// The first pass over a header's JSON (nlohmann's SAX interface): the first key that an
// object holds twice, and whether anything nests deeper than a safetensors header does (the
// top object, an entry, its shape or offsets: 3 levels; 4 are allowed). Stops at the first
// syntax error or at too deep a nesting.
struct HeaderShape : nlohmann::json_sax<nlohmann::json> {
  static constexpr size_t kMaxLevels = 4;
  std::vector<std::set<std::string>> keys;  // of each object open at the moment
  size_t levels = 0;
  bool too_deep = false;
  std::string duplicate;
  size_t duplicate_level = 0;  // 1: the top object (a tensor's name), 2: inside an entry

  bool open(bool object) {
    too_deep = ++levels > kMaxLevels;
    if (object) keys.emplace_back();
    return !too_deep;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(true); }
  bool key(string_t& k) override {
    if (!keys.back().insert(k).second && duplicate.empty()) {
      duplicate = k;
      duplicate_level = keys.size();
    }
    return true;
  }
  bool end_object() override {
    keys.pop_back();
    --levels;
    return true;
  }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override {
    --levels;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

// One entry of the header, checked.
struct Entry {
  std::string name;
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

}  // namespace

void write_safetensors(const fs::path& path, const TensorDict& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, torch::Tensor>> sorted;
  for (const auto& item : tensors) sorted.emplace_back(item.key(), item.value());
  // As safetensors.torch.save_file lays them out: by dtype (kDTypes' order), then by name.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    const size_t da = dtype_index(a.second.scalar_type()), db = dtype_index(b.second.scalar_type());
    return std::tie(da, a.first) < std::tie(db, b.first);
  });
  // The header's text entry by entry (an ordered_json object would insert by a linear
  // search: quadratic in the tensor count), in the reference's order and layout.
  std::string text = "{";
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    text += "\"__metadata__\":" + m.dump();
  }
  uint64_t offset = 0;
  for (auto& [name, t] : sorted) {
    XDINO_CHECK(t.defined(), "safetensors: tensor ", quote(name), " is undefined");
    t = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = t.nbytes();
    const Json entry{{"dtype", kDTypes[dtype_index(t.scalar_type())].name},
                     {"shape", t.sizes().vec()},
                     {"data_offsets", {offset, offset + bytes}}};
    text += (text.size() > 1 ? "," : "") + Json(name).dump() + ":" + entry.dump();
    offset += bytes;
  }
  text += "}";
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as Python's
  write_atomically(path, [&](const fs::path& tmp) {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    XDINO_CHECK(f != nullptr, "cannot create '", tmp.string(), "'");
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(text.size() >> (8 * i));
    bool ok = std::fwrite(length, 1, 8, f) == 8 &&
              std::fwrite(text.data(), 1, text.size(), f) == text.size();
    for (const auto& [name, t] : sorted)
      ok = ok && (t.nbytes() == 0 || std::fwrite(t.data_ptr(), 1, t.nbytes(), f) == t.nbytes());
    const int err = ok ? 0 : errno;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) throw_write_error(path, err != 0 ? err : errno);
  });
}

bool is_safetensors(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9];
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) return false;
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  const uint64_t n = read_u64_le(head);
  return !ec && head[8] == '{' && n >= 2 && n <= kMaxHeaderBytes && 8 + n <= size;
}

bool looks_like_pth(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  if (in.gcount() >= 1 && head[0] == 0x80) return true;  // a legacy torch.save pickle
  return in.gcount() == 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4;
}

namespace {

using Header = nlohmann::json;

// The header's bytes, after the checks of its 8-byte length against the file's size.
std::string read_header_text(std::istream& in, uint64_t size, const std::string& where) {
  unsigned char length[8];
  XDINO_CHECK_ARG(size >= 8 && in.read(reinterpret_cast<char*>(length), 8), where,
                  " is shorter than its 8-byte header length");
  const uint64_t n = read_u64_le(length);
  XDINO_CHECK_ARG(n >= 2, where, ": its header declares ", n,
                  " bytes, too few for the JSON object a safetensors header is");
  XDINO_CHECK_ARG(n <= kMaxHeaderBytes, where, ": its header declares ", n,
                  " bytes, more than the 100000000 a safetensors header may have");
  XDINO_CHECK_ARG(n <= size - 8, where, ": its header declares ", n, " bytes but the file has ",
                  size - 8, " after the length");
  std::string text(static_cast<size_t>(n), '\0');
  XDINO_CHECK(in.read(text.data(), static_cast<std::streamsize>(n)), "cannot read ", where);
  // The reference reader takes nothing before the '{' (not even white space).
  XDINO_CHECK_ARG(text[0] == '{', where, ": its header does not start with '{' (it starts with ",
                  quote(text.substr(0, 8)), "), so it is not a safetensors header");
  return text;
}

// The header: one JSON object, keys unique (nlohmann keeps the last of two silently), nested no
// deeper than a safetensors header. Checked by a first pass of SAX events, then parsed into
// nlohmann's std::map-backed json. Both passes are O(n log n) for n tensors: an ordered_json
// object inserts by a linear search, and the DOM parser with a callback scans its parent object
// again after each entry, so either made 300 000 tensors take minutes.
Header parse_header(const std::string& text, const std::string& where) {
  HeaderShape shape;
  if (!Header::sax_parse(text, &shape)) {
    if (!shape.too_deep) {
      try {
        const Header unreadable = Header::parse(text);  // throws, saying where and why
        (void)unreadable;
      } catch (const std::exception& e) {
        XDINO_FAIL_ARG(where, ": its header is not JSON (", e.what(), ")");
      }
    }
    XDINO_FAIL_ARG(where, ": its header nests deeper than a safetensors header does");
  }
  XDINO_CHECK_ARG(shape.duplicate.empty(), where, ": the header names ", quote(shape.duplicate),
                  " twice", shape.duplicate_level > 1 ? " in one entry" : "");
  Header header = Header::parse(text);
  XDINO_CHECK_ARG(header.is_object(), where, ": its header is not a JSON object");
  return header;
}

// One tensor's entry: a known dtype, a shape whose bytes fit in 64 bits, offsets that span them.
Entry parse_entry(const std::string& name, const Header& value, const std::string& where) {
  const std::string what = where + ": tensor " + quote(name);
  XDINO_CHECK_ARG(value.is_object() && value.contains("dtype") && value.contains("shape") &&
                      value.contains("data_offsets"),
                  what, " lacks dtype, shape or data_offsets");
  Entry e;
  e.name = name;
  const Header& dtype = value.at("dtype");
  XDINO_CHECK_ARG(dtype.is_string(), what, ": dtype is not a string");
  const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                  [&](const DType& d) { return dtype == d.name; });
  XDINO_CHECK_ARG(known != std::end(kDTypes), what, " has dtype ", dtype.dump(),
                  ", which this reader does not know (F64, F32, F16, BF16, I64, I32, I16, I8, "
                  "U8, BOOL)");
  e.type = known->type;
  const Header& shape = value.at("shape");
  XDINO_CHECK_ARG(shape.is_array() && shape.size() <= 16, what,
                  ": shape is not a list of at most 16 dimensions");
  uint64_t bytes = c10::elementSize(e.type);
  for (const Header& d : shape) {
    XDINO_CHECK_ARG(d.is_number_unsigned(), what, ": shape ", shape.dump(),
                    " holds a dimension that is not a non-negative integer");
    const uint64_t v = d.get<uint64_t>();
    XDINO_CHECK_ARG(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                        (v == 0 || bytes <= std::numeric_limits<uint64_t>::max() / v),
                    what, ": shape ", shape.dump(), " holds more bytes than any file");
    bytes *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }
  const Header& offsets = value.at("data_offsets");
  XDINO_CHECK_ARG(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                      offsets[1].is_number_unsigned(),
                  what, ": data_offsets ", offsets.dump(),
                  " is not a pair of non-negative integers");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  XDINO_CHECK_ARG(e.begin <= e.end && e.end - e.begin == bytes, what, ": data_offsets ",
                  offsets.dump(), " span ", e.end >= e.begin ? e.end - e.begin : 0,
                  " bytes, but its dtype and shape make ", bytes);
  return e;
}

// Sorts the entries into file order and checks that their spans tile the data's `data` bytes:
// no gap, no overlap, nothing past the end.
void check_tiling(std::vector<Entry>& entries, uint64_t data, const std::string& where) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t at = 0;
  for (const Entry& e : entries) {
    XDINO_CHECK_ARG(e.begin == at, where, ": tensor ", quote(e.name), " starts at byte ", e.begin,
                    " of the data, where ", at, " was expected (tensors overlap or leave a gap)");
    at = e.end;
  }
  XDINO_CHECK_ARG(at == data, where, ": its tensors end at byte ", at, " of the data, which has ",
                  data, " (a truncated or padded file)");
}

// The tensors, read in file order from `in`, which stands at the data's first byte.
void read_tensors(std::istream& in, const std::vector<Entry>& entries, uint64_t data,
                  const std::string& where, TensorDict& out) {
  // A sparse file can claim terabytes that it does not hold: refuse what no memory here holds,
  // naming the file, before allocating.
  const uint64_t memory = physical_memory();
  XDINO_CHECK(memory == 0 || data <= memory, where, " holds ", gigabytes(data),
              " of tensors, more than this machine's memory (", gigabytes(memory), ")");
  for (const Entry& e : entries) {
    torch::Tensor t;
    try {
      t = torch::empty(e.shape, torch::TensorOptions().dtype(e.type));
    } catch (const std::exception&) {
      XDINO_FAIL("cannot allocate ", gigabytes(e.end - e.begin), " for tensor ", quote(e.name),
                 " of ", where, ": not enough memory");
    }
    const auto bytes = static_cast<std::streamsize>(e.end - e.begin);
    XDINO_CHECK(bytes == 0 || in.read(static_cast<char*>(t.data_ptr()), bytes), "cannot read ",
                where, " (tensor ", quote(e.name), ")");
    XDINO_CHECK_ARG(!out.contains(e.name), where, ": the header names ", quote(e.name), " twice");
    out.insert(e.name, t);
  }
}

}  // namespace

Safetensors read_safetensors(const fs::path& path) {
  const std::string where = "safetensors file '" + path.string() + "'";
  std::ifstream in(path, std::ios::binary);
  XDINO_CHECK(in.good(), "cannot read ", where);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  XDINO_CHECK(!ec, "cannot read ", where, ": ", ec.message());
  const std::string text = read_header_text(in, size, where);
  const Header header = parse_header(text, where);

  Safetensors out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") {
      entries.push_back(parse_entry(name, value, where));
      continue;
    }
    XDINO_CHECK_ARG(value.is_object(), where, ": __metadata__ is not an object");
    for (const auto& [k, v] : value.items()) {
      XDINO_CHECK_ARG(v.is_string(), where, ": __metadata__ ", quote(k), " is not a string");
      out.metadata[k] = v.get<std::string>();
    }
  }
  const uint64_t data = size - 8 - text.size();
  check_tiling(entries, data, where);
  read_tensors(in, entries, data, where, out.tensors);
  return out;
}

}  // namespace xdino
