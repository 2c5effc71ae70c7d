#include "core/tensorboard.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"

namespace xdino::tensorboard {
namespace {

namespace fs = std::filesystem;

// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78), one table, byte at a time.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol buffers' wire format, the part the events use.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void key(std::string& out, int field, int wire) {
  varint(out, (static_cast<uint64_t>(field) << 3) | wire);
}
void bytes_field(std::string& out, int field, std::string_view value) {
  key(out, field, 2);
  varint(out, value.size());
  out.append(value);
}
template <typename T>
void fixed_field(std::string& out, int field, T value) {
  key(out, field, sizeof(T) == 8 ? 1 : 5);
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));  // little-endian, as the wire format is
  out.append(raw, sizeof(T));
}
void varint_field(std::string& out, int field, uint64_t value) {
  key(out, field, 0);
  varint(out, value);
}

std::string frame(const std::string& data) {
  std::string record;
  char length[8];
  const uint64_t n = data.size();
  std::memcpy(length, &n, 8);
  record.append(length, 8);
  const uint32_t length_crc = masked_crc32c(std::string_view(length, 8));
  record.append(reinterpret_cast<const char*>(&length_crc), 4);
  record += data;
  const uint32_t data_crc = masked_crc32c(data);
  record.append(reinterpret_cast<const char*>(&data_crc), 4);
  return record;
}

