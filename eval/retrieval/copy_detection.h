// `dino copy_detection`: eval_copy_detection.py on the Copydays layout.
//
// Contract:
//  - CopydaysLayout::open(root): the 20 blocks of the official script, in its order: original,
//    strong, jpegqual/{3,5,8,10,15,20,30,50,75}, crops/{10,15,20,30,40,50,60,70,80}; each the
//    *.jpg files of root/<block>, sorted by name. A missing or empty block, or a block other
//    than strong whose size differs from original's (copies are matched to originals by sorted
//    position, as the script's 1:1 mapping), is a UsageError naming it. Each strong image needs
//    at least one original whose first 4 characters it shares (the script's positives).
//  - evaluate(layout, ids): ids is (queries, K) int64, the database indices of each query's K
//    nearest, queries being the blocks' images in block order and the database the originals
//    first (then the distractors). Per block, the mean over its queries of the Holidays AP
//    (ranking.h average_precision) of the positives' ranks within the K. Returns the per-block
//    mAP in block order, "strong", and the mean AP over all queries (ours: the script prints
//    blocks only).
//  - run_copy_detection(): features of the queries, the originals, the distractors and the
//    whitening images (features.h copy_detection_features), each dumped to
//    <output_dir>/copy_detection_features/<set>.h5; with whitening: the mean of the whitening
//    features subtracted from queries and database, then PcaWhitening (whitening.h); L2
//    normalisation; cosine top-min(20, database) (ours: the script fails below 20). Prints the
//    script's "eval on <block> mAP=<x.xxx>" lines and writes <output_dir>/copy_detection.json:
//    protocol, the model fields (frozen_backbone.h), imsize, num_queries, num_database,
//    num_distractors, num_whitening, blocks {name: mAP}, strong_mAP, mAP, seconds. mAPs in
//    percent. Rank 0 evaluates; others return after a barrier.
//  - Flags: the script's (--data_path, --whitening_path, --distractors_path, --imsize 320,
//    --batch_size_per_gpu 16, --num_workers 10, --arch vit_base, --patch_size 8,
//    --pretrained_weights, --checkpoint_key teacher), ours --output_dir. An empty
//    --whitening_path / --distractors_path means none; a given one that is not a folder is a
//    UsageError (the script would silently skip it).
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/json.h"
#include "distributed/communicator.h"
#include "eval/checks_passed.h"
#include "eval/frozen_backbone.h"

namespace xdino::eval::retrieval {

struct CopydaysBlock {
  std::string name;                // "original", "strong", "jpegqual/3", ...
  std::vector<std::string> files;  // names inside the block's folder, sorted
};

struct CopydaysLayout {
  std::string root;
  std::vector<CopydaysBlock> blocks;  // 20, the official order

  static CopydaysLayout open(const std::string& root);
  static const std::vector<std::string>& block_names();
  std::vector<std::string> paths(size_t block) const;
  // Database indices (into the originals) that are positives for query q of block b.
  std::vector<int64_t> positives(size_t block, size_t query) const;
};

struct CopyDetectionScores {
  std::vector<double> block_map;  // per block, fraction (0..1)
  double strong_map = 0;
  double overall_map = 0;  // mean AP over all queries
};

CopyDetectionScores evaluate_copy_detection(const CopydaysLayout& layout, const torch::Tensor& ids);

// The script's search: with `whitening` (N, D) defined, PcaWhitening (whitening.h) learned on
// it and applied to both sides; L2 normalisation; cosine top-k. Returns (queries, k) int64
// database ids, nearest first.
torch::Tensor search_copies(torch::Tensor queries, torch::Tensor database,
                            const torch::Tensor& whitening, int64_t k);

// Image files of a flat folder whose extension the script's is_image_file accepts, sorted.
std::vector<std::string> list_image_files(const std::string& folder);

struct CopyDetectionOptions {
  BackboneSpec model{"vit_base", 8, "", "teacher", 0};
  std::string data_path = "/path/to/copydays/";
  std::string whitening_path;
  std::string distractors_path;
  // --imsize (the square every image is resized to), --batch_size_per_gpu, --num_workers.
  ImageInput input{16, 10, 320, 3};
  bool use_cuda = true;          // search on the GPU (when the run has one), as eval_knn.py's flag
  std::string output_dir = ".";  // ours
};

Json run_copy_detection(const CopyDetectionOptions& options, Communicator& comm,
                        torch::Device device, const ChecksPassed& checks_passed = {});

}  // namespace xdino::eval::retrieval
