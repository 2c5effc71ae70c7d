#include "ssl/masking.h"

#include <cmath>
#include <vector>

#include "core/check.h"

namespace xdino::ssl {
namespace {

// SplitMix64's finaliser: spreads each of the stream's coordinates over all 64 bits.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Python's round(): half to even (the default floating-point rounding mode).
int64_t round_half_even(double v) { return static_cast<int64_t>(std::nearbyint(v)); }

}  // namespace

MaskRandom::MaskRandom(int64_t seed, int64_t iteration, int64_t micro_batch, int64_t rank) {
  uint64_t s = mix(static_cast<uint64_t>(seed) ^ 0x6942'4f54ull);  // "iBOT"
  s = mix(s ^ static_cast<uint64_t>(iteration));
  s = mix(s ^ static_cast<uint64_t>(micro_batch));
  s = mix(s ^ static_cast<uint64_t>(rank));
  engine_.seed(s);
}

double MaskRandom::uniform(double a, double b) {
  const double u = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  return a + (b - a) * u;
}

int64_t MaskRandom::randint(int64_t a, int64_t b) {
  const uint64_t span = static_cast<uint64_t>(b - a) + 1;
  return a + static_cast<int64_t>(engine_() % span);  // bias < 2^-50 for any grid
}

BlockMaskGenerator::BlockMaskGenerator(const BlockMaskOptions& o) : options_(o) {
  XDINO_CHECK(o.height > 0 && o.width > 0 && o.min_num_patches >= 0 && o.min_aspect > 0 &&
                  o.max_aspect >= o.min_aspect,
              "block masks need a positive grid and aspect range, got ", o.height, "x", o.width);
}

int64_t BlockMaskGenerator::place_block(bool* mask, int64_t width, int64_t top, int64_t left,
                                        int64_t h, int64_t w, double max_new) {
  int64_t already = 0;
  for (int64_t i = top; i < top + h; ++i)
    for (int64_t j = left; j < left + w; ++j) already += mask[i * width + j] ? 1 : 0;
  const int64_t fresh = h * w - already;
  if (!(fresh > 0 && static_cast<double>(fresh) <= max_new)) return 0;
  for (int64_t i = top; i < top + h; ++i)
    for (int64_t j = left; j < left + w; ++j) mask[i * width + j] = true;
  return fresh;
}

int64_t BlockMaskGenerator::one_block(bool* mask, double max_new, MaskRandom& random) const {
  const BlockMaskOptions& o = options_;
  const double log_min = std::log(o.min_aspect), log_max = std::log(o.max_aspect);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double area = random.uniform(static_cast<double>(o.min_num_patches), max_new);
    const double ratio = std::exp(random.uniform(log_min, log_max));
    const int64_t h = round_half_even(std::sqrt(area * ratio));
    const int64_t w = round_half_even(std::sqrt(area / ratio));
    if (!(w < o.width && h < o.height)) continue;
    const int64_t top = random.randint(0, o.height - h);
    const int64_t left = random.randint(0, o.width - w);
    const int64_t added = place_block(mask, o.width, top, left, h, w, max_new);
    if (added > 0) return added;
  }
  return 0;
}

torch::Tensor BlockMaskGenerator::operator()(int64_t count, MaskRandom& random) const {
  torch::Tensor mask = torch::zeros({options_.height, options_.width}, torch::kBool);
  bool* cells = mask.data_ptr<bool>();
  int64_t set = 0;
  while (set < count) {
    const double max_new = std::min(static_cast<double>(count - set), options_.max_num_patches);
    const int64_t added = one_block(cells, max_new, random);
    if (added == 0) break;
    set += added;
  }
  return mask;
}

double max_num_patches_for(int64_t crop_size, int64_t patch_size) {
  const double s = static_cast<double>(crop_size), p = static_cast<double>(patch_size);
  return std::floor(std::floor(0.5 * s / p) * s / p);
}

BatchMasks batch_masks(const torch::Tensor& masks) {
  XDINO_CHECK(masks.dim() == 2 && masks.scalar_type() == torch::kBool,
              "masks must be (images, patches) bool, got ", masks.sizes());
  BatchMasks out;
  out.masks = masks;
  out.indices = masks.flatten().nonzero().flatten();
  const torch::Tensor per_row = masks.sum(-1).to(torch::kFloat).clamp_min(1.0);
  out.weights = (1.0 / per_row).unsqueeze(-1).expand(masks.sizes()).masked_select(masks);
  return out;
}

BatchMasks draw_batch_masks(int64_t images, const BlockMaskGenerator& generator, double ratio_min,
                            double ratio_max, double probability, MaskRandom& random) {
  const int64_t n = generator.patches();
  const int64_t masked = static_cast<int64_t>(static_cast<double>(images) * probability);
  // linspace in float32, as collate.py's torch.linspace makes the strata.
  const torch::Tensor strata = torch::linspace(ratio_min, ratio_max, masked + 1, torch::kFloat);
  const float* r = strata.data_ptr<float>();
  std::vector<torch::Tensor> rows;
  for (int64_t i = 0; i < images; ++i) {
    int64_t count = 0;
    if (i < masked)
      count = static_cast<int64_t>(static_cast<double>(n) * random.uniform(r[i], r[i + 1]));
    rows.push_back(generator(count, random).flatten());
  }
  for (int64_t i = images - 1; i > 0; --i)  // Fisher-Yates
    std::swap(rows[static_cast<size_t>(i)], rows[static_cast<size_t>(random.randint(0, i))]);
  return batch_masks(images > 0 ? torch::stack(rows) : torch::zeros({0, n}, torch::kBool));
}

}  // namespace xdino::ssl
