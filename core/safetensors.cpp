#include "core/safetensors.h"

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
constexpr DType kDTypes[] = {{"F64", torch::kDouble}, {"F32", torch::kFloat},
                             {"F16", torch::kHalf},   {"BF16", torch::kBFloat16},
                             {"I64", torch::kLong},   {"I32", torch::kInt},
                             {"I16", torch::kShort},  {"I8", torch::kChar},
                             {"U8", torch::kByte},    {"BOOL", torch::kBool}};

const char* dtype_name(torch::ScalarType t) {
  for (const DType& d : kDTypes)
    if (d.type == t) return d.name;
  XDINO_FAIL("safetensors has no dtype for ", t);
}

uint64_t read_u64_le(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

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
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (auto& [name, t] : sorted) {
    XDINO_CHECK(t.defined(), "safetensors: tensor '", name, "' is undefined");
    t = t.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = t.nbytes();
    header[name] = Json{{"dtype", dtype_name(t.scalar_type())},
                        {"shape", t.sizes().vec()},
                        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
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

Safetensors read_safetensors(const fs::path& path) {
  const std::string where = "safetensors file '" + path.string() + "'";
  std::ifstream in(path, std::ios::binary);
  XDINO_CHECK(in.good(), "cannot read ", where);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  XDINO_CHECK(!ec, "cannot read ", where, ": ", ec.message());
  unsigned char length[8];
  XDINO_CHECK_ARG(size >= 8 && in.read(reinterpret_cast<char*>(length), 8), where,
                  " is shorter than its 8-byte header length");
  const uint64_t n = read_u64_le(length);
  XDINO_CHECK_ARG(n <= kMaxHeaderBytes, where, ": its header declares ", n,
                  " bytes, more than the 100000000 a safetensors header may have");
  XDINO_CHECK_ARG(n <= size - 8, where, ": its header declares ", n, " bytes but the file has ",
                  size - 8, " after the length");
  std::string text(static_cast<size_t>(n), '\0');
  XDINO_CHECK(in.read(text.data(), static_cast<std::streamsize>(n)), "cannot read ", where);

  // The header: one JSON object, keys unique (nlohmann would keep the last of two silently).
  std::set<std::string> keys;
  std::string duplicate;
  const auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > 3 &&
        (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start))
      XDINO_FAIL_ARG(where, ": its header nests deeper than a safetensors header does");
    if (event == Json::parse_event_t::key && depth == 1 &&
        !keys.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, callback);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    XDINO_FAIL_ARG(where, ": its header is not JSON (", e.what(), ")");
  }
  XDINO_CHECK_ARG(header.is_object(), where, ": its header is not a JSON object");
  XDINO_CHECK_ARG(duplicate.empty(), where, ": the header names '", duplicate, "' twice");

  Safetensors out;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      XDINO_CHECK_ARG(value.is_object(), where, ": __metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        XDINO_CHECK_ARG(v.is_string(), where, ": __metadata__ '", k, "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string what = where + ": tensor '" + name + "'";
    XDINO_CHECK_ARG(value.is_object() && value.contains("dtype") && value.contains("shape") &&
                        value.contains("data_offsets"),
                    what, " lacks dtype, shape or data_offsets");
    Entry e;
    e.name = name;
    const Json& dtype = value.at("dtype");
    XDINO_CHECK_ARG(dtype.is_string(), what, ": dtype is not a string");
    const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                    [&](const DType& d) { return dtype == d.name; });
    XDINO_CHECK_ARG(known != std::end(kDTypes), what, " has dtype ", dtype.dump(),
                    ", which this reader does not know (F64, F32, F16, BF16, I64, I32, I16, I8, "
                    "U8, BOOL)");
    e.type = known->type;
    const Json& shape = value.at("shape");
    XDINO_CHECK_ARG(shape.is_array() && shape.size() <= 16, what,
                    ": shape is not a list of at "
                    "most 16 dimensions");
    uint64_t bytes = c10::elementSize(e.type);
    for (const Json& d : shape) {
      XDINO_CHECK_ARG(d.is_number_unsigned(), what, ": shape ", shape.dump(),
                      " holds a dimension that is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      XDINO_CHECK_ARG(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                          (v == 0 || bytes <= std::numeric_limits<uint64_t>::max() / v),
                      what, ": shape ", shape.dump(), " holds more bytes than any file");
      bytes *= v;
      e.shape.push_back(static_cast<int64_t>(v));
    }
    const Json& offsets = value.at("data_offsets");
    XDINO_CHECK_ARG(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                        offsets[1].is_number_unsigned(),
                    what, ": data_offsets ", offsets.dump(),
                    " is not a pair of non-negative integers");
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    XDINO_CHECK_ARG(e.begin <= e.end && e.end - e.begin == bytes, what, ": data_offsets ",
                    offsets.dump(), " span ", e.end >= e.begin ? e.end - e.begin : 0,
                    " bytes, but its dtype and shape make ", bytes);
    entries.push_back(std::move(e));
  }
  // The spans tile the data, in file order: no gap, no overlap, nothing past the end.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  const uint64_t data = size - 8 - n;
  uint64_t at = 0;
  for (const Entry& e : entries) {
    XDINO_CHECK_ARG(e.begin == at, where, ": tensor '", e.name, "' starts at byte ", e.begin,
                    " of the data, where ", at, " was expected (tensors overlap or leave a gap)");
    at = e.end;
  }
  XDINO_CHECK_ARG(at == data, where, ": its tensors end at byte ", at, " of the data, which has ",
                  data, " (a truncated or padded file)");
  for (const Entry& e : entries) {
    torch::Tensor t = torch::empty(e.shape, torch::TensorOptions().dtype(e.type));
    const auto bytes = static_cast<std::streamsize>(e.end - e.begin);
    XDINO_CHECK(bytes == 0 || in.read(static_cast<char*>(t.data_ptr()), bytes), "cannot read ",
                where, " (tensor '", e.name, "')");
    XDINO_CHECK_ARG(!out.tensors.contains(e.name), where, ": the header names '", e.name,
                    "' twice");
    out.tensors.insert(e.name, t);
  }
  return out;
}

}  // namespace xdino
