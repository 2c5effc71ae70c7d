// A list of image files given by path: the ImgListDataset / OxfordParisDataset of the
// official copy-detection and retrieval scripts, whose image sets are lists, not class folders.
//
// Contract:
//  - Samples are `paths` in the given order, unlabeled (label -1, no class names); path(i) is
//    paths[i] as given. Nothing is read at construction.
//  - load(i) decodes paths[i] as PIL's Image.open + convert("RGB") does (augment/data/decode.h)
//    without EXIF orientation (PIL does not apply it); failures throw xdino::Error naming the
//    path. Thread-safe (immutable).
#pragma once

#include <string>
#include <vector>

#include "augment/data/dataset.h"

namespace xdino::augment {

class ImageListDataset : public Dataset {
 public:
  // `location`: what the list is, for logs (a folder, a ground-truth file).
  ImageListDataset(std::vector<std::string> paths, std::string location);

  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  int64_t label(int64_t i) const override;
  const std::vector<std::string>& class_names() const override { return no_classes_; }
  std::string path(int64_t i) const override;
  Image load(int64_t i) const override;
  std::string format() const override { return "list"; }
  std::string location() const override { return location_; }

 private:
  std::vector<std::string> paths_;
  std::string location_;
  std::vector<std::string> no_classes_;
};

}  // namespace xdino::augment
