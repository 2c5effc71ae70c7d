// Structure-aware input for the HDF5 fuzz targets (fuzz_h5, fuzz_features; see targets.h).
//
// Why not raw bytes: a mutated HDF5 file is parsed by the HDF5 library, which is out of scope
// (issue 17) and uninstrumented here; a raw-byte fuzzer spends its executions there and stops
// at the library's own crashes. Our code only sees what HDF5 hands it: objects with a type, a
// shape, a storage layout and values. So the fuzz input *describes* such a file, the builder
// writes it with the HDF5 C API, and our readers get a well-formed HDF5 file whose contents
// are hostile: wrong types and ranks, missing or extra objects, huge declared shapes stored in
// a few bytes, offsets out of order, strings that are not UTF-8, attributes of the wrong kind.
//
// Input grammar, one description per object named in the schema, in order (bytes missing at
// the end read as zero):
//   dataset:   u8 kind     kind % 8 == 0: absent; else a dataset follows
//              u8 type     0 = the schema's own type, then uint8, int8, int32, int64, uint64,
//                          float32, float64, variable-length string, fixed-length string
//              u8 rank     0..3 (the schema's rank when kind & 8)
//              dims        one u8 each, or a big-endian u16 when kind & 16; with kind & 32 the
//                          first dimension is declared 2^20 x that value (a huge extent whose
//                          storage stays unallocated: layout chunked)
//              u8 layout   0 contiguous, 1 chunked, 2 chunked + deflate
//              values      numbers: one signed byte each when kind & 64, else the element's
//                          own bytes (little-endian); strings: u8 length, then the bytes
//   attribute: u8 kind     0 absent, 1 string, 2 int64, 3 float64, 4 int64 pair, 5 fixed string
//              value       string: u8 length + bytes; numbers: 8 bytes each
// Contract: build_h5() writes the file at `path` (truncating) or throws xdino::Error when HDF5
// refuses the description (the target then has nothing to read: a rejected input).
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xdino::fuzz {

// Consumes the input front to back; reads past the end give zeros.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string bytes(size_t n);
  size_t left() const { return size_ - pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct H5Schema {
  struct Dataset {
    std::string name;
    hid_t type;  // the reader's expected type: a native numeric type, or H5T_C_S1 (strings)
    int rank;
  };
  std::vector<Dataset> datasets;
  std::vector<std::string> attributes;
};

void build_h5(ByteReader& in, const H5Schema& schema, const std::string& path);

}  // namespace xdino::fuzz
