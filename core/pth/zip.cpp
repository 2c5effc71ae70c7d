#include "core/pth/zip.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/check.h"

namespace xdino::pth {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kLocator64Sig = 0x07064b50;
constexpr uint32_t k32 = 0xFFFFFFFFu;
constexpr uint16_t kZip64FieldId = 0x0001;

uint32_t load_le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t get16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t get32(const unsigned char* p) { return load_le32(p); }
uint64_t get64(const unsigned char* p) { return get32(p) | uint64_t(get32(p + 4)) << 32; }

std::string quote(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

}  // namespace

// ------------------------------------ reader ------------------------------------

ZipReader::ZipReader(const std::filesystem::path& path) : where_(quote(path)) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  XDINO_CHECK(fd_ >= 0, "cannot open ", where_, ": ", std::strerror(errno));
  struct stat st = {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    XDINO_FAIL("cannot read ", where_, ": not a regular file");
  }
  file_size_ = static_cast<uint64_t>(st.st_size);
  try {
    read_directory();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ZipReader::~ZipReader() {
  if (fd_ >= 0) ::close(fd_);
}

void ZipReader::read_at(uint64_t offset, void* dst, uint64_t size, const char* what) const {
  XDINO_CHECK(offset <= file_size_ && size <= file_size_ - offset, where_,
              " is truncated or damaged: ", what, " needs bytes ", offset, "..", offset + size,
              " but the file has ", file_size_, " bytes");
  auto* out = static_cast<char*>(dst);
  while (size > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(size, 1u << 30));
    const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    XDINO_CHECK(got > 0, "cannot read ", where_, " (", what,
                "): ", got < 0 ? std::strerror(errno) : "unexpected end of file");
    out += got;
    offset += static_cast<uint64_t>(got);
    size -= static_cast<uint64_t>(got);
  }
}

void ZipReader::read_directory() {
  XDINO_CHECK(file_size_ >= 22, where_, " is not a torch.save file: it has only ", file_size_,
              " bytes");
  const uint64_t tail_size = std::min<uint64_t>(file_size_, 22 + 0xFFFF + 20);
  std::string tail(tail_size, '\0');
  read_at(file_size_ - tail_size, tail.data(), tail_size, "the zip directory");
  const auto* t = reinterpret_cast<const unsigned char*>(tail.data());
  int64_t end = -1;
  for (int64_t i = static_cast<int64_t>(tail_size) - 22; i >= 0; --i) {
    if (get32(t + i) == kEndSig) {
      end = i;
      break;
    }
  }
  XDINO_CHECK(end >= 0, where_, " has no zip directory at its end: the file is truncated or ",
              "is not a torch.save file");
  const unsigned char* e = t + end;
  uint64_t count = get16(e + 10);
  uint64_t cd_size = get32(e + 12);
  uint64_t cd_offset = get32(e + 16);
  if (end >= 20 && get32(e - 20) == kLocator64Sig) {
    unsigned char z[56];
    read_at(get64(e - 20 + 8), z, sizeof z, "the ZIP64 end record");
    XDINO_CHECK(get32(z) == kEnd64Sig, where_, " is damaged: bad ZIP64 end record");
    count = get64(z + 32);
    cd_size = get64(z + 40);
    cd_offset = get64(z + 48);
  }
  XDINO_CHECK(cd_offset <= file_size_ && cd_size <= file_size_ - cd_offset, where_,
              " is truncated or damaged: its zip directory points past the end of the file");
  std::string cd(cd_size, '\0');
  read_at(cd_offset, cd.data(), cd_size, "the zip directory");
  const auto* p = reinterpret_cast<const unsigned char*>(cd.data());
  const unsigned char* const p_end = p + cd_size;
  // The count is declared, not measured: bound it by the directory's size (a record has at
  // least 46 bytes) before reserving, or a damaged count asks for petabytes.
  XDINO_CHECK(count <= cd_size / 46, where_, " is truncated or damaged: its zip directory of ",
              cd_size, " bytes cannot hold the ", count, " entries it declares");
  entries_.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    XDINO_CHECK(p_end - p >= 46 && get32(p) == kCentralSig, where_,
                " is damaged: zip directory entry ", i, " is malformed");
    const uint16_t flags = get16(p + 8), name_len = get16(p + 28), extra_len = get16(p + 30),
                   comment_len = get16(p + 32);
    XDINO_CHECK(p_end - p >= 46 + name_len + extra_len + comment_len, where_,
                " is damaged: zip directory entry ", i, " is cut short");
    ZipEntry entry;
    entry.method = get16(p + 10);
    entry.crc = get32(p + 16);
    uint64_t csize = get32(p + 20);
    entry.size = get32(p + 24);
    entry.header_offset = get32(p + 42);
    entry.name.assign(reinterpret_cast<const char*>(p + 46), name_len);
    // ZIP64 extra field: the values whose 32-bit slots hold 0xFFFFFFFF, in this order.
    for (const unsigned char* x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint16_t id = get16(x), len = get16(x + 2);
      const unsigned char* v = x + 4;
      const unsigned char* v_end = std::min(v + len, p + 46 + name_len + extra_len);
      if (id == kZip64FieldId) {
        for (uint64_t* field : {&entry.size, &csize, &entry.header_offset}) {
          if (*field != k32) continue;
          XDINO_CHECK(v + 8 <= v_end, where_, " is damaged: short ZIP64 field for '", entry.name,
                      "'");
          *field = get64(v);
          v += 8;
        }
      }
      x += 4 + len;
    }
    XDINO_CHECK(entry.header_offset <= file_size_ && entry.size <= file_size_ - entry.header_offset,
                where_, " is truncated or damaged: entry '", entry.name, "' of ", entry.size,
                " bytes at byte ", entry.header_offset, " reaches past the end of the file (",
                file_size_, " bytes)");
    XDINO_CHECK((flags & 1) == 0, where_, ": entry '", entry.name, "' is encrypted");
    XDINO_CHECK(entry.method == 0 && csize == entry.size, where_, ": entry '", entry.name,
                "' is compressed (zip method ", entry.method,
                "); torch.save writes stored entries: re-save the file with torch.save");
    entries_.push_back(std::move(entry));
    p += 46 + name_len + extra_len + comment_len;
  }
  // Names point into entries_, which no longer grows.
  for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].name, i);
}

