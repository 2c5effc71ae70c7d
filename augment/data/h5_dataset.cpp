#include "augment/data/h5_dataset.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "augment/data/decode.h"
#include "augment/data/h5.h"
#include "core/check.h"

namespace xdino::augment {
namespace fs = std::filesystem;

struct H5Dataset::Shard {
  std::string file;
  h5::H5Object handle;
  h5::H5Object images;  // for the HDF5 read path
  std::vector<int64_t> offsets;
  int64_t data_address = -1;  // file offset of /images when contiguous, else -1
  int64_t first_path = -1;    // index of its first stored path in paths_, or -1: none stored
  int fd = -1;

  void read(int64_t begin, int64_t end, uint8_t* out) const {
    if (fd < 0) {
      h5::read_bytes(images, begin, end, out, file);
      return;
    }
    int64_t done = 0;
    while (done < end - begin) {
      const ssize_t n = ::pread(fd, out + done, static_cast<size_t>(end - begin - done),
                                static_cast<off_t>(data_address + begin + done));
      if (n < 0 && errno == EINTR) continue;
      XDINO_CHECK(n > 0, "cannot read bytes ", begin + done, "..", end, " of /images in ", file,
                  ": ",
                  n == 0 ? "unexpected end of file (truncated shard?)" : std::strerror(errno));
      done += n;
    }
  }

