// Thin RAII helpers over the HDF5 C library, for the files this project reads and writes.
//
// Contract:
//  - H5Object owns one hid_t and closes it with the matching H5?close; move-only.
//  - Every failure throws xdino::Error naming the file/object and HDF5's own reason; HDF5's
//    automatic error printing is switched off (h5_quiet()) so nothing else reaches stderr.
//  - 1-D datasets, except the float32 arrays (any rank). Strings are written as variable-
//    length UTF-8 (what h5py writes for str); both variable- and fixed-length strings are read.
//  - Calls into HDF5 are serialised by h5_mutex(): take it around any HDF5 call made from
//    threads (the Debian library is thread-safe, other builds may not be).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace xdino::augment::h5 {

std::recursive_mutex& h5_mutex();
void h5_quiet();
// HDF5's innermost error message for the last failed call in this thread ("" if none).
std::string last_error();

class H5Object {
 public:
  H5Object() = default;
  H5Object(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  H5Object(H5Object&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Object& operator=(H5Object&& o) noexcept;
  H5Object(const H5Object&) = delete;
  H5Object& operator=(const H5Object&) = delete;
  ~H5Object() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

H5Object open_file(const std::string& path, bool writable = false);
H5Object create_file(const std::string& path);  // truncates
// An HDF5 dataset (an array in a file); augment::open_dataset (augment/data/open_dataset.h) is
// the image dataset a --data_path names.
H5Object open_h5_dataset(const H5Object& file, const std::string& name, const std::string& where);
bool has_object(const H5Object& file, const std::string& name);

// dataset_length and dataset_shape throw when the declared shape holds more bytes than the file
// stores times 1032 (deflate's largest ratio), plus 1 KiB: callers size memory by the shape.
// Number of elements of a 1-D dataset.
int64_t dataset_length(const H5Object& dataset, const std::string& where);
// Dimensions of a dataset of any rank.
std::vector<int64_t> dataset_shape(const H5Object& dataset, const std::string& where);

// Whole 1-D datasets, converted by HDF5 to the requested type.
std::vector<int64_t> read_int64(const H5Object& file, const std::string& name,
                                const std::string& where);
std::vector<std::string> read_strings(const H5Object& file, const std::string& name,
                                      const std::string& where);
// Bytes [begin, end) of a 1-D uint8 dataset.
void read_bytes(const H5Object& dataset, int64_t begin, int64_t end, uint8_t* out,
                const std::string& where);

// A whole float32 dataset of any rank into `out` (as many floats as the shape holds).
void read_float32(const H5Object& dataset, float* out, const std::string& where);

void write_int64(const H5Object& file, const std::string& name, const std::vector<int64_t>& v);
void write_float32(const H5Object& file, const std::string& name, const std::vector<int64_t>& shape,
                   const float* data);
// Everything written so far reaches the disk (before an atomic rename, say).
void flush(const H5Object& file, const std::string& where);
void write_strings(const H5Object& file, const std::string& name,
                   const std::vector<std::string>& v);
// A contiguous (unchunked, uncompressed) 1-D uint8 dataset of `length` bytes, to be filled
// with write_bytes: readers can then find it with H5Dget_offset and read it directly.
H5Object create_bytes(const H5Object& file, const std::string& name, int64_t length);
void write_bytes(const H5Object& dataset, int64_t begin, const uint8_t* data, int64_t count);

// A float32 dataset of `shape` ([rows, ...]) stored one row per chunk, with a first dimension
// that resize_rows can shrink or grow: for data written a few rows at a time, in any order,
// that need not fit in memory at once.
H5Object create_float32_rows(const H5Object& file, const std::string& name,
                             const std::vector<int64_t>& shape);
// Rows `rows` (ascending, distinct) of such a dataset from `data`, one row after another.
void write_float32_rows(const H5Object& dataset, const std::vector<int64_t>& rows,
                        const float* data);
// Rows [begin, begin + count) into `out`.
void read_float32_rows(const H5Object& dataset, int64_t begin, int64_t count, float* out,
                       const std::string& where);
void resize_rows(const H5Object& dataset, int64_t rows);

void write_attribute(const H5Object& object, const std::string& name, const std::string& value);
void write_attribute(const H5Object& object, const std::string& name, int64_t value);
bool has_attribute(const H5Object& object, const std::string& name);
// "" / -1 when the attribute does not exist; an attribute holding other than one value throws.
std::string read_string_attribute(const H5Object& object, const std::string& name);
int64_t read_int_attribute(const H5Object& object, const std::string& name);

}  // namespace xdino::augment::h5