const ZipEntry* ZipReader::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

uint64_t ZipReader::data_offset(const ZipEntry& entry) const {
  unsigned char h[30];
  read_at(entry.header_offset, h, sizeof h, entry.name.c_str());
  XDINO_CHECK(get32(h) == kLocalSig, where_, " is damaged: no zip header for entry '", entry.name,
              "'");
  return entry.header_offset + 30 + get16(h + 26) + get16(h + 28);
}

uint32_t ZipReader::read_range(const ZipEntry& entry, uint64_t offset, uint64_t size,
                               void* dst) const {
  XDINO_CHECK(offset <= entry.size && size <= entry.size - offset, "range ", offset, "+", size,
              " is outside entry '", entry.name, "' of ", where_);
  read_at(data_offset(entry) + offset, dst, size, entry.name.c_str());
  return static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(dst), size));
}

void ZipReader::check_crc(const ZipEntry& entry, uint32_t crc) const {
  // PyTorch >= 2.5 may store 0 instead of a CRC (serialization.set_crc32_options(False)).
  XDINO_CHECK(crc == entry.crc || entry.crc == 0, where_, " is damaged: entry '", entry.name,
              "' fails its CRC-32 check");
}

void ZipReader::read(const ZipEntry& entry, void* dst) const {
  const uint64_t data = data_offset(entry);
  // Read in slices and checksum each while it is still in cache.
  constexpr uint64_t kSlice = 8u << 20;
  uint32_t crc = 0;
  auto* out = static_cast<char*>(dst);
  for (uint64_t done = 0; done < entry.size;) {
    const uint64_t n = std::min(kSlice, entry.size - done);
    read_at(data + done, out + done, n, entry.name.c_str());
    crc = static_cast<uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef*>(out + done), n));
    done += n;
  }
  check_crc(entry, crc);
}

std::string ZipReader::read_string(const ZipEntry& entry) const {
  std::string s(entry.size, '\0');
  read(entry, s.data());
  return s;
}

}  // namespace xdino::pth
