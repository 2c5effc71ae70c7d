#include "eval/features_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
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
using StringField = std::string FeatureAttributes::*;
using IntField = int64_t FeatureAttributes::*;
struct StringAttr {
  const char* name;
  StringField field;
};
const StringAttr kStringAttrs[] = {{"arch", &FeatureAttributes::arch},
                                   {"checkpoint", &FeatureAttributes::checkpoint},
                                   {"checkpoint_key", &FeatureAttributes::checkpoint_key},
                                   {"split", &FeatureAttributes::split},
                                   {"feature", &FeatureAttributes::feature}};
struct IntAttr {
  const char* name;
  IntField field;
};
const IntAttr kIntAttrs[] = {{"image_size", &FeatureAttributes::image_size},
                             {"patch_size", &FeatureAttributes::patch_size}};

// Checks `set` and writes /features, /labels, /paths and the attributes into `file`.
void write_feature_datasets(const h5::H5Object& file, const FeatureSet& set, const fs::path& path) {
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
  h5::write_float32(file, "features", {n, features.size(1)}, features.data_ptr<float>());
  h5::write_int64(file, "labels", label_values);
  h5::write_strings(file, "paths", paths);
  const FeatureAttributes& a = set.attributes;
  for (const StringAttr& s : kStringAttrs) h5::write_attribute(file, s.name, a.*s.field);
  for (const IntAttr& i : kIntAttrs) h5::write_attribute(file, i.name, a.*i.field);
  h5::write_attribute(file, "normalized", int64_t{a.normalized ? 1 : 0});
}

// write_atomically with a full disk or a file-size limit said as the user wants it: HDF5's
// message names the temporary file and its own internals; the user wants the file they asked
// for and the reason. errno still holds the failed write's (HDF5 reports without system calls
// of its own).
void write_feature_file(const fs::path& path, const std::function<void(const fs::path&)>& body) {
  write_atomically(path, [&](const fs::path& tmp) {
    errno = 0;
    try {
      body(tmp);
    } catch (const Error&) {
      const int err = errno;
      if (err == ENOSPC || err == EFBIG || err == EDQUOT || err == EIO)
        throw_write_error(path, err);
      throw;
    }
  });
}

// /patch_tokens, made at the first batch (T and D are known then) with a row per dataset image.
class PatchTokenRows {
 public:
  PatchTokenRows(const h5::H5Object& file, const fs::path& path, int64_t images)
      : file_(file), path_(path), images_(images) {}

  void write(const torch::Tensor& tokens, const torch::Tensor& dataset_index) {
    XDINO_CHECK(
        tokens.dim() == 3 && dataset_index.dim() == 1 && tokens.size(0) == dataset_index.size(0),
        "patch tokens for ", path_, " must be [B, T, D] with B dataset indices");
    if (!rows_.valid()) {
      shape_ = {images_, tokens.size(1), tokens.size(2)};
      rows_ = h5::create_float32_rows(file_, "patch_tokens", shape_);
    }
    XDINO_CHECK(tokens.size(1) == shape_[1] && tokens.size(2) == shape_[2], "patch tokens of ",
                tokens.sizes(), " after [", shape_[1], ", ", shape_[2], "] for ", path_,
                ": every image must give the same tokens (one --image_size)");
    const torch::Tensor where = dataset_index.to(torch::kCPU, torch::kInt64);
    if (where.numel() > 0)
      XDINO_CHECK(where.min().item<int64_t>() >= 0 && where.max().item<int64_t>() < images_,
                  "patch tokens for ", path_, " name a dataset index outside [0, ", images_, ")");
    written_.resize(static_cast<size_t>(images_), false);
    for (int64_t i = 0; i < where.numel(); ++i) written_[where[i].item<int64_t>()] = true;
    // HDF5 fills a selection of many rows in file order: sort the batch by index first. An
    // index can come twice (the sampler's padding across processes, the loader's stand-in for
    // an unreadable image): the copies hold the same image's tokens, and one is written.
    auto [sorted, order] = dataset_index.to(torch::kCPU, torch::kInt64).sort();
    if (sorted.numel() > 1) {
      const torch::Tensor first = torch::cat(
          {torch::ones({1}, torch::kBool), sorted.slice(0, 1) != sorted.slice(0, 0, -1)});
      sorted = sorted.masked_select(first);
      order = order.masked_select(first);
    }
    const torch::Tensor contiguous = tokens.index_select(0, order.to(tokens.device()))
                                         .to(torch::kCPU, torch::kFloat32)
                                         .contiguous();
    const torch::Tensor idx = sorted.contiguous();
    h5::write_float32_rows(rows_, {idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel()},
                           contiguous.data_ptr<float>());
  }

