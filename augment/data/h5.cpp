#include "augment/data/h5.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace xdino::augment::h5 {
namespace {

// HDF5 closes whatever is still open when the process exits (H5_term_library, an atexit
// hook). A file whose write failed (a full disk, a file-size limit) stays open after its close
// fails, and HDF5 1.10's exit-time close of it crashes (SIGSEGV in H5F__close_cb) after our
// one-line error. Every file here is closed by its H5Object, so the hook has nothing to do:
// switch it off before the first HDF5 call (H5dont_atexit must precede all others).
const bool kNoExitHook = (H5dont_atexit(), true);

}  // namespace

std::recursive_mutex& h5_mutex() {
  static std::recursive_mutex m;
  return m;
}

void h5_quiet() {
  // Thread-safe HDF5 builds keep the error-printing setting per thread.
  thread_local bool done = false;
  if (!done) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    done = true;
  }
}

std::string last_error() {
  std::string message;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        if (n == 0 && e->desc != nullptr) *static_cast<std::string*>(out) = e->desc;
        return 0;
      },
      &message);
  return message;
}

namespace {

// Locks HDF5 for the scope and silences its stderr printing in this thread.
struct Lock {
  std::lock_guard<std::recursive_mutex> guard{h5_mutex()};
  Lock() { h5_quiet(); }
};

std::string why() {
  const std::string e = last_error();
  return e.empty() ? "HDF5 error" : e;
}

// A dataset's shape is only a declaration: a chunked dataset may declare 2^40 elements and
// store none (HDF5 then reads fill values), and reading it whole would allocate all of them.
// Before anyone sizes memory by the shape, the declared bytes must be within what the file
// stores times deflate's largest compression ratio (1032:1), with 1 KiB of slack for tiny
// datasets (a small unwritten dataset reads as its fill values, which is harmless).
void check_storage(hid_t dataset, hid_t space, const std::string& where) {
  const hssize_t elements = H5Sget_simple_extent_npoints(space);
  XDINO_CHECK(elements >= 0, "cannot read the shape of a dataset of ", where, ": ", why());
  const H5Object type(H5Dget_type(dataset), H5Tclose);
  const size_t element_bytes = type.valid() ? std::max<size_t>(H5Tget_size(type.get()), 1) : 1;
  const uint64_t stored = H5Dget_storage_size(dataset);
  constexpr uint64_t kMaxRatio = 1032, kSlack = 1024;
  const uint64_t limit = kMaxRatio * std::max<uint64_t>(stored, kSlack);
  XDINO_CHECK(static_cast<uint64_t>(elements) <= limit / element_bytes, "a dataset of ", where,
              " declares ", elements, " elements of ", element_bytes,
              " bytes but the file stores only ", stored,
              " bytes of it (corrupt, or never "
              "written)");
}

}  // namespace

H5Object& H5Object::operator=(H5Object&& o) noexcept {
  if (this != &o) {
    reset();
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = -1;
  }
  return *this;
}

void H5Object::reset() {
  if (id_ >= 0 && close_ != nullptr) {
    Lock lock;
    close_(id_);
  }
  id_ = -1;
}

H5Object open_file(const std::string& path, bool writable) {
  Lock lock;
  const hid_t f = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  XDINO_CHECK(f >= 0, "cannot open HDF5 file ", path, ": ", why());
  return H5Object(f, H5Fclose);
}

H5Object create_file(const std::string& path) {
  Lock lock;
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  XDINO_CHECK(f >= 0, "cannot create HDF5 file ", path, ": ", why());
  return H5Object(f, H5Fclose);
}

bool has_object(const H5Object& file, const std::string& name) {
  Lock lock;
  return H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) > 0;
}

H5Object open_h5_dataset(const H5Object& file, const std::string& name, const std::string& where) {
  Lock lock;
  XDINO_CHECK(H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) > 0, where, " has no dataset '",
              name, "'");
  const hid_t d = H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT);
  XDINO_CHECK(d >= 0, "cannot open dataset '", name, "' of ", where, ": ", why());
  return H5Object(d, H5Dclose);
}

int64_t dataset_length(const H5Object& dataset, const std::string& where) {
  Lock lock;
  H5Object space(H5Dget_space(dataset.get()), H5Sclose);
  XDINO_CHECK(space.valid(), "cannot read the shape of a dataset of ", where, ": ", why());
  XDINO_CHECK(H5Sget_simple_extent_ndims(space.get()) == 1, "a dataset of ", where,
              " is not one-dimensional");
  check_storage(dataset.get(), space.get(), where);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space.get(), &n, nullptr);
  return static_cast<int64_t>(n);
}

