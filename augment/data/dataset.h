// Datasets: indexed, labelled images, whatever the storage (see the formats' own headers).
//
// Contract:
//  - A Dataset is immutable after construction; size(), label(), path() and class_names() are
//    cheap (held in memory) and load() decodes one image. Every method is thread-safe, so
//    loader threads share one instance (hold it in a std::shared_ptr<const Dataset>).
//  - label(i) is in [0, num_classes()), or -1 for unlabeled data (num_classes() == 0).
//    Class ids are ranks of the sorted class names (torchvision's convention).
//  - path(i) is a stable identifier of sample i: the file path for folders, the path recorded
//    at packing time for HDF5 shards, "FILE#i" for IDX files.
//  - load(i) returns an Image (CV_8UC3 RGB). A corrupt or unreadable sample throws
//    xdino::Error naming path(i); the loader turns that into "report once, skip" (loader.h).
//    An index out of range throws xdino::Error too.
//
// Opening a dataset by its layout on disk is augment/data/open_dataset.h's, above the formats.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "augment/ops/image.h"

namespace xdino::augment {

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  virtual int64_t label(int64_t i) const = 0;
  virtual const std::vector<std::string>& class_names() const = 0;
  virtual std::string path(int64_t i) const = 0;
  virtual Image load(int64_t i) const = 0;
  // "imagefolder", "folder" (unlabeled), "idx", "hdf5" (a subset reports its base's).
  virtual std::string format() const = 0;
  // What was opened: a folder, a file, or the first of several shards.
  virtual std::string location() const = 0;

  int64_t num_classes() const { return static_cast<int64_t>(class_names().size()); }
  std::vector<int64_t> labels() const;
  // One line for logs: "imagefolder /data/train: 1281167 images, 1000 classes".
  std::string describe() const;

 protected:
  // Throws xdino::Error unless 0 <= i < size().
  void check_index(int64_t i) const;
};

using DatasetPtr = std::shared_ptr<const Dataset>;

// The indices of a deterministic, class-balanced subset of max_samples samples (all when
// max_samples <= 0 or >= size()), ascending. Selection: round-robin over class ids 0, 1, ...,
// each turn taking the next not-yet-taken sample of that class in dataset order, until
// max_samples are taken. Unlabeled data keeps its first max_samples.
std::vector<int64_t> balanced_subset(const Dataset& dataset, int64_t max_samples);

// A view of some samples of another dataset, in the given order; class names are kept.
class SubsetDataset : public Dataset {
 public:
  SubsetDataset(DatasetPtr base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  int64_t label(int64_t i) const override;
  const std::vector<std::string>& class_names() const override { return base_->class_names(); }
  std::string path(int64_t i) const override;
  Image load(int64_t i) const override;
  std::string format() const override { return base_->format(); }
  std::string location() const override { return base_->location(); }
  const Dataset& base() const { return *base_; }
  int64_t base_index(int64_t i) const;

 private:
  DatasetPtr base_;
  std::vector<int64_t> indices_;
};

// Many strings in one buffer: 1.3M ImageNet paths cost ~70 MB instead of ~130 MB as
// std::strings.
class StringList {
 public:
  void push_back(std::string_view s);
  void reserve(size_t count, size_t chars);
  std::string_view operator[](size_t i) const {
    return std::string_view(chars_.data() + ends_[i] - length(i), length(i));
  }
  size_t size() const { return ends_.size(); }

 private:
  size_t length(size_t i) const { return ends_[i] - (i == 0 ? 0 : ends_[i - 1]); }
  std::string chars_;
  std::vector<size_t> ends_;
};

}  // namespace xdino::augment
