// Multi-crop, eval and linear-probe transforms: distributions of the random parameters,
// apply probabilities, Rng order, determinism, shapes.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <thread>
#include <vector>

#include "augment/eval_transforms.h"
#include "augment/multicrop.h"
#include "augment/ops/crop.h"
#include "augment/ops/resize.h"
#include "core/check.h"

namespace xa = xdino::augment;
using xa::Image;

namespace {

Image transforms_test_image(int w, int h) {
  Image img(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      img.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uint8_t>(3 * x + y),
                                          static_cast<uint8_t>(x * y), static_cast<uint8_t>(7 * y));
  return img;
}

// |observed - expected| within 5 standard deviations of a binomial proportion.
void expect_proportion(int hits, int n, double p, const std::string& what) {
  const double sd = std::sqrt(p * (1 - p) / n);
  EXPECT_NEAR(static_cast<double>(hits) / n, p, 5 * sd + 1e-12) << what;
}

}  // namespace

TEST(AugmentStatistics, RandomResizedCropAreaAndLogRatioAreUniform) {
  // On a 1000x1000 image, scale (0.05, 0.4) always fits at the first attempt: area fraction
  // ~ U(0.05, 0.4), log aspect ~ U(log 3/4, log 4/3) (up to rounding to whole pixels).
  xa::Rng rng(1);
  const int n = 20000;
  std::array<int, 10> area_bins{}, ratio_bins{};
  double top_pos = 0;
  for (int k = 0; k < n; ++k) {
    const cv::Rect b =
        xa::random_resized_crop_box(cv::Size(1000, 1000), 0.05, 0.4, 0.75, 4.0 / 3, rng);
    const double area = b.area() / 1e6;
    const double log_ratio = std::log(static_cast<double>(b.width) / b.height);
    ASSERT_GE(area, 0.049);
    ASSERT_LE(area, 0.401);
    ASSERT_LE(std::abs(log_ratio), std::log(4.0 / 3) + 0.01);
    area_bins[std::min(9, static_cast<int>((area - 0.05) / 0.035))]++;
    ratio_bins[std::min(9, std::max(0, static_cast<int>((log_ratio - std::log(0.75)) /
                                                        (std::log(16.0 / 9) / 10))))]++;
    top_pos += 1000 == b.height ? 0.5 : static_cast<double>(b.y) / (1000 - b.height);
  }
  for (int i = 0; i < 10; ++i) {
    expect_proportion(area_bins[i], n, 0.1, "area bin " + std::to_string(i));
    expect_proportion(ratio_bins[i], n, 0.1, "log-ratio bin " + std::to_string(i));
  }
  EXPECT_NEAR(top_pos / n, 0.5, 0.01) << "top uniform over [0, H - h]";
}

TEST(AugmentStatistics, RandomResizedCropFallsBackToTheWholeImageWhenNothingFits) {
  // scale (0.99, 1) on a square: an attempt fits only when the aspect is ~1, so many draws
  // exhaust the 10 attempts and return the centred whole image (ratio within bounds).
  xa::Rng rng(2);
  int whole = 0;
  for (int k = 0; k < 2000; ++k) {
    const cv::Rect b =
        xa::random_resized_crop_box(cv::Size(100, 100), 0.99, 1.0, 0.75, 4.0 / 3, rng);
    ASSERT_LE(b.width, 100);
    ASSERT_LE(b.height, 100);
    whole += b == cv::Rect(0, 0, 100, 100);
  }
  EXPECT_GT(whole, 500);
  EXPECT_LT(whole, 2000);
}

