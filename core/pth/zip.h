// Reading the zip container of torch.save files (part of core/pth; used by pth.cpp and its
// tests).
//
// Contract:
//  - ZipReader opens an archive of stored (uncompressed) entries, the only kind torch.save
//    writes; ZIP64 records are understood. Opening reads the central directory only; read()
//    copies one entry into caller memory and checks its CRC-32 (not when the stored CRC is 0:
//    PyTorch >= 2.5 writes 0 under set_crc32_options(False)). Every failure (not a zip, a
//    truncated archive, a compressed entry, a CRC mismatch) throws xdino::Error with one line
//    naming the file and the entry.
//  - Writing is LibTorch's caffe2::serialize::PyTorchStreamWriter (see core/pth/pth.cpp); the
//    reader stays ours because PyTorchStreamReader does not check CRCs (docs/checkpoints.md).
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

}  // namespace xdino::pth