std::vector<int64_t> dataset_shape(const H5Object& dataset, const std::string& where) {
  Lock lock;
  H5Object space(H5Dget_space(dataset.get()), H5Sclose);
  XDINO_CHECK(space.valid(), "cannot read the shape of a dataset of ", where, ": ", why());
  const int rank = H5Sget_simple_extent_ndims(space.get());
  XDINO_CHECK(rank >= 0, "cannot read the shape of a dataset of ", where, ": ", why());
  check_storage(dataset.get(), space.get(), where);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

void read_float32(const H5Object& dataset, float* out, const std::string& where) {
  Lock lock;
  XDINO_CHECK(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0,
              "cannot read ", where, " as float32: ", why());
}

std::vector<int64_t> read_int64(const H5Object& file, const std::string& name,
                                const std::string& where) {
  Lock lock;
  const H5Object d = open_h5_dataset(file, name, where);
  std::vector<int64_t> out(static_cast<size_t>(dataset_length(d, where + ":" + name)));
  if (out.empty()) return out;
  XDINO_CHECK(H5Dread(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0,
              "cannot read integers '", name, "' of ", where, ": ", why());
  return out;
}

std::vector<std::string> read_strings(const H5Object& file, const std::string& name,
                                      const std::string& where) {
  Lock lock;
  const H5Object d = open_h5_dataset(file, name, where);
  const size_t n = static_cast<size_t>(dataset_length(d, where + ":" + name));
  std::vector<std::string> out(n);
  if (n == 0) return out;
  const H5Object stored(H5Dget_type(d.get()), H5Tclose);
  XDINO_CHECK(H5Tget_class(stored.get()) == H5T_STRING, "dataset '", name, "' of ", where,
              " does not hold strings");
  const H5Object mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_cset(mem.get(), H5Tget_cset(stored.get()));
  if (H5Tis_variable_str(stored.get()) > 0) {
    H5Tset_size(mem.get(), H5T_VARIABLE);
    std::vector<char*> ptrs(n, nullptr);
    XDINO_CHECK(H5Dread(d.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) >= 0,
                "cannot read strings '", name, "' of ", where, ": ", why());
    for (size_t i = 0; i < n; ++i) out[i] = ptrs[i] != nullptr ? ptrs[i] : "";
    const H5Object space(H5Dget_space(d.get()), H5Sclose);
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
#else
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
#endif
  } else {
    const size_t width = H5Tget_size(stored.get());
    H5Tset_size(mem.get(), width);
    H5Tset_strpad(mem.get(), H5T_STR_NULLPAD);
    std::vector<char> buf(n * width);
    XDINO_CHECK(H5Dread(d.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0,
                "cannot read strings '", name, "' of ", where, ": ", why());
    for (size_t i = 0; i < n; ++i)
      out[i].assign(buf.data() + i * width, strnlen(buf.data() + i * width, width));
  }
  return out;
}

void read_bytes(const H5Object& dataset, int64_t begin, int64_t end, uint8_t* out,
                const std::string& where) {
  if (end <= begin) return;
  Lock lock;
  const H5Object file_space(H5Dget_space(dataset.get()), H5Sclose);
  const hsize_t start = static_cast<hsize_t>(begin), count = static_cast<hsize_t>(end - begin);
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  const H5Object mem_space(H5Screate_simple(1, &count, nullptr), H5Sclose);
  XDINO_CHECK(H5Dread(dataset.get(), H5T_NATIVE_UINT8, mem_space.get(), file_space.get(),
                      H5P_DEFAULT, out) >= 0,
              "cannot read bytes ", begin, "..", end, " of ", where, ": ", why());
}

void write_int64(const H5Object& file, const std::string& name, const std::vector<int64_t>& v) {
  Lock lock;
  const hsize_t n = v.size();
  const H5Object space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  const H5Object d(H5Dcreate2(file.get(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT,
                              H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
  XDINO_CHECK(d.valid(), "cannot create dataset '", name, "': ", why());
  XDINO_CHECK(v.empty() ||
                  H5Dwrite(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0,
              "cannot write dataset '", name, "': ", why());
}

void write_float32(const H5Object& file, const std::string& name, const std::vector<int64_t>& shape,
                   const float* data) {
  Lock lock;
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  const H5Object space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                       H5Sclose);
  const H5Object d(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                              H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
  XDINO_CHECK(d.valid(), "cannot create dataset '", name, "': ", why());
  XDINO_CHECK(H5Dwrite(d.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0,
              "cannot write dataset '", name, "' (disk full?): ", why());
}

void flush(const H5Object& file, const std::string& where) {
  Lock lock;
  XDINO_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, "cannot flush ", where, ": ", why());
}

namespace {

H5Object string_type(size_t size, H5T_cset_t cset = H5T_CSET_UTF8) {
  H5Object t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.get(), size);
  H5Tset_cset(t.get(), cset);
  return t;
}

}  // namespace

void write_strings(const H5Object& file, const std::string& name,
                   const std::vector<std::string>& v) {
  Lock lock;
  const hsize_t n = v.size();
  const H5Object type = string_type(H5T_VARIABLE);
  const H5Object space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  const H5Object d(H5Dcreate2(file.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                              H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose);
  XDINO_CHECK(d.valid(), "cannot create dataset '", name, "': ", why());
  std::vector<const char*> ptrs;
  ptrs.reserve(v.size());
  for (const std::string& s : v) ptrs.push_back(s.c_str());
  XDINO_CHECK(
      v.empty() || H5Dwrite(d.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) >= 0,
      "cannot write dataset '", name, "': ", why());
}

H5Object create_bytes(const H5Object& file, const std::string& name, int64_t length) {
  Lock lock;
  const hsize_t n = static_cast<hsize_t>(length);
  const H5Object space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  const H5Object props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_layout(props.get(), H5D_CONTIGUOUS);
  // Allocate at creation so the data address exists even for an empty dataset.
  H5Pset_alloc_time(props.get(), H5D_ALLOC_TIME_EARLY);
  H5Pset_fill_time(props.get(), H5D_FILL_TIME_NEVER);
  H5Object d(H5Dcreate2(file.get(), name.c_str(), H5T_STD_U8LE, space.get(), H5P_DEFAULT,
                        props.get(), H5P_DEFAULT),
             H5Dclose);
  XDINO_CHECK(d.valid(), "cannot create dataset '", name, "' of ", length, " bytes: ", why());
  return d;
}

void write_bytes(const H5Object& dataset, int64_t begin, const uint8_t* data, int64_t count) {
  if (count <= 0) return;
  Lock lock;
  const H5Object file_space(H5Dget_space(dataset.get()), H5Sclose);
  const hsize_t start = static_cast<hsize_t>(begin), n = static_cast<hsize_t>(count);
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr);
  const H5Object mem_space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  XDINO_CHECK(H5Dwrite(dataset.get(), H5T_NATIVE_UINT8, mem_space.get(), file_space.get(),
                       H5P_DEFAULT, data) >= 0,
              "cannot write ", count, " bytes at ", begin, ": ", why());
}

namespace {

std::vector<hsize_t> dims_of(const H5Object& dataset) {
  const H5Object space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  XDINO_CHECK(rank >= 1, "a dataset of rows must have rank >= 1: ", why());
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// The file space of `dataset` with rows [begin, begin + count) selected (or-ed into what is
// selected when `add`).
void select_rows(const H5Object& space, const std::vector<hsize_t>& dims, hsize_t begin,
                 hsize_t count, bool add) {
  std::vector<hsize_t> start(dims.size(), 0), n = dims;
  start[0] = begin;
  n[0] = count;
  H5Sselect_hyperslab(space.get(), add ? H5S_SELECT_OR : H5S_SELECT_SET, start.data(), nullptr,
                      n.data(), nullptr);
}

}  // namespace

H5Object create_float32_rows(const H5Object& file, const std::string& name,
                             const std::vector<int64_t>& shape) {
  Lock lock;
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  std::vector<hsize_t> max_dims = dims, chunk = dims;
  max_dims[0] = H5S_UNLIMITED;
  chunk[0] = 1;
  const H5Object space(
      H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()), H5Sclose);
  const H5Object props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_chunk(props.get(), static_cast<int>(chunk.size()), chunk.data());
  H5Object d(H5Dcreate2(file.get(), name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT,
                        props.get(), H5P_DEFAULT),
             H5Dclose);
  XDINO_CHECK(d.valid(), "cannot create dataset '", name, "': ", why());
  return d;
}

void write_float32_rows(const H5Object& dataset, const std::vector<int64_t>& rows,
                        const float* data) {
  if (rows.empty()) return;
  Lock lock;
  const std::vector<hsize_t> dims = dims_of(dataset);
  const H5Object file_space(H5Dget_space(dataset.get()), H5Sclose);
  for (size_t i = 0; i < rows.size(); ++i) {
    XDINO_CHECK(rows[i] >= 0 && static_cast<hsize_t>(rows[i]) < dims[0] &&
                    (i == 0 || rows[i] > rows[i - 1]),
                "rows to write must be ascending and within [0, ", dims[0], "), got ", rows[i]);
    select_rows(file_space, dims, static_cast<hsize_t>(rows[i]), 1, i > 0);
  }
  std::vector<hsize_t> mem_dims = dims;
  mem_dims[0] = rows.size();
  const H5Object mem_space(
      H5Screate_simple(static_cast<int>(mem_dims.size()), mem_dims.data(), nullptr), H5Sclose);
  XDINO_CHECK(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(),
                       H5P_DEFAULT, data) >= 0,
              "cannot write ", rows.size(), " rows (disk full?): ", why());
}

void read_float32_rows(const H5Object& dataset, int64_t begin, int64_t count, float* out,
                       const std::string& where) {
  if (count <= 0) return;
  Lock lock;
  const std::vector<hsize_t> dims = dims_of(dataset);
  XDINO_CHECK(begin >= 0 && static_cast<hsize_t>(begin + count) <= dims[0], "rows ", begin, "..",
              begin + count, " are outside the ", dims[0], " rows of ", where);
  const H5Object file_space(H5Dget_space(dataset.get()), H5Sclose);
  select_rows(file_space, dims, static_cast<hsize_t>(begin), static_cast<hsize_t>(count), false);
  std::vector<hsize_t> mem_dims = dims;
  mem_dims[0] = static_cast<hsize_t>(count);
  const H5Object mem_space(
      H5Screate_simple(static_cast<int>(mem_dims.size()), mem_dims.data(), nullptr), H5Sclose);
  XDINO_CHECK(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(),
                      H5P_DEFAULT, out) >= 0,
              "cannot read rows ", begin, "..", begin + count, " of ", where, ": ", why());
}

void resize_rows(const H5Object& dataset, int64_t rows) {
  Lock lock;
  std::vector<hsize_t> dims = dims_of(dataset);
  dims[0] = static_cast<hsize_t>(rows);
  XDINO_CHECK(H5Dset_extent(dataset.get(), dims.data()) >= 0, "cannot resize a dataset to ", rows,
              " rows: ", why());
}

void write_attribute(const H5Object& object, const std::string& name, const std::string& value) {
  Lock lock;
  const H5Object type = string_type(H5T_VARIABLE);
  const H5Object space(H5Screate(H5S_SCALAR), H5Sclose);
  const H5Object a(
      H5Acreate2(object.get(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  const char* p = value.c_str();
  XDINO_CHECK(a.valid() && H5Awrite(a.get(), type.get(), &p) >= 0, "cannot write attribute '", name,
              "': ", why());
}

void write_attribute(const H5Object& object, const std::string& name, int64_t value) {
  Lock lock;
  const H5Object space(H5Screate(H5S_SCALAR), H5Sclose);
  const H5Object a(
      H5Acreate2(object.get(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  XDINO_CHECK(a.valid() && H5Awrite(a.get(), H5T_NATIVE_INT64, &value) >= 0,
              "cannot write attribute '", name, "': ", why());
}

bool has_attribute(const H5Object& object, const std::string& name) {
  Lock lock;
  return H5Aexists(object.get(), name.c_str()) > 0;
}

namespace {

// Attributes here hold one value: H5Aread of an array into one would write past it.
H5Object open_single_attribute(const H5Object& object, const std::string& name) {
  H5Object a(H5Aopen(object.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
  XDINO_CHECK(a.valid(), "cannot open attribute '", name, "': ", why());
  const H5Object space(H5Aget_space(a.get()), H5Sclose);
  const hssize_t values = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
  if (values != 1) {
    char file[4096] = "an HDF5 file";
    H5Fget_name(object.get(), file, sizeof file);
    XDINO_FAIL("attribute '", name, "' of ", file, " holds ", values,
               " values where one is expected (corrupt or foreign file)");
  }
  return a;
}

}  // namespace

std::string read_string_attribute(const H5Object& object, const std::string& name) {
  Lock lock;
  if (H5Aexists(object.get(), name.c_str()) <= 0) return "";
  const H5Object a = open_single_attribute(object, name);
  const H5Object stored(H5Aget_type(a.get()), H5Tclose);
  if (H5Tget_class(stored.get()) != H5T_STRING) return "";
  if (H5Tis_variable_str(stored.get()) > 0) {
    const H5Object mem = string_type(H5T_VARIABLE, H5Tget_cset(stored.get()));
    char* p = nullptr;
    if (H5Aread(a.get(), mem.get(), &p) < 0 || p == nullptr) return "";
    std::string s(p);
    H5free_memory(p);
    return s;
  }
  const size_t width = H5Tget_size(stored.get());
  const H5Object mem = string_type(width, H5Tget_cset(stored.get()));
  std::string s(width, '\0');
  if (H5Aread(a.get(), mem.get(), s.data()) < 0) return "";
  s.resize(strnlen(s.data(), width));
  return s;
}

int64_t read_int_attribute(const H5Object& object, const std::string& name) {
  Lock lock;
  if (H5Aexists(object.get(), name.c_str()) <= 0) return -1;
  const H5Object a = open_single_attribute(object, name);
  int64_t v = -1;
  if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) return -1;
  return v;
}

}  // namespace xdino::augment::h5
