#include "eval/features_io.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "augment/data/h5.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/paths.h"

namespace xdino::eval {
namespace fs = std::filesystem;
namespace h5 = augment::h5;
namespace {

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
  XDINO_CHECK(set.features.defined() && set.features.dim() == 2 &&
                  set.features.scalar_type() == torch::kFloat32,
              "features for ", path, " must be a float32 [N, C] tensor");
  const int64_t n = set.features.size(0);
  XDINO_CHECK(set.labels.defined() && set.labels.dim() == 1 && set.labels.size(0) == n,
              "labels for ", path, " must have N = ", n, " entries");
  XDINO_CHECK(set.paths.empty() || static_cast<int64_t>(set.paths.size()) == n, "paths for ", path,
              " must be empty or have N = ", n, " entries, got ", set.paths.size());
  const torch::Tensor features = set.features.to(torch::kCPU).contiguous();
  const torch::Tensor labels = set.labels.to(torch::kCPU, torch::kInt64).contiguous();
  const std::vector<int64_t> label_values(labels.data_ptr<int64_t>(),
                                          labels.data_ptr<int64_t>() + n);
  const std::vector<std::string> paths =
      set.paths.empty() ? std::vector<std::string>(static_cast<size_t>(n)) : set.paths;

  write_atomically(path, [&](const fs::path& tmp) {
    errno = 0;
    try {
      const h5::H5Object file = h5::create_file(tmp.string());
      h5::write_float32(file, "features", {n, features.size(1)}, features.data_ptr<float>());
      h5::write_int64(file, "labels", label_values);
      h5::write_strings(file, "paths", paths);
      const FeatureAttributes& a = set.attributes;
      for (const StringAttr& s : kStringAttrs) h5::write_attribute(file, s.name, a.*s.field);
      for (const IntAttr& i : kIntAttrs) h5::write_attribute(file, i.name, a.*i.field);
      h5::write_attribute(file, "normalized", int64_t{a.normalized ? 1 : 0});
      h5::flush(file, tmp.string());
    } catch (const Error&) {
      // A full disk or a file-size limit: HDF5's message names the temporary file and its own
      // internals; the user wants the file they asked for and the reason. errno still holds
      // the failed write's (HDF5 reports without system calls of its own).
      const int err = errno;
      if (err == ENOSPC || err == EFBIG || err == EDQUOT || err == EIO)
        throw_write_error(path, err);
      throw;
    }
  });
}

FeatureSet read_features(const fs::path& path) {
  const std::string problem = file_problem(path);
  XDINO_CHECK(problem.empty(), "feature file ", path, " ", problem);
  const std::string where = path.string();
  const h5::H5Object file = h5::open_file(where);

  FeatureSet out;
  const h5::H5Object features = h5::open_h5_dataset(file, "features", where);
  const auto fdims = h5::dataset_shape(features, where + ":/features");
  XDINO_CHECK(fdims.size() == 2, "/features in ", path, " must be 2-D [N, C], has rank ",
              fdims.size());
  const int64_t n = fdims[0];
  out.features = torch::empty({n, fdims[1]}, torch::kFloat32);
  h5::read_float32(features, out.features.data_ptr<float>(), where + ":/features");

  const std::vector<int64_t> labels = h5::read_int64(file, "labels", where);
  XDINO_CHECK(static_cast<int64_t>(labels.size()) == n, "/labels in ", path,
              " must be 1-D with N = ", n, " entries");
  out.labels = torch::tensor(labels, torch::kInt64);

  if (h5::has_object(file, "paths")) {
    out.paths = h5::read_strings(file, "paths", where);
    XDINO_CHECK(static_cast<int64_t>(out.paths.size()) == n, "/paths in ", path,
                " must be 1-D with N = ", n, " entries");
  } else {
    out.paths.assign(n, "");
  }

  // Missing attributes keep their defaults (files written by other tools may lack them).
  FeatureAttributes& a = out.attributes;
  for (const StringAttr& s : kStringAttrs)
    if (h5::has_attribute(file, s.name)) a.*s.field = h5::read_string_attribute(file, s.name);
  for (const IntAttr& i : kIntAttrs)
    if (h5::has_attribute(file, i.name)) a.*i.field = h5::read_int_attribute(file, i.name);
  if (h5::has_attribute(file, "normalized"))
    a.normalized = h5::read_int_attribute(file, "normalized") != 0;
  return out;
}

}  // namespace xdino::eval