  // Switches to pread() only after checking that it sees what HDF5 sees.
  void enable_direct_reads(int64_t images_length) {
    haddr_t address;
    {
      std::lock_guard<std::recursive_mutex> lock(h5::h5_mutex());
      address = H5Dget_offset(images.get());
    }
    if (address == HADDR_UNDEF) return;  // chunked, compressed or unallocated: HDF5 reads it
    const int f = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (f < 0) return;
    const int64_t probe = std::min<int64_t>(images_length, 64);
    std::vector<uint8_t> via_h5(static_cast<size_t>(probe)), direct(static_cast<size_t>(probe));
    h5::read_bytes(images, 0, probe, via_h5.data(), file);
    const ssize_t got = ::pread(f, direct.data(), direct.size(), static_cast<off_t>(address));
    if (got != probe || via_h5 != direct) {
      ::close(f);
      return;
    }
    fd = f;
    data_address = static_cast<int64_t>(address);
  }
};

H5Dataset::H5Dataset(const std::vector<fs::path>& shards, DecodeOptions decode) : decode_(decode) {
  XDINO_CHECK(!shards.empty(), "no HDF5 shard to open");
  bool have_names = false;
  for (size_t k = 0; k < shards.size(); ++k) {
    auto s = std::make_unique<Shard>();
    s->file = shards[k].string();
    const std::string& where = s->file;
    s->handle = h5::open_file(where);
    const std::string format = h5::read_string_attribute(s->handle, "format");
    XDINO_CHECK(format.empty() || format == kH5Format, where, " is an HDF5 file of format '",
                format, "', not packed images");
    const int64_t version = h5::read_int_attribute(s->handle, "version");
    XDINO_CHECK(version <= kH5Version, where, " is packed-images version ", version,
                "; this build reads up to ", kH5Version, " (update xcit-dino)");
    s->images = h5::open_h5_dataset(s->handle, "images", where);
    const int64_t images_length = h5::dataset_length(s->images, where + ":/images");
    s->offsets = h5::read_int64(s->handle, "offsets", where);
    XDINO_CHECK(!s->offsets.empty(), where, ": /offsets is empty (it holds n + 1 entries)");
    const int64_t n = static_cast<int64_t>(s->offsets.size()) - 1;
    for (int64_t i = 0; i < n; ++i)
      XDINO_CHECK(s->offsets[i] >= 0 && s->offsets[i] <= s->offsets[i + 1] &&
                      s->offsets[i + 1] <= images_length,
                  where, ": /offsets[", i, "..", i + 1, "] = ", s->offsets[i], "..",
                  s->offsets[i + 1], " is not a range of the ", images_length, " bytes of /images");

    std::vector<int64_t> labels(static_cast<size_t>(n), -1);
    if (h5::has_object(s->handle, "labels")) labels = h5::read_int64(s->handle, "labels", where);
    XDINO_CHECK(static_cast<int64_t>(labels.size()) == n, where, " has ", labels.size(),
                " labels for ", n, " images");
    std::vector<std::string> names;
    if (h5::has_object(s->handle, "class_names"))
      names = h5::read_strings(s->handle, "class_names", where);
    if (k == 0) {
      classes_ = names;
      have_names = !names.empty();
    }
    XDINO_CHECK(names == classes_ || (!have_names && names.empty()), where,
                " has other class names than ", shards[0], "; shards of one dataset must agree");
    const bool labeled =
        std::any_of(labels.begin(), labels.end(), [](int64_t l) { return l >= 0; });
    for (int64_t l : labels) {
      XDINO_CHECK(l >= (labeled ? 0 : -1), where, ": label ", l,
                  " in a labeled dataset (mixing -1 and class ids)");
      // Labels are stored as int32 and, without class names, name classes 0..max: bound them.
      XDINO_CHECK(l < kH5MaxClasses, where, ": label ", l, " is beyond the ", kH5MaxClasses,
                  " classes a dataset may have (corrupt labels?)");
      XDINO_CHECK(!have_names || l < static_cast<int64_t>(classes_.size()), where, ": label ", l,
                  " but only ", classes_.size(), " class names");
      labels_.push_back(static_cast<int32_t>(l));
    }

    if (h5::has_object(s->handle, "paths")) {
      const std::vector<std::string> paths = h5::read_strings(s->handle, "paths", where);
      XDINO_CHECK(static_cast<int64_t>(paths.size()) == n, where, " has ", paths.size(),
                  " paths for ", n, " images");
      s->first_path = static_cast<int64_t>(paths_.size());
      for (const std::string& p : paths) paths_.push_back(p);
    }  // else path(i) makes "<shard>#<i>" when asked (a million-image shard need not hold them)
    s->enable_direct_reads(images_length);
    first_.push_back(
        k == 0 ? 0 : first_.back() + static_cast<int64_t>(shards_.back()->offsets.size()) - 1);
    shards_.push_back(std::move(s));
  }
  if (!have_names) {  // labels without names: name the classes by their ids
    const int64_t max_label =
        labels_.empty() ? -1 : *std::max_element(labels_.begin(), labels_.end());
    for (int64_t c = 0; c <= max_label; ++c) classes_.push_back(std::to_string(c));
  }
  decode_ = resolve_pixels(
      decode_, size(), [this](int64_t i) { return encoded(i); },
      [this](int64_t i) { return path(i); });
}

H5Dataset::~H5Dataset() {
  for (const auto& s : shards_)
    if (s->fd >= 0) ::close(s->fd);
}

int64_t H5Dataset::direct_shards() const {
  return std::count_if(shards_.begin(), shards_.end(), [](const auto& s) { return s->fd >= 0; });
}

std::string H5Dataset::location() const {
  return shards_.size() == 1
             ? shards_[0]->file
             : shards_[0]->file + " (+" + std::to_string(shards_.size() - 1) + " shards)";
}

const H5Dataset::Shard& H5Dataset::shard_of(int64_t i, int64_t* local) const {
  check_index(i);
  const size_t k =
      static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), i) - first_.begin() - 1);
  *local = i - first_[k];
  return *shards_[k];
}

int64_t H5Dataset::label(int64_t i) const {
  check_index(i);
  return labels_[static_cast<size_t>(i)];
}

std::string H5Dataset::path(int64_t i) const {
  int64_t j = 0;
  const Shard& s = shard_of(i, &j);
  if (s.first_path < 0) return s.file + "#" + std::to_string(j);
  return std::string(paths_[static_cast<size_t>(s.first_path + j)]);
}

std::string H5Dataset::encoded(int64_t i) const {
  int64_t j = 0;
  const Shard& s = shard_of(i, &j);
  const int64_t begin = s.offsets[static_cast<size_t>(j)];
  const int64_t end = s.offsets[static_cast<size_t>(j) + 1];
  std::string bytes(static_cast<size_t>(end - begin), '\0');
  s.read(begin, end, reinterpret_cast<uint8_t*>(bytes.data()));
  return bytes;
}

Image H5Dataset::load(int64_t i) const {
  int64_t j = 0;
  const std::string name =
      path(i) + " (sample " + std::to_string(i) + " of " + shard_of(i, &j).file + ")";
  return decode_image(encoded(i), name, decode_);
}

}  // namespace xdino::augment