  // Moves row keep[i] to row i (keep ascending, so no row is overwritten before it is read)
  // and drops the rest.
  void keep(const torch::Tensor& indices) {
    XDINO_CHECK(rows_.valid(), "no patch tokens were written to ", path_);
    const torch::Tensor k = indices.to(torch::kCPU, torch::kInt64).contiguous();
    const int64_t* p = k.data_ptr<int64_t>();
    const int64_t kept = k.numel();
    // The rows are moved down in place: that needs them ascending, each once, each written.
    for (int64_t i = 0; i < kept; ++i)
      XDINO_CHECK(p[i] >= 0 && p[i] < shape_[0] && (i == 0 || p[i] > p[i - 1]) &&
                      written_[static_cast<size_t>(p[i])],
                  "the feature rows for ", path_, " keep dataset index ", p[i], " at row ", i,
                  ": kept indices must ascend, each an image whose patch tokens were written");
    if (kept < shape_[0]) {
      std::vector<float> row(static_cast<size_t>(shape_[1] * shape_[2]));
      for (int64_t i = 0; i < kept; ++i) {
        if (p[i] == i) continue;
        h5::read_float32_rows(rows_, p[i], 1, row.data(), path_.string());
        h5::write_float32_rows(rows_, {i}, row.data());
      }
      h5::resize_rows(rows_, kept);
    }
  }

 private:
  const h5::H5Object& file_;
  fs::path path_;
  int64_t images_;
  h5::H5Object rows_;
  std::vector<int64_t> shape_;
  std::vector<bool> written_;  // per dataset index
};

}  // namespace

void write_features(const fs::path& path, const FeatureSet& set) {
  write_feature_file(path, [&](const fs::path& tmp) {
    const h5::H5Object file = h5::create_file(tmp.string());
    write_feature_datasets(file, set, path);
    h5::flush(file, tmp.string());
  });
}

void write_features_with_patch_tokens(
    const fs::path& path, int64_t images,
    const std::function<FeatureSet(const PatchTokenSink& sink)>& extract) {
  write_feature_file(path, [&](const fs::path& tmp) {
    const h5::H5Object file = h5::create_file(tmp.string());
    PatchTokenRows rows(file, path, images);
    const FeatureSet set = extract([&](const torch::Tensor& tokens, const torch::Tensor& index) {
      rows.write(tokens, index);
    });
    XDINO_CHECK(set.indices.defined() && set.indices.size(0) == set.features.size(0),
                "the features for ", path, " carry no dataset index per row");
    rows.keep(set.indices);
    write_feature_datasets(file, set, path);
    h5::flush(file, tmp.string());
  });
}

torch::Tensor read_patch_tokens(const fs::path& path) {
  const std::string problem = file_problem(path);
  XDINO_CHECK(problem.empty(), "feature file ", path, " ", problem);
  const std::string where = path.string();
  const h5::H5Object file = h5::open_file(where);
  XDINO_CHECK(h5::has_object(file, "patch_tokens"), "feature file ", path,
              " has no /patch_tokens: write it with dino features --patch_tokens");
  const h5::H5Object tokens = h5::open_h5_dataset(file, "patch_tokens", where);
  const auto dims = h5::dataset_shape(tokens, where + ":/patch_tokens");
  XDINO_CHECK(dims.size() == 3, "/patch_tokens in ", path, " must be 3-D [N, T, D], has rank ",
              dims.size());
  torch::Tensor out = torch::empty({dims[0], dims[1], dims[2]}, torch::kFloat32);
  h5::read_float32(tokens, out.data_ptr<float>(), where + ":/patch_tokens");
  return out;
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

bool is_features_file(const fs::path& path) {
  // The signature first: HDF5 would print its error stack for a file that is not its own.
  char head[8] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in.read(head, sizeof head) || std::memcmp(head, "\x89HDF\r\n\x1a\n", 8) != 0) return false;
  try {
    return h5::has_object(h5::open_file(path.string()), "features");
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace xdino::eval
