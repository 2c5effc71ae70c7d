// iBOT's block masks, drawn as dinov2 draws them (dinov2's data/masking.py, MaskingGenerator,
// and data/collate.py, collate_data_and_cast; docs/dino.md, "iBOT"), from a random stream of
// our own: dinov2's comes from Python's `random`, which no C++ program reproduces, so tests
// check the rules (tests/data/dinov2 holds dinov2's masks and boxes to replay them).
//
// Contract:
//  - MaskRandom(seed, iteration, micro_batch, rank): the stream of one micro-batch of one
//    process, a pure function of those four numbers, so that a resumed run draws the masks an
//    uninterrupted one draws. uniform(a, b) is a + (b - a) * u, u in [0, 1) with 53 bits;
//    randint(a, b) is uniform over the integers a..b (both included).
//  - BlockMaskGenerator(options): masks of an H x W token grid. operator()(count, random)
//    returns an (H, W) bool tensor with at most `count` patches set, in blocks: while fewer
//    than `count` are set, one block of at most m = min(count - set, max_num_patches) new
//    patches is placed (up to 10 tries: area ~ U(min_num_patches, m), aspect ratio
//    exp(U(ln min_aspect, ln max_aspect)), h = round(sqrt(area * ratio)) and
//    w = round(sqrt(area / ratio)) half to even, kept only when h < H and w < W, then
//    top ~ U{0..H-h} and left ~ U{0..W-w}; place_block accepts it when it adds 1..m new
//    patches); a block that adds none ends the mask short of `count`, as dinov2's does.
//  - max_num_patches_for(crop, patch): dinov2's train.py expression ((0.5 S) // p * S) // p.
//  - draw_batch_masks(images, generator, ratio_min, ratio_max, probability, random): the masks
//    of `images` global-crop rows (crop-major: [view 0 of every sample; view 1 of every
//    sample]). int(images * probability) rows get a mask, the k-th of
//    int(N * U(r_k, r_k+1)) patches with r = linspace(ratio_min, ratio_max, count + 1) in
//    float32, the others none; then the rows are shuffled. Returns BatchMasks.
//  - batch_masks(masks): BatchMasks of given (images, N) bool masks: indices of the set
//    entries in the row-major flattening, and each one's weight 1 / (set patches of its row),
//    float32 (dinov2's masks_weight).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <random>

namespace xdino::ssl {

class MaskRandom {
 public:
  MaskRandom(int64_t seed, int64_t iteration, int64_t micro_batch, int64_t rank);
  double uniform(double a, double b);
  int64_t randint(int64_t a, int64_t b);

 private:
  std::mt19937_64 engine_;
};

struct BlockMaskOptions {
  int64_t height = 14, width = 14;
  int64_t min_num_patches = 4;
  double max_num_patches = 98;
  double min_aspect = 0.3;
  double max_aspect = 1 / 0.3;
};

class BlockMaskGenerator {
 public:
  explicit BlockMaskGenerator(const BlockMaskOptions& options);
  torch::Tensor operator()(int64_t count, MaskRandom& random) const;
  const BlockMaskOptions& options() const { return options_; }
  int64_t patches() const { return options_.height * options_.width; }

  // The box (top, left, h, w) on `mask` (height x width, row-major): when it would set between
  // 1 and `max_new` patches that are not set yet, sets them and returns how many; else 0.
  static int64_t place_block(bool* mask, int64_t width, int64_t top, int64_t left, int64_t h,
                             int64_t w, double max_new);

 private:
  int64_t one_block(bool* mask, double max_new, MaskRandom& random) const;
  BlockMaskOptions options_;
};

double max_num_patches_for(int64_t crop_size, int64_t patch_size);

struct BatchMasks {
  torch::Tensor masks;    // (images, N) bool
  torch::Tensor indices;  // (n,) int64 into masks.flatten()
  torch::Tensor weights;  // (n,) float32
  int64_t count() const { return indices.defined() ? indices.size(0) : 0; }
};

BatchMasks draw_batch_masks(int64_t images, const BlockMaskGenerator& generator, double ratio_min,
                            double ratio_max, double probability, MaskRandom& random);
BatchMasks batch_masks(const torch::Tensor& masks);

}  // namespace xdino::ssl