TEST(AugmentStatistics, ApplyProbabilitiesSigmaAndJitterFactors) {
  const xa::MultiCropAugmentation aug;
  const int n = 20000;
  std::map<std::string, int> hits;
  std::map<std::vector<int>, int> orders;
  double sigma_sum = 0;
  int sigma_count = 0;
  xa::Rng rng(3);
  for (int k = 0; k < n; ++k) {
    for (int64_t c = 0; c < aug.num_crops(); ++c) {
      const xa::CropPlan p = aug.plan(c, cv::Size(500, 375), rng);
      const std::string which = c == 0 ? "g1" : c == 1 ? "g2" : "local";
      hits[which + "/flip"] += p.flip;
      hits[which + "/jitter"] += p.jitter;
      hits[which + "/gray"] += p.grayscale;
      hits[which + "/blur"] += p.blur;
      hits[which + "/solarize"] += p.solarize;
      if (p.blur) {
        ASSERT_GE(p.sigma, 0.1);
        ASSERT_LT(p.sigma, 2.0);
        sigma_sum += p.sigma;
        ++sigma_count;
      }
      if (p.jitter) {
        const auto& j = p.jitter_params;
        orders[std::vector<int>(j.order.begin(), j.order.end())]++;
        ASSERT_TRUE(j.enabled[0] && j.enabled[1] && j.enabled[2] && j.enabled[3]);
        ASSERT_TRUE(j.factor[0] >= 0.6 && j.factor[0] <= 1.4);
        ASSERT_TRUE(j.factor[1] >= 0.6 && j.factor[1] <= 1.4);
        ASSERT_TRUE(j.factor[2] >= 0.8 && j.factor[2] <= 1.2);
        ASSERT_TRUE(j.factor[3] >= -0.1 && j.factor[3] <= 0.1);
      }
      const int s = static_cast<int>(aug.crop_size(c));
      ASSERT_EQ(p.size, c < 2 ? 224 : 96);
      ASSERT_EQ(s, p.size);
    }
  }
  const int local = n * 8;
  for (const auto& [which, count] :
       {std::pair{std::string("g1"), n}, {"g2", n}, {"local", local}}) {
    expect_proportion(hits[which + "/flip"], count, 0.5, which + " flip");
    expect_proportion(hits[which + "/jitter"], count, 0.8, which + " jitter");
    expect_proportion(hits[which + "/gray"], count, 0.2, which + " grayscale");
  }
  EXPECT_EQ(hits["g1/blur"], n) << "global 1 is always blurred (p = 1, u <= p)";
  expect_proportion(hits["g2/blur"], n, 0.1, "global 2 blur");
  expect_proportion(hits["local/blur"], local, 0.5, "local blur");
  expect_proportion(hits["g2/solarize"], n, 0.2, "global 2 solarize");
  EXPECT_EQ(hits["g1/solarize"] + hits["local/solarize"], 0) << "solarize only on global 2";
  EXPECT_NEAR(sigma_sum / sigma_count, 1.05, 0.01);
  ASSERT_EQ(orders.size(), 24u) << "every permutation of the 4 jitter ops occurs";
  int jittered = 0;
  for (const auto& [order, count] : orders) jittered += count;
  for (const auto& [order, count] : orders) expect_proportion(count, jittered, 1.0 / 24, "order");
}

TEST(AugmentStatistics, ProbabilityEdgesFollowTheOfficialComparisons) {
  // p = 0 never applies (u < 0 is impossible; u <= 0 only for u == 0, probability 2^-53);
  // p = 1 always applies (u < 1 always).
  xa::MultiCropOptions never;
  never.flip_p = never.color_jitter_p = never.grayscale_p = 0;
  never.global1_blur_p = never.global2_blur_p = never.local_blur_p = never.global2_solarize_p = 0;
  xa::MultiCropOptions always = never;
  always.flip_p = always.color_jitter_p = always.grayscale_p = 1;
  always.global1_blur_p = always.global2_blur_p = always.local_blur_p = 1;
  always.global2_solarize_p = 1;
  const xa::MultiCropAugmentation off(never), on(always);
  xa::Rng rng(4);
  for (int k = 0; k < 2000; ++k) {
    for (int64_t c = 0; c < 10; ++c) {
      const xa::CropPlan a = off.plan(c, cv::Size(64, 48), rng);
      EXPECT_FALSE(a.flip || a.jitter || a.grayscale || a.blur || a.solarize);
      const xa::CropPlan b = on.plan(c, cv::Size(64, 48), rng);
      EXPECT_TRUE(b.flip && b.jitter && b.grayscale && b.blur && b.solarize == (c == 1));
    }
  }
}

TEST(AugmentMultiCrop, ShapesOrderAndRngOrder) {
  const xa::MultiCropAugmentation aug;
  const Image img = transforms_test_image(120, 90);
  xa::Rng rng(5), replica(5);
  const std::vector<torch::Tensor> crops = aug(img, rng);
  ASSERT_EQ(crops.size(), 10u);
  xa::Normalizer normalize;
  for (int64_t c = 0; c < 10; ++c) {
    const int64_t s = c < 2 ? 224 : 96;
    EXPECT_EQ(crops[c].sizes(), torch::IntArrayRef({3, s, s}));
    // Crop after crop, each planned then rendered from the original image.
    Image expect;
    xa::MultiCropAugmentation::render(img, aug.plan(c, img.size(), replica), expect);
    EXPECT_TRUE(torch::equal(crops[c], normalize(expect))) << "crop " << c;
  }
  EXPECT_EQ(rng.next(), replica.next());
  xa::MultiCropOptions o;
  o.local_crops_number = 3;
  o.local_crops_size = 64;
  const std::vector<torch::Tensor> few = xa::MultiCropAugmentation(o)(img, rng);
  ASSERT_EQ(few.size(), 5u);
  EXPECT_EQ(few[4].sizes(), torch::IntArrayRef({3, 64, 64}));
}

