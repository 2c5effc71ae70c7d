#include "fuzz/h5_builder.h"

#include <algorithm>
#include <cstring>

#include "augment/data/h5.h"
#include "core/check.h"

namespace xdino::fuzz {
namespace {

using augment::h5::H5Object;

// More elements than this are declared but never written: the storage stays unallocated.
constexpr hsize_t kMaxWritten = hsize_t{1} << 16;

std::string take_string(ByteReader& in) { return in.bytes(in.u8()); }

H5Object string_type(bool variable, size_t width) {
  H5Object t(H5Tcopy(H5T_C_S1), H5Tclose);
  XDINO_CHECK(t.valid(), "H5Tcopy failed");
  H5Tset_size(t.get(), variable ? H5T_VARIABLE : width);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

// The element type of a dataset: `choice` 0 is what the reader expects.
H5Object element_type(const H5Schema::Dataset& d, uint8_t choice, ByteReader& in) {
  const hid_t numeric[] = {H5T_NATIVE_UINT8,  H5T_NATIVE_INT8,  H5T_NATIVE_INT32, H5T_NATIVE_INT64,
                           H5T_NATIVE_UINT64, H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE};
  const int c = choice % 10;
  if (c == 0 && d.type == H5T_C_S1) return string_type(true, 0);
  if (c == 0) return H5Object(H5Tcopy(d.type), H5Tclose);
  if (c <= 7) return H5Object(H5Tcopy(numeric[c - 1]), H5Tclose);
  if (c == 8) return string_type(true, 0);
  return string_type(false, 1 + in.u8() % 16);
}

void write_dataset(ByteReader& in, const H5Object& file, const H5Schema::Dataset& d) {
  const uint8_t kind = in.u8();
  if (kind % 8 == 0) return;
  const uint8_t type_choice = in.u8();
  const uint8_t rank_byte = in.u8();
  const int rank = (kind & 8) ? d.rank : rank_byte % 4;
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  for (hsize_t& n : dims) n = (kind & 16) ? (hsize_t{in.u8()} << 8 | in.u8()) : in.u8();
  if (rank > 0 && (kind & 32)) dims[0] *= hsize_t{1} << 20;
  hsize_t count = 1;
  bool huge = false;
  for (hsize_t n : dims) {
    huge = huge || (n > 0 && count > kMaxWritten / n);
    count = huge ? count : count * n;
  }
  huge = huge || count > kMaxWritten;
  int layout = in.u8() % 3;
  if (huge && layout == 0) layout = 1;  // contiguous storage of that size would be allocated
  if (rank == 0) layout = 0;            // a scalar cannot be chunked

  const H5Object type = element_type(d, type_choice, in);
  // Chunked datasets may grow (unlimited maximum extents); contiguous ones have fixed extents.
  const std::vector<hsize_t> max_dims(dims.size(), H5S_UNLIMITED);
  const H5Object space(
      rank == 0 ? H5Screate(H5S_SCALAR)
                : H5Screate_simple(rank, dims.data(), layout > 0 ? max_dims.data() : nullptr),
      H5Sclose);
  const H5Object dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (layout > 0) {
    std::vector<hsize_t> chunk(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) chunk[i] = std::clamp<hsize_t>(dims[i], 1, 64);
    // Written data in at most ~64 chunks along the first dimension: HDF5 deflates each chunk
    // with a fresh zlib stream, and thousands of them made the builder, not our reader, exceed
    // the fuzzer's 1 s. (A huge declared extent stays in small, unwritten chunks.)
    if (!huge && rank > 0) chunk[0] = std::max<hsize_t>(chunk[0], (dims[0] + 63) / 64);
    H5Pset_chunk(dcpl.get(), rank, chunk.data());
    if (layout == 2) H5Pset_deflate(dcpl.get(), 6);
  }
  const H5Object set(H5Dcreate2(file.get(), d.name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                dcpl.get(), H5P_DEFAULT),
                     H5Dclose);
  XDINO_CHECK(set.valid(), "HDF5 refused dataset ", d.name, ": ", augment::h5::last_error());
  if (huge || count == 0) return;

  herr_t status = 0;
  if (H5Tget_class(type.get()) == H5T_STRING) {
    std::vector<std::string> values(count);
    for (std::string& s : values) s = take_string(in);
    if (H5Tis_variable_str(type.get()) > 0) {
      std::vector<const char*> ptrs(count);
      for (size_t i = 0; i < count; ++i) ptrs[i] = values[i].c_str();
      status = H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
    } else {
      const size_t width = H5Tget_size(type.get());
      std::string buf(count * width, '\0');
      for (size_t i = 0; i < count; ++i)
        std::memcpy(&buf[i * width], values[i].data(), std::min(width, values[i].size()));
      status = H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
    }
  } else {
    const size_t width = H5Tget_size(type.get());
    std::vector<uint8_t> buf(count * width, 0);
    const bool is_float = H5Tget_class(type.get()) == H5T_FLOAT;
    for (size_t i = 0; i < count; ++i) {
      if (kind & 64) {  // small values: one signed byte, as the element type
        const auto v = static_cast<int8_t>(in.u8());
        if (is_float && width == 4) {
          const float f = v;
          std::memcpy(&buf[i * width], &f, 4);
        } else if (is_float) {
          const double f = v;
          std::memcpy(&buf[i * width], &f, 8);
        } else {
          const int64_t x = v;  // little-endian: the low bytes come first
          std::memcpy(&buf[i * width], &x, width);
        }
      } else {
        const std::string raw = in.bytes(width);
        std::memcpy(&buf[i * width], raw.data(), width);
      }
    }
    status = H5Dwrite(set.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
  }
  XDINO_CHECK(status >= 0, "HDF5 refused the values of ", d.name);
}

void write_attribute(ByteReader& in, const H5Object& file, const std::string& name) {
  const int kind = in.u8() % 6;
  if (kind == 0) return;
  const hsize_t two = 2;
  const H5Object space(kind == 4 ? H5Screate_simple(1, &two, nullptr) : H5Screate(H5S_SCALAR),
                       H5Sclose);
  H5Object type;
  std::string value;
  if (kind == 1 || kind == 5) {
    value = take_string(in);
    type = string_type(kind == 1, std::max<size_t>(value.size(), 1));
  } else {
    type = H5Object(H5Tcopy(kind == 3 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64), H5Tclose);
    value = in.bytes(kind == 4 ? 16 : 8);
  }
  const H5Object attr(
      H5Acreate2(file.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  XDINO_CHECK(attr.valid(), "HDF5 refused attribute ", name);
  herr_t status;
  if (kind == 1) {
    const char* p = value.c_str();
    status = H5Awrite(attr.get(), type.get(), &p);
  } else {
    value.resize(std::max<size_t>(value.size(), 1), '\0');
    status = H5Awrite(attr.get(), type.get(), value.data());
  }
  XDINO_CHECK(status >= 0, "HDF5 refused the value of attribute ", name);
}

}  // namespace

std::string ByteReader::bytes(size_t n) {
  std::string out(n, '\0');
  const size_t k = std::min(n, size_ - pos_);
  std::memcpy(out.data(), data_ + pos_, k);
  pos_ += k;
  return out;
}

void build_h5(ByteReader& in, const H5Schema& schema, const std::string& path) {
  augment::h5::h5_quiet();
  const H5Object file = augment::h5::create_file(path);
  for (const H5Schema::Dataset& d : schema.datasets) write_dataset(in, file, d);
  for (const std::string& a : schema.attributes) write_attribute(in, file, a);
}

}  // namespace xdino::fuzz
