#include "eval/features_io.h"

#include <hdf5.h>

#include <utility>

#include "core/atomic_file.h"
#include "core/check.h"

namespace xdino::eval {
namespace fs = std::filesystem;
namespace {

// Owns one HDF5 identifier and closes it with the matching H5?close.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints an error stack to stderr by default; we report one line ourselves instead.
void silence_hdf5() {
  static const bool once = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

hid_t utf8_string_type() {
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}

void write_dataset(hid_t file, const char* name, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, const void* data, const fs::path& path) {
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle set(H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT),
             H5Dclose);
  XDINO_CHECK(set.ok(), "cannot create dataset /", name, " in ", path);
  XDINO_CHECK(H5Dwrite(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0,
              "cannot write dataset /", name, " to ", path, " (disk full?)");
}

void write_string_attribute(hid_t file, const char* name, const std::string& value) {
  Handle type(utf8_string_type(), H5Tclose);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(file, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  const char* text = value.c_str();
  XDINO_CHECK(attr.ok() && H5Awrite(attr.get(), type.get(), &text) >= 0,
              "cannot write HDF5 attribute ", name);
}

void write_int_attribute(hid_t file, const char* name, int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(file, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  XDINO_CHECK(attr.ok() && H5Awrite(attr.get(), H5T_NATIVE_INT64, &value) >= 0,
              "cannot write HDF5 attribute ", name);
}

// Missing attributes keep the caller's default (files written by other tools may lack them).
void read_string_attribute(hid_t file, const char* name, std::string& value) {
  if (H5Aexists(file, name) <= 0) return;
  Handle attr(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) return;
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle mem(utf8_string_type(), H5Tclose);
    char* text = nullptr;
    if (H5Aread(attr.get(), mem.get(), &text) >= 0 && text != nullptr) {
      value = text;
      H5free_memory(text);
    }
  } else {
    std::string buf(H5Tget_size(type.get()), '\0');
    if (H5Aread(attr.get(), type.get(), buf.data()) >= 0) value = buf.substr(0, buf.find('\0'));
  }
}

void read_int_attribute(hid_t file, const char* name, int64_t& value) {
  if (H5Aexists(file, name) <= 0) return;
  Handle attr(H5Aopen(file, name, H5P_DEFAULT), H5Aclose);
  int64_t v = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &v) >= 0) value = v;
}

std::vector<hsize_t> dataset_dims(hid_t set) {
  Handle space(H5Dget_space(set), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

std::vector<std::string> read_paths(hid_t set, hsize_t n, const fs::path& path) {
  Handle type(utf8_string_type(), H5Tclose);
  Handle space(H5Dget_space(set), H5Sclose);
  std::vector<char*> raw(n, nullptr);
  XDINO_CHECK(H5Dread(set, type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) >= 0,
              "cannot read /paths from ", path, " (expected variable-length strings)");
  std::vector<std::string> paths(n);
  for (hsize_t i = 0; i < n; ++i)
    if (raw[i] != nullptr) paths[i] = raw[i];
#if H5_VERSION_GE(1, 12, 0)
  H5Treclaim(type.get(), space.get(), H5P_DEFAULT, raw.data());
#else
  H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, raw.data());
#endif
  return paths;
}

// The file attributes and the FeatureAttributes fields they hold.
struct StringAttr {
  const char* name;
  std::string FeatureAttributes::*field;
};
const StringAttr kStringAttrs[] = {{"arch", &FeatureAttributes::arch},
                                   {"checkpoint", &FeatureAttributes::checkpoint},
                                   {"checkpoint_key", &FeatureAttributes::checkpoint_key},
                                   {"split", &FeatureAttributes::split},
                                   {"feature", &FeatureAttributes::feature}};
struct IntAttr {
  const char* name;
  int64_t FeatureAttributes::*field;
};
const IntAttr kIntAttrs[] = {{"image_size", &FeatureAttributes::image_size},
                             {"patch_size", &FeatureAttributes::patch_size}};

}  // namespace

void write_features(const fs::path& path, const FeatureSet& set) {
  silence_hdf5();
  XDINO_CHECK(set.features.defined() && set.features.dim() == 2 &&
                  set.features.scalar_type() == torch::kFloat32,
              "features for ", path, " must be a float32 [N, C] tensor");
  const int64_t n = set.features.size(0);
  XDINO_CHECK(set.labels.defined() && set.labels.dim() == 1 && set.labels.size(0) == n,
              "labels for ", path, " must have N = ", n, " entries");
  XDINO_CHECK(set.paths.empty() || static_cast<int64_t>(set.paths.size()) == n, "paths for ",
              path, " must be empty or have N = ", n, " entries, got ", set.paths.size());
  const torch::Tensor features = set.features.to(torch::kCPU).contiguous();
  const torch::Tensor labels = set.labels.to(torch::kCPU, torch::kInt64).contiguous();
  std::vector<const char*> names(n, "");
  for (size_t i = 0; i < set.paths.size(); ++i) names[i] = set.paths[i].c_str();

  write_atomically(path, [&](const fs::path& tmp) {
    Handle file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    XDINO_CHECK(file.ok(), "cannot create HDF5 file ", tmp);
    const hsize_t rows = static_cast<hsize_t>(n);
    write_dataset(file.get(), "features", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                  {rows, static_cast<hsize_t>(features.size(1))}, features.data_ptr<float>(),
                  path);
    write_dataset(file.get(), "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, {rows},
                  labels.data_ptr<int64_t>(), path);
    Handle strings(utf8_string_type(), H5Tclose);
    write_dataset(file.get(), "paths", strings.get(), strings.get(), {rows}, names.data(), path);
    const FeatureAttributes& a = set.attributes;
    for (const StringAttr& s : kStringAttrs) write_string_attribute(file.get(), s.name, a.*s.field);
    for (const IntAttr& i : kIntAttrs) write_int_attribute(file.get(), i.name, a.*i.field);
    write_int_attribute(file.get(), "normalized", a.normalized ? 1 : 0);
    XDINO_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL) >= 0, "cannot flush ", tmp);
  });
}

