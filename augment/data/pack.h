// Packing an image folder into HDF5 shards (`dino pack`), in the layout of h5_dataset.h.
//
// Contract:
//  - The split of `data_path` that open_dataset() finds must be an ImageFolder or a flat
//    folder (anything else throws UsageError). The files' original bytes are stored, not
//    re-encoded, in dataset order, with labels, class names and paths below the folder.
//  - Shards hold at most shard_size_mb MB of encoded images each (at least one image). One
//    shard is written as OUTPUT/<split>.h5, several as OUTPUT/<split>-00000-of-0000N.h5;
//    each file is written atomically (temp + rename), and stale shards of the same split
//    from an earlier pack with another shard count are removed afterwards.
//  - check_images decodes every image first, as training decodes the folder (8-bit, or the
//    float pipeline for float and 16-bit images, channels as stored: decode.h's kAuto), and
//    leaves out (with a warning) those that fail, so the pack holds only readable images;
//    otherwise corrupt files are packed as they are and skipped by the loader at training
//    time.
//  - Failures throw xdino::Error naming the file; the output folder is created if missing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace xdino::augment {

struct PackOptions {
  std::string data_path;
  std::string split = "train";
  std::string output_dir = ".";
  double shard_size_mb = 4096;  // fractions allowed (tests use KB-sized shards)
  bool check_images = false;
  int64_t max_samples = 0;  // class-balanced subset, as DatasetOptions::max_samples
  int64_t num_workers = 0;  // decoding threads for check_images; 0: hardware cores
};

struct PackResult {
  std::vector<std::filesystem::path> files;
  int64_t images = 0;
  int64_t bytes = 0;    // encoded bytes stored
  int64_t skipped = 0;  // unreadable images left out (check_images)
};

PackResult pack_image_folder(const PackOptions& options);

}  // namespace xdino::augment
