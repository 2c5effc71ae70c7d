#include "augment/data/image_folder.h"

#include <algorithm>
#include <cctype>

#include "augment/data/decode.h"
#include "core/atomic_file.h"
#include "core/check.h"

namespace xdino::augment {
namespace fs = std::filesystem;

namespace {

std::string strip_trailing_slashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

struct Listing {
  std::vector<std::string> files;
  std::vector<std::string> dirs;
};

// One folder's entries, as os.scandir sees them: is_dir() follows symlinks; anything that is
// not a folder (broken links included) counts as a file.
Listing list_folder(const fs::path& dir) {
  Listing out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  XDINO_CHECK(!ec, "cannot list ", dir, ": ", ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    XDINO_CHECK(!ec, "cannot list ", dir, ": ", ec.message());
    std::error_code is_dir_ec;
    const bool is_dir = fs::is_directory(it->path(), is_dir_ec);
    (is_dir ? out.dirs : out.files).push_back(it->path().filename().string());
  }
  XDINO_CHECK(!ec, "cannot list ", dir, ": ", ec.message());
  std::sort(out.files.begin(), out.files.end());
  std::sort(out.dirs.begin(), out.dirs.end());
  return out;
}

struct WalkEntry {
  std::string rel_dir;  // below the class folder: "" or "/sub" or "/sub/deeper"
  std::vector<std::string> files;
};

// os.walk(top, followlinks=True), skipping only true symlink cycles (a folder that is its own
// ancestor), where Python would recurse until the path is too long.
void walk(const fs::path& dir, const std::string& rel_dir, std::vector<fs::path>& ancestors,
          std::vector<WalkEntry>& out) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (!ec && std::find(ancestors.begin(), ancestors.end(), canonical) != ancestors.end()) return;
  ancestors.push_back(canonical);
  Listing listing = list_folder(dir);
  out.push_back({rel_dir, std::move(listing.files)});
  for (const std::string& sub : listing.dirs) walk(dir / sub, rel_dir + "/" + sub, ancestors, out);
  ancestors.pop_back();
}

}  // namespace

bool has_image_extension(std::string_view file_name) {
  std::string lower(file_name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::string_view ext : kImageExtensions)
    if (lower.size() >= ext.size() &&
        lower.compare(lower.size() - ext.size(), ext.size(), ext) == 0)
      return true;
  return false;
}

FolderLayout detect_folder_layout(const fs::path& root) {
  for (const std::string& f : list_folder(root).files)
    if (has_image_extension(f)) return FolderLayout::kFlat;
  return FolderLayout::kClasses;
}

ImageFolderDataset::ImageFolderDataset(const std::string& root, FolderLayout layout,
                                       DecodeOptions decode)
    : root_(strip_trailing_slashes(root)), flat_(layout == FolderLayout::kFlat), decode_(decode) {
  XDINO_CHECK_ARG(fs::is_directory(root_), "image folder ", root_, " does not exist");
  if (flat_) {
    for (const std::string& f : list_folder(root_).files) {
      if (!has_image_extension(f)) continue;
      relative_.push_back(f);
      labels_.push_back(-1);
    }
    XDINO_CHECK_ARG(!labels_.empty(), "no image files in ", root_,
                    " (extensions: .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp)");
    resolve_decode();
    return;
  }
  classes_ = list_folder(root_).dirs;
  XDINO_CHECK_ARG(!classes_.empty(), "no class folders and no images in ", root_,
                  ": expected ROOT/<class>/<image> (ImageFolder) or images directly in ROOT");
  for (size_t c = 0; c < classes_.size(); ++c) {
    std::vector<WalkEntry> entries;
    std::vector<fs::path> ancestors;
    walk(fs::path(root_) / classes_[c], "", ancestors, entries);
    std::sort(entries.begin(), entries.end(),
              [](const WalkEntry& a, const WalkEntry& b) { return a.rel_dir < b.rel_dir; });
    const size_t before = labels_.size();
    for (const WalkEntry& e : entries) {
      for (const std::string& f : e.files) {
        if (!has_image_extension(f)) continue;
        relative_.push_back(classes_[c] + e.rel_dir + "/" + f);
        labels_.push_back(static_cast<int32_t>(c));
      }
    }
    XDINO_CHECK_ARG(labels_.size() > before, "class folder ", root_, "/", classes_[c],
                    " holds no image file (torchvision's ImageFolder refuses this too): add "
                    "images or remove the folder");
  }
  resolve_decode();
}

void ImageFolderDataset::resolve_decode() {
  decode_ = resolve_pixels(
      decode_, size(), [this](int64_t i) { return read_file(path(i)); },
      [this](int64_t i) { return path(i); });
}

int64_t ImageFolderDataset::label(int64_t i) const {
  check_index(i);
  return labels_[static_cast<size_t>(i)];
}

std::string_view ImageFolderDataset::relative_path(int64_t i) const {
  check_index(i);
  return relative_[static_cast<size_t>(i)];
}

std::string ImageFolderDataset::path(int64_t i) const {
  std::string p = root_ == "/" ? "" : root_;
  p += '/';
  p += relative_path(i);
  return p;
}

Image ImageFolderDataset::load(int64_t i) const { return read_image(path(i), decode_); }

}  // namespace xdino::augment
