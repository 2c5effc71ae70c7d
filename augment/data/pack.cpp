#include "augment/data/pack.h"

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <regex>
#include <thread>

#include "augment/data/decode.h"
#include "augment/data/h5.h"
#include "augment/data/h5_dataset.h"
#include "augment/data/image_folder.h"
#include "augment/data/open_dataset.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "core/progress.h"

namespace xdino::augment {
namespace fs = std::filesystem;

namespace {

struct Source {
  const ImageFolderDataset* folder = nullptr;
  std::vector<int64_t> indices;  // into `folder`, in pack order
};

Source resolve_folder(const Dataset& ds) {
  Source s;
  const Dataset* base = &ds;
  const auto* subset = dynamic_cast<const SubsetDataset*>(&ds);
  if (subset != nullptr) base = &subset->base();
  s.folder = dynamic_cast<const ImageFolderDataset*>(base);
  XDINO_CHECK_ARG(s.folder != nullptr, "dino pack packs image folders, and ", ds.describe(),
                  " is not one");
  for (int64_t i = 0; i < ds.size(); ++i) s.indices.push_back(subset ? subset->base_index(i) : i);
  return s;
}

// Decodes every image on `threads` threads; returns the readable ones, in order.
std::vector<int64_t> readable_only(const ImageFolderDataset& folder,
                                   const std::vector<int64_t>& indices, int64_t threads) {
  std::vector<char> ok(indices.size(), 0);
  std::atomic<size_t> next{0};
  std::mutex log_mutex;
  std::exception_ptr failure;  // anything but an unreadable image: rethrown here after the join
  Progress progress("check images", static_cast<int64_t>(indices.size()));
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < indices.size();) {
      try {
        folder.load(indices[k]);
        ok[k] = 1;
      } catch (const Error& e) {
        log::warn("left out of the pack: ", e.what());
      } catch (...) {  // an exception leaving a thread would end the process with no word
        std::lock_guard<std::mutex> lock(log_mutex);
        if (!failure) failure = std::current_exception();
        next = indices.size();
      }
      if (k % 256 == 0) {
        std::lock_guard<std::mutex> lock(log_mutex);
        const int64_t ahead = static_cast<int64_t>(k) - progress.done();
        if (ahead > 0) progress.step(ahead);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  progress.finish();
  std::vector<int64_t> out;
  for (size_t k = 0; k < indices.size(); ++k)
    if (ok[k]) out.push_back(indices[k]);
  return out;
}

std::string shard_name(const std::string& split, size_t k, size_t count) {
  if (count == 1) return split + ".h5";
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, "-%05zu-of-%05zu.h5", k, count);
  return split + suffix;
}

void write_shard(const fs::path& path, const Source& src, size_t begin, size_t end,
                 const std::vector<int64_t>& sizes, size_t shard, size_t num_shards,
                 const std::string& split, Progress& progress) {
  std::vector<int64_t> offsets{0}, labels;
  std::vector<std::string> paths;
  for (size_t k = begin; k < end; ++k) {
    offsets.push_back(offsets.back() + sizes[k]);
    labels.push_back(src.folder->label(src.indices[k]));
    paths.emplace_back(src.folder->relative_path(src.indices[k]));
  }
  write_atomically(path, [&](const fs::path& tmp) {
    const h5::H5Object file = h5::create_file(tmp.string());
    {
      const h5::H5Object images = h5::create_bytes(file, "images", offsets.back());
      std::string buffer;
      int64_t flushed = 0;
      for (size_t k = begin; k < end; ++k) {
        const std::string file_path = src.folder->path(src.indices[k]);
        const std::string bytes = read_file(file_path);
        XDINO_CHECK(static_cast<int64_t>(bytes.size()) == sizes[k], file_path,
                    " changed size while packing (", sizes[k], " -> ", bytes.size(), " bytes)");
        buffer += bytes;
        if (buffer.size() >= (64u << 20) || k + 1 == end) {
          h5::write_bytes(images, flushed, reinterpret_cast<const uint8_t*>(buffer.data()),
                          static_cast<int64_t>(buffer.size()));
          flushed += static_cast<int64_t>(buffer.size());
          buffer.clear();
        }
        progress.step(1);
      }
    }
    h5::write_int64(file, "offsets", offsets);
    h5::write_int64(file, "labels", labels);
    h5::write_strings(file, "paths", paths);
    h5::write_strings(file, "class_names", src.folder->class_names());
    h5::write_attribute(file, "format", std::string(kH5Format));
    h5::write_attribute(file, "version", kH5Version);
    h5::write_attribute(file, "shard", static_cast<int64_t>(shard));
    h5::write_attribute(file, "num_shards", static_cast<int64_t>(num_shards));
    h5::write_attribute(file, "split", split);
    h5::write_attribute(file, "source", src.folder->location());
  });
}

// Shards of `split` in `dir` from an earlier pack that are not among `keep`.
void remove_stale_shards(const fs::path& dir, const std::string& split,
                         const std::vector<fs::path>& keep) {
  const std::regex pattern(split + R"((-\d{5}-of-\d{5})?\.h5)");
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, pattern)) continue;
    if (std::find(keep.begin(), keep.end(), e.path()) != keep.end()) continue;
    log::info("removing stale shard ", e.path(), " of an earlier pack");
    fs::remove(e.path());
  }
}

}  // namespace