TEST(AugmentMultiCrop, DeterministicPerSeedAndThreadSafe) {
  const xa::MultiCropAugmentation aug;
  const Image img = transforms_test_image(97, 131);
  auto run = [&](uint64_t index) {
    xa::Rng rng(xa::sample_seed(0, 3, index));
    return aug(img, rng);
  };
  std::vector<std::vector<torch::Tensor>> sequential;
  for (uint64_t i = 0; i < 8; ++i) sequential.push_back(run(i));
  for (size_t c = 0; c < 10; ++c) EXPECT_TRUE(torch::equal(run(0)[c], sequential[0][c]));
  EXPECT_FALSE(torch::equal(sequential[0][0], sequential[1][0]));
  std::vector<std::vector<torch::Tensor>> parallel(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = t; i < 8; i += 2) parallel[i] = run(i);
    });
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < 8; ++i)
    for (size_t c = 0; c < 10; ++c) EXPECT_TRUE(torch::equal(parallel[i][c], sequential[i][c]));
}

TEST(AugmentMultiCrop, RejectsBadOptionsAndOutputs) {
  xa::MultiCropOptions o;
  o.global_crops_scale = {0.5, 0.4};
  EXPECT_THROW(xa::MultiCropAugmentation{o}, xdino::UsageError);
  o = {};
  o.flip_p = 1.5;
  EXPECT_THROW(xa::MultiCropAugmentation{o}, xdino::UsageError);
  o = {};
  o.color_jitter.hue = 0.7;
  EXPECT_THROW(xa::MultiCropAugmentation{o}, xdino::UsageError);
  const xa::MultiCropAugmentation aug;
  xa::Rng rng(1);
  std::vector<torch::Tensor> wrong(10, torch::empty({3, 96, 96}));
  EXPECT_THROW(aug(transforms_test_image(50, 50), rng, wrong), xdino::Error);
}

TEST(AugmentEval, SizesOnOddShapesAndResizeThenCrop) {
  const xa::EvalTransform eval;
  EXPECT_EQ(eval.resize_size(), 256);
  EXPECT_EQ(xa::EvalTransform(xa::EvalTransformOptions{96, 0, {}}).resize_size(), 109);
  EXPECT_EQ(xa::EvalTransform(xa::EvalTransformOptions{112, 0, {}}).resize_size(), 128);
  EXPECT_THROW(xa::EvalTransform(xa::EvalTransformOptions{224, 200, {}}), xdino::UsageError);
  for (const cv::Size size : {cv::Size(257, 300), cv::Size(37, 301), cv::Size(500, 333),
                              cv::Size(224, 224), cv::Size(1, 1), cv::Size(256, 256)}) {
    const Image img = transforms_test_image(size.width, size.height);
    EXPECT_EQ(eval(img).sizes(), torch::IntArrayRef({3, 224, 224}));
    // The windowed resize equals the full resize followed by CenterCrop.
    const cv::Size resized = xa::resize_shorter_side(size, 256);
    const Image full = xa::resize(img, resized, xa::Interpolation::kBicubic);
    Image crop;
    eval.crop(img, crop);
    const Image expect = full(xa::center_crop_box(resized, cv::Size(224, 224))).clone();
    EXPECT_TRUE(std::equal(crop.data, crop.data + crop.total() * 3, expect.data)) << size;
  }
}

TEST(AugmentLinear, BilinearRandomResizedCropThenFlip) {
  const xa::LinearTrainTransform linear;
  const Image img = transforms_test_image(150, 110);
  int flips = 0;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    xa::Rng rng(seed), replica(seed);
    const torch::Tensor t = linear(img, rng);
    ASSERT_EQ(t.sizes(), torch::IntArrayRef({3, 224, 224}));
    const cv::Rect box = xa::random_resized_crop_box(img.size(), 0.08, 1.0, 0.75, 4.0 / 3, replica);
    Image expect;
    xa::resize(img, box, cv::Size(224, 224), xa::Interpolation::kBilinear, expect);
    const bool flip = replica.uniform() < 0.5;
    flips += flip;
    if (flip) xa::hflip(expect);
    if (seed < 20) {
      EXPECT_TRUE(torch::equal(t, xa::Normalizer()(expect))) << seed;
    }
  }
  expect_proportion(flips, 400, 0.5, "linear flip");
}