// A reader of the same subset, for prune_events: fields in order, wire types 0, 1, 2 and 5.
struct Fields {
  std::string_view in;
  size_t at = 0;
  bool next(int& field, int& wire, uint64_t& number, std::string_view& bytes) {
    if (at >= in.size()) return false;
    uint64_t k = 0;
    if (!read_varint(k)) return false;
    field = static_cast<int>(k >> 3);
    wire = static_cast<int>(k & 7);
    if (wire == 0) return read_varint(number);
    if (wire == 1 || wire == 5) {
      const size_t n = wire == 1 ? 8 : 4;
      if (in.size() - at < n) return false;
      at += n;
      return true;
    }
    if (wire != 2 || !read_varint(number) || number > in.size() - at) return false;
    bytes = in.substr(at, number);
    at += number;
    return true;
  }
  bool read_varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && at < in.size(); shift += 7) {
      const auto b = static_cast<unsigned char>(in[at++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
};

// The step and summary tag of one event ("" for the file_version event); nullopt: not one.
std::optional<std::pair<std::string, int64_t>> tag_and_step(std::string_view event) {
  Fields f{event};
  int field = 0, wire = 0;
  uint64_t number = 0;
  std::string_view bytes;
  int64_t step = 0;
  std::string tag;
  while (f.at < event.size()) {
    if (!f.next(field, wire, number, bytes)) return std::nullopt;
    if (field == 2 && wire == 0) step = static_cast<int64_t>(number);
    if (field != 5 || wire != 2) continue;
    Fields summary{bytes};
    while (summary.at < bytes.size()) {
      std::string_view value;
      if (!summary.next(field, wire, number, value)) return std::nullopt;
      if (field != 1 || wire != 2) continue;
      Fields v{value};
      std::string_view text;
      while (v.at < value.size()) {
        if (!v.next(field, wire, number, text)) return std::nullopt;
        if (field == 1 && wire == 2) tag = std::string(text);
      }
    }
  }
  return std::make_pair(tag, step);
}

std::atomic<int> g_files{0};

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (const char ch : data)
    c = crc_table()[(c ^ static_cast<unsigned char>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

EventWriter::EventWriter(const fs::path& dir) {
  fs::create_directories(dir);
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "localhost");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ =
      dir / ("events.out.tfevents." +
             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "." +
             host + "." + std::to_string(getpid()) + "." + std::to_string(g_files++) + kOwnSuffix);
  file_ = std::fopen(path_.c_str(), "ab");
  XDINO_CHECK(file_ != nullptr, "cannot create the TensorBoard file ", path_, ": ",
              std::strerror(errno));
  std::string version;
  bytes_field(version, 3, "brain.Event:2");
  write_event(version, 0);
}

EventWriter::~EventWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::write_event(const std::string& what, int64_t step) {
  std::string event;
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  fixed_field(event, 1, wall);
  varint_field(event, 2, static_cast<uint64_t>(step));
  event += what;
  const std::string record = frame(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    log::warn("could not write to the TensorBoard file ", path_.string(), ": ",
              std::strerror(errno));
}

void EventWriter::scalar(const std::string& tag, double value, int64_t step) {
  std::string v, summary, what;
  bytes_field(v, 1, tag);
  fixed_field(v, 2, static_cast<float>(value));
  bytes_field(summary, 1, v);
  bytes_field(what, 5, summary);
  write_event(what, step);
}

void EventWriter::image(const std::string& tag, std::string_view png, int width, int height,
                        int channels, int64_t step) {
  std::string img, v, summary, what;
  varint_field(img, 1, static_cast<uint64_t>(height));
  varint_field(img, 2, static_cast<uint64_t>(width));
  varint_field(img, 3, static_cast<uint64_t>(channels));
  bytes_field(img, 4, png);
  bytes_field(v, 1, tag);
  bytes_field(v, 4, img);
  bytes_field(summary, 1, v);
  bytes_field(what, 5, summary);
  write_event(what, step);
}

void EventWriter::flush() { std::fflush(file_); }

namespace {

uint32_t stored_crc(const std::string& data, size_t at) {
  uint32_t crc = 0;
  std::memcpy(&crc, data.data() + at, 4);
  return crc;
}

// What prune_events makes of one file: its records kept, or why it leaves the file alone.
struct Pruned {
  std::string kept;      // the records to keep, framing and all
  bool changed = false;  // some record was dropped (a pruned step, or a tail cut short)
  std::string foreign;   // non-empty: not a file this writer wrote; the reason
};

// Reads the records in order, each checked as the writer framed it: the length and its masked
// CRC-32C, then the event and its CRC. A file killed mid-write ends in a record cut short at
// any byte (its first 0..11 bytes, or fewer than its length says): that tail is dropped. Bytes
// that are not a prefix of a record (a wrong CRC, an event that does not parse), or a file whose
// very first record is not whole, are not this writer's to rewrite.
Pruned prune_records(const std::string& data,
                     const std::function<bool(const std::string& tag, int64_t step)>& keep) {
  Pruned p;
  for (size_t at = 0; at < data.size();) {
    const size_t left = data.size() - at;
    if (left < 12) {  // the length or its CRC cut short
      if (at == 0) p.foreign = "shorter than one record";
      p.changed = true;
      break;
    }
    uint64_t n = 0;
    std::memcpy(&n, data.data() + at, 8);
    if (stored_crc(data, at + 8) != masked_crc32c(std::string_view(data.data() + at, 8))) {
      p.foreign = "a record's length fails its CRC-32C at byte " + std::to_string(at);
      break;
    }
    if (n > left - 12 || left - 12 - n < 4) {  // the event or its CRC cut short
      if (at == 0) p.foreign = "its first record is cut short";
      p.changed = true;
      break;
    }
    const std::string_view event(data.data() + at + 12, n);
    if (stored_crc(data, at + 12 + n) != masked_crc32c(event)) {
      p.foreign = "a record fails its CRC-32C at byte " + std::to_string(at);
      break;
    }
    const auto parsed = tag_and_step(event);
    if (!parsed) {
      p.foreign = "a record at byte " + std::to_string(at) + " is not an event";
      break;
    }
    if (parsed->first.empty() || keep(parsed->first, parsed->second))
      p.kept.append(data, at, 16 + n);
    else
      p.changed = true;
    at += 16 + n;
  }
  return p;
}

}  // namespace

void prune_events(const fs::path& dir,
                  const std::function<bool(const std::string& tag, int64_t step)>& keep) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  const std::string suffix = kOwnSuffix;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name.rfind("events.out.tfevents.", 0) == 0 && name.size() > suffix.size() &&
                      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    // A link is not ours to replace with a file, a read-only file not ours to make writable
    // (by its mode: root may write anything).
    if (!ours || entry.is_symlink() || !entry.is_regular_file() ||
        (entry.status().permissions() & fs::perms::owner_write) == fs::perms::none)
      continue;
    const Pruned p = prune_records(read_file(entry.path()), keep);
    if (!p.foreign.empty()) {
      log::warn("left ", quote(entry.path().string()), " as it is: not an event file this ",
                "writer wrote (", p.foreign, ")");
      continue;
    }
    if (p.changed) write_file_atomically(entry.path(), p.kept);
  }
}

}  // namespace xdino::tensorboard