PackResult pack_image_folder(const PackOptions& o) {
  XDINO_CHECK_ARG(!o.data_path.empty(), "--data_path is required: the image folder to pack");
  XDINO_CHECK_ARG(o.shard_size_mb > 0, "--shard_size_mb must be positive, got ", o.shard_size_mb);
  DatasetOptions dopt;
  dopt.max_samples = o.max_samples;
  // --check_images decodes as training will: 8-bit images as 8-bit, a folder of float or
  // 16-bit images (TIFF) with the float pipeline, channels as stored; the 8-bit decoder alone
  // would call every float32 TIFF unreadable.
  if (o.check_images) dopt.decode = float_pixels_if_needed(0);
  const DatasetPtr dataset = open_dataset(o.data_path, o.split, dopt);
  Source src = resolve_folder(*dataset);

  PackResult result;
  if (o.check_images) {
    const int64_t threads =
        o.num_workers > 0 ? o.num_workers : std::max(1u, std::thread::hardware_concurrency());
    std::vector<int64_t> good = readable_only(*src.folder, src.indices, threads);
    result.skipped = static_cast<int64_t>(src.indices.size() - good.size());
    src.indices = std::move(good);
  }
  XDINO_CHECK(!src.indices.empty(), "nothing to pack in ", o.data_path);

  std::vector<int64_t> sizes;
  for (int64_t i : src.indices) {
    std::error_code ec;
    const auto size = fs::file_size(src.folder->path(i), ec);
    XDINO_CHECK(!ec, "cannot read the size of ", src.folder->path(i), ": ", ec.message());
    sizes.push_back(static_cast<int64_t>(size));
    result.bytes += static_cast<int64_t>(size);
  }
  const int64_t limit = std::max<int64_t>(1, static_cast<int64_t>(o.shard_size_mb * (1 << 20)));
  std::vector<size_t> bounds{0};  // shard k = items [bounds[k], bounds[k + 1])
  int64_t in_shard = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (in_shard > 0 && in_shard + sizes[k] > limit) {
      bounds.push_back(k);
      in_shard = 0;
    }
    in_shard += sizes[k];
  }
  bounds.push_back(sizes.size());

  const fs::path out_dir(o.output_dir);
  fs::create_directories(out_dir);
  const size_t num_shards = bounds.size() - 1;
  log::info("packing ", src.indices.size(), " images (", result.bytes >> 20, " MB) into ",
            num_shards, " shard", num_shards > 1 ? "s" : "", " in ", out_dir);
  Progress progress("pack", static_cast<int64_t>(src.indices.size()));
  for (size_t k = 0; k < num_shards; ++k) {
    const fs::path path = out_dir / shard_name(o.split, k, num_shards);
    write_shard(path, src, bounds[k], bounds[k + 1], sizes, k, num_shards, o.split, progress);
    result.files.push_back(path);
  }
  progress.finish();
  remove_stale_shards(out_dir, o.split, result.files);
  result.images = static_cast<int64_t>(src.indices.size());
  return result;
}

}  // namespace xdino::augment
