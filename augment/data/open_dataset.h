// Opening a dataset by its layout on disk: the one factory above the formats (ImageFolder and
// flat folders, IDX, HDF5 shards), so the formats depend on dataset.h and nothing below
// depends on them.
//
// Contract: open_dataset(root, split, options) detects the layout (docs/usage.md, "Data"):
//   train: ROOT.h5 file given directly; else ROOT/train/ (folder); ROOT/train.h5 (or shards
//          ROOT/train-00000-of-00004.h5 ...); IDX train-images-idx3-ubyte[.gz]; else ROOT itself.
//   val:   ROOT/val/; ROOT/val.h5 (or shards); IDX t10k-images-idx3-ubyte[.gz]; else an error.
// A folder with image files directly inside is an unlabeled flat folder; a folder with only
// subfolders is an ImageFolder. A missing root or split throws xdino::UsageError (exit 2).
// The result is shared and immutable (dataset.h); with options.max_samples it is a
// SubsetDataset over the whole split. Logs one line naming what was opened.
// dataset_layouts(): the layouts above in one line, for the --data_path help of every command.
#pragma once

#include <cstdint>
#include <string>

#include "augment/data/dataset.h"
#include "augment/data/decode.h"

namespace xdino::augment {

struct DatasetOptions {
  // Keep the class-balanced subset of this many samples that balanced_subset() picks
  // (dataset.h), in dataset order (0: all).
  int64_t max_samples = 0;
  // How images are decoded (decode.h): EXIF orientation (torchvision's loader does not apply
  // it) and the pixels: 8-bit RGB (default), or the float pipeline's (16-bit, multispectral;
  // kAuto picks it from the first image). IDX files are 8-bit and always decode as such.
  DecodeOptions decode;
};

DatasetPtr open_dataset(const std::string& root, const std::string& split,
                        const DatasetOptions& options = {});

std::string dataset_layouts();

}  // namespace xdino::augment