FeatureSet read_features(const fs::path& path) {
  silence_hdf5();
  XDINO_CHECK(fs::is_regular_file(path), "feature file ", path, " not found");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  XDINO_CHECK(file.ok(), "cannot open ", path, " as HDF5 (not an HDF5 file or corrupt)");
  XDINO_CHECK(H5Lexists(file.get(), "features", H5P_DEFAULT) > 0, path,
              " has no /features dataset");
  XDINO_CHECK(H5Lexists(file.get(), "labels", H5P_DEFAULT) > 0, path, " has no /labels dataset");

  FeatureSet out;
  Handle features(H5Dopen2(file.get(), "features", H5P_DEFAULT), H5Dclose);
  const auto fdims = dataset_dims(features.get());
  XDINO_CHECK(fdims.size() == 2, "/features in ", path, " must be 2-D [N, C], has rank ",
              fdims.size());
  const auto n = static_cast<int64_t>(fdims[0]);
  out.features = torch::empty({n, static_cast<int64_t>(fdims[1])}, torch::kFloat32);
  XDINO_CHECK(H5Dread(features.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                      out.features.data_ptr<float>()) >= 0,
              "cannot read /features from ", path, " as float32");

  Handle labels(H5Dopen2(file.get(), "labels", H5P_DEFAULT), H5Dclose);
  const auto ldims = dataset_dims(labels.get());
  XDINO_CHECK(ldims.size() == 1 && static_cast<int64_t>(ldims[0]) == n, "/labels in ", path,
              " must be 1-D with N = ", n, " entries");
  out.labels = torch::empty({n}, torch::kInt64);
  XDINO_CHECK(H5Dread(labels.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                      out.labels.data_ptr<int64_t>()) >= 0,
              "cannot read /labels from ", path, " as int64");

  if (H5Lexists(file.get(), "paths", H5P_DEFAULT) > 0) {
    Handle paths(H5Dopen2(file.get(), "paths", H5P_DEFAULT), H5Dclose);
    const auto pdims = dataset_dims(paths.get());
    XDINO_CHECK(pdims.size() == 1 && static_cast<int64_t>(pdims[0]) == n, "/paths in ", path,
                " must be 1-D with N = ", n, " entries");
    out.paths = read_paths(paths.get(), pdims[0], path);
  } else {
    out.paths.assign(n, "");
  }

  FeatureAttributes& a = out.attributes;
  for (const StringAttr& s : kStringAttrs) read_string_attribute(file.get(), s.name, a.*s.field);
  for (const IntAttr& i : kIntAttrs) read_int_attribute(file.get(), i.name, a.*i.field);
  int64_t normalized = a.normalized ? 1 : 0;
  read_int_attribute(file.get(), "normalized", normalized);
  a.normalized = normalized != 0;
  return out;
}

}  // namespace xdino::eval
