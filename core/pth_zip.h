// The zip container of torch.save files (part of core/pth; used by pth.cpp and its tests).
//
// Contract:
//  - ZipReader opens an archive of stored (uncompressed) entries, the only kind torch.save
//    writes; ZIP64 records are understood. Opening reads the central directory only; read()
//    copies one entry into caller memory and checks its CRC-32 (not when the stored CRC is 0:
//    PyTorch >= 2.5 writes 0 under set_crc32_options(False)). Every failure (not a zip, a
//    truncated archive, a compressed entry, a CRC mismatch) throws xdino::Error with one line
//    naming the file and the entry.
//  - ZipWriter appends stored entries to a new file, each entry's data aligned to 64 bytes as
//    PyTorch's writer does (so torch.load(mmap=True) works too), and finish() writes the central
//    directory. ZIP64 records are used where a size or an offset needs them, or for every entry
//    with force_zip64 (tests). Writes stream straight from the caller's buffers.
//  - read_range() may be called from several threads at once (it uses pread only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace xdino::pth {

struct ZipEntry {
  std::string name;
  uint64_t size = 0;  // bytes (stored: compressed == uncompressed)
  uint32_t crc = 0;
  uint64_t header_offset = 0;  // of the local file header
  uint16_t method = 0;         // 0 = stored
};

class ZipReader {
 public:
  explicit ZipReader(const std::filesystem::path& path);
  ~ZipReader();
  ZipReader(const ZipReader&) = delete;
  ZipReader& operator=(const ZipReader&) = delete;

  const std::vector<ZipEntry>& entries() const { return entries_; }
  // nullptr when absent.
  const ZipEntry* find(std::string_view name) const;
  // Copies the entry's `size` bytes to `dst`, verifying the CRC-32.
  void read(const ZipEntry& entry, void* dst) const;
  // `size` bytes at `offset` within the entry's data, into dst; returns their CRC-32.
  uint32_t read_range(const ZipEntry& entry, uint64_t offset, uint64_t size, void* dst) const;
  // Throws unless `crc` (of the whole entry) matches the stored one.
  void check_crc(const ZipEntry& entry, uint32_t crc) const;
  std::string read_string(const ZipEntry& entry) const;
  // The file as messages name it.
  const std::string& where() const { return where_; }

 private:
  void read_at(uint64_t offset, void* dst, uint64_t size, const char* what) const;
  uint64_t data_offset(const ZipEntry& entry) const;
  void read_directory();

  std::string where_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string_view, size_t> index_;  // name -> entries_ position
};

class ZipWriter {
 public:
  ZipWriter(const std::filesystem::path& path, bool force_zip64 = false);
  ~ZipWriter();
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  void add(const std::string& name, const void* data, size_t size);
  void finish();

 private:
  void write(const void* data, size_t size);

  std::string where_;
  int fd_ = -1;
  bool force_zip64_;
  uint64_t offset_ = 0;
  std::vector<ZipEntry> entries_;
};

}  // namespace xdino::pth
