// Image files in folders: torchvision's ImageFolder, and unlabeled flat folders.
//
// Contract:
//  - Classes layout (ImageFolder): every subfolder of `root` is a class (symlinks followed,
//    hidden ones included), class id = rank of its name in byte-wise sorted order. Samples are
//    found like torchvision's make_dataset: per class in id order, os.walk(followlinks=True)
//    with the (folder, files) entries sorted by folder path and the files of each folder
//    sorted by name; a file is an image if its lower-cased name ends with one of
//    kImageExtensions. A class with no image, or a root with no class, throws UsageError.
//  - Flat layout: the image files directly inside `root`, sorted by name; label -1, no class.
//  - path(i) = root + "/" + relative_path(i), with `root` as given minus trailing slashes.
//  - Construction lists the folder tree once (seconds for ImageNet); nothing is decoded.
#pragma once

#include <array>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "augment/data/dataset.h"
#include "augment/data/decode.h"

namespace xdino::augment {

// torchvision.datasets.folder.IMG_EXTENSIONS.
inline constexpr std::array<std::string_view, 9> kImageExtensions = {
    ".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};

bool has_image_extension(std::string_view file_name);

enum class FolderLayout { kClasses, kFlat };

// kFlat if `root` holds image files directly, else kClasses.
FolderLayout detect_folder_layout(const std::filesystem::path& root);

class ImageFolderDataset : public Dataset {
 public:
  // decode: how load() decodes (decode.h); kAuto is resolved here from the first image.
  ImageFolderDataset(const std::string& root, FolderLayout layout, DecodeOptions decode = {});

  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  int64_t label(int64_t i) const override;
  const std::vector<std::string>& class_names() const override { return classes_; }
  std::string path(int64_t i) const override;
  Image load(int64_t i) const override;
  std::string format() const override { return flat_ ? "folder" : "imagefolder"; }
  std::string location() const override { return root_; }

  // Path below the root ("cat/a.png"), as packed into HDF5 shards.
  std::string_view relative_path(int64_t i) const;

 private:
  void resolve_decode();  // kAuto -> k8Bit or kFloat (decode.h)

  std::string root_;
  bool flat_;
  DecodeOptions decode_;
  std::vector<std::string> classes_;
  StringList relative_;
  std::vector<int32_t> labels_;
};

}  // namespace xdino::augment
