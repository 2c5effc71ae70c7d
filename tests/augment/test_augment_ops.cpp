// Deterministic augmentation pieces against closed forms, Python's arithmetic and the scalar
// Pillow transcriptions (the goldens are in test_augment_golden.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "augment/eval_transforms.h"
#include "augment/ops/blur.h"
#include "augment/ops/box_blur_radius.h"
#include "augment/ops/color.h"
#include "augment/ops/crop.h"
#include "augment/ops/hue.h"
#include "augment/ops/resize.h"
#include "augment/ops/tensor.h"
#include "core/check.h"

namespace xa = xdino::augment;
using xa::Image;

namespace {

Image noise_image(int w, int h, uint64_t seed) {
  Image img(h, w, CV_8UC3);
  xa::Rng rng(seed);
  for (size_t i = 0; i < img.total() * 3; ++i) img.data[i] = static_cast<uint8_t>(rng.next());
  return img;
}

bool same_pixels(const Image& a, const Image& b) {
  return a.size() == b.size() && a.type() == b.type() &&
         std::equal(a.data, a.data + a.total() * 3, b.data);
}

}  // namespace

TEST(AugmentCrop, RoundHalfEvenIsPythonRound) {
  // Python: round(0.5) 0, round(1.5) 2, round(2.5) 2, round(16.5) 16, round(17.5) 18.
  EXPECT_EQ(xa::round_half_even(0.5), 0);
  EXPECT_EQ(xa::round_half_even(1.5), 2);
  EXPECT_EQ(xa::round_half_even(2.5), 2);
  EXPECT_EQ(xa::round_half_even(16.5), 16);
  EXPECT_EQ(xa::round_half_even(17.5), 18);
  EXPECT_EQ(xa::round_half_even(2.5000001), 3);
}

TEST(AugmentCrop, CenterCropRoundsTiesToEven) {
  // top = int(round((257 - 224) / 2)) = round(16.5) = 16; left = round(17.5) = 18.
  const cv::Rect a = xa::center_crop_box(cv::Size(259, 257), cv::Size(224, 224));
  EXPECT_EQ(a, cv::Rect(18, 16, 224, 224));
  EXPECT_EQ(xa::center_crop_box(cv::Size(224, 224), cv::Size(224, 224)), cv::Rect(0, 0, 224, 224));
  EXPECT_THROW(xa::center_crop_box(cv::Size(100, 300), cv::Size(224, 224)), xdino::Error);
}

TEST(AugmentCrop, ResizeShorterSideTruncatesTheLongerOne) {
  // int(256 * 500 / 375) = int(341.33) = 341; int(256 * 1001 / 37) = int(6925.6) = 6925.
  EXPECT_EQ(xa::resize_shorter_side(cv::Size(500, 375), 256), cv::Size(341, 256));
  EXPECT_EQ(xa::resize_shorter_side(cv::Size(375, 500), 256), cv::Size(256, 341));
  EXPECT_EQ(xa::resize_shorter_side(cv::Size(37, 1001), 256), cv::Size(256, 6925));
  EXPECT_EQ(xa::resize_shorter_side(cv::Size(300, 300), 256), cv::Size(256, 256));
  EXPECT_EQ(xa::resize_shorter_side(cv::Size(256, 400), 256), cv::Size(256, 400));
}

TEST(AugmentCrop, FallbackOnExtremeAspectRatiosIsTheClampedCentreCrop) {
  xa::Rng rng(7);
  // 1000x50: every attempt is taller than 50 -> h = 50, w = round(50 * 4/3) = 67,
  // left = (1000 - 67) // 2 = 466.
  for (int k = 0; k < 20; ++k) {
    EXPECT_EQ(xa::random_resized_crop_box(cv::Size(1000, 50), 0.4, 1.0, 3.0 / 4, 4.0 / 3, rng),
              cv::Rect(466, 0, 67, 50));
  }
  // 30x900: w = 30, h = round(30 / (3/4)) = 40, top = (900 - 40) // 2 = 430.
  EXPECT_EQ(xa::random_resized_crop_box(cv::Size(30, 900), 0.4, 1.0, 3.0 / 4, 4.0 / 3, rng),
            cv::Rect(0, 430, 30, 40));
}

TEST(AugmentCrop, RandomResizedCropConsumesTheRngInTheDocumentedOrder) {
  // A re-implementation of torchvision's get_params on a copy of the same stream.
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const cv::Size image(seed % 2 ? 333 : 40, seed % 3 ? 250 : 700);
    xa::Rng rng(seed), replica(seed);
    const cv::Rect box = xa::random_resized_crop_box(image, 0.08, 1.0, 3.0 / 4, 4.0 / 3, rng);
    cv::Rect expect;
    bool found = false;
    const double area = static_cast<double>(image.area());
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      const double target = area * (0.08 + 0.92 * replica.uniform());
      const double lo = std::log(0.75), hi = std::log(4.0 / 3);
      const double aspect = std::exp(lo + (hi - lo) * replica.uniform());
      const int w = static_cast<int>(std::nearbyint(std::sqrt(target * aspect)));
      const int h = static_cast<int>(std::nearbyint(std::sqrt(target / aspect)));
      if (w > 0 && w <= image.width && h > 0 && h <= image.height) {
        const int top = static_cast<int>(replica.randint(0, image.height - h));
        const int left = static_cast<int>(replica.randint(0, image.width - w));
        expect = cv::Rect(left, top, w, h);
        found = true;
      }
    }
    if (found) {
      EXPECT_EQ(box, expect) << "seed " << seed;
      EXPECT_EQ(rng.next(), replica.next()) << "seed " << seed << ": draws left in step";
    }
  }
}

TEST(AugmentBlur, BoxRadiusMatchesThePaperFormula) {
  // docs/dino.md, "Augmentations": sigma 2 -> s^2 = 4/3, l = 1, a = 0.375, r = 1.375.
  EXPECT_FLOAT_EQ(xa::box_blur_radius(2.0f, 3), 1.375f);
  // sigma 0.1: l = 0, r = a = -3 s^2 / (6 (s^2 - 1)) ~ 0.0017 (nearly the identity).
  const double s2 = 0.01 / 3, expect = (1 * (0 - 3 * s2)) / (6 * (s2 - 1));
  EXPECT_NEAR(xa::box_blur_radius(0.1f, 3), expect, 1e-6);
}

TEST(AugmentBlur, ConstantImagesStayConstantAndZeroSigmaIsIdentity) {
  Image flat(17, 23, CV_8UC3, cv::Scalar(9, 200, 255));
  xa::gaussian_blur(flat, 1.9);
  EXPECT_TRUE(same_pixels(flat, Image(17, 23, CV_8UC3, cv::Scalar(9, 200, 255))));
  const Image img = noise_image(13, 8, 3);
  Image copy = img.clone();
  xa::gaussian_blur(copy, 0.0);
  EXPECT_TRUE(same_pixels(copy, img));
  EXPECT_THROW(xa::gaussian_blur(copy, -1.0), xdino::Error);
}

TEST(AugmentBlur, IsMirrorSymmetric) {
  // Edge replication and symmetric taps: blurring commutes with the horizontal flip.
  Image a = noise_image(31, 12, 5), b = a.clone();
  xa::gaussian_blur(a, 1.7);
  xa::hflip(a);
  xa::hflip(b);
  xa::gaussian_blur(b, 1.7);
  EXPECT_TRUE(same_pixels(a, b));
}

TEST(AugmentResize, ConstantImagesAndIdentity) {
  const Image flat(40, 30, CV_8UC3, cv::Scalar(3, 128, 250));
  for (auto f : {xa::Interpolation::kBicubic, xa::Interpolation::kBilinear}) {
    for (const cv::Size size : {cv::Size(7, 9), cv::Size(90, 61), cv::Size(30, 13)}) {
      EXPECT_TRUE(
          same_pixels(xa::resize(flat, size, f), Image(size, CV_8UC3, cv::Scalar(3, 128, 250))));
    }
  }
  const Image img = noise_image(21, 14, 9);
  EXPECT_TRUE(same_pixels(xa::resize(img, img.size(), xa::Interpolation::kBicubic), img));
  Image out;
  EXPECT_THROW(
      xa::resize(img, cv::Rect(15, 0, 10, 5), cv::Size(4, 4), xa::Interpolation::kBicubic, out),
      xdino::Error);
}

TEST(AugmentColor, LumaAndSolarizeFormulas) {
  EXPECT_EQ(xa::luma(255, 255, 255), 255);
  EXPECT_EQ(xa::luma(0, 0, 0), 0);
  // (19595 * 10 + 38470 * 20 + 7471 * 30 + 32768) >> 16 = 1187168 >> 16 = 18.
  EXPECT_EQ(xa::luma(10, 20, 30), 18);
  Image img(1, 4, CV_8UC3);
  const uint8_t values[12] = {0, 127, 128, 129, 200, 255, 1, 2, 3, 250, 128, 127};
  std::copy(values, values + 12, img.data);
  xa::solarize(img, 128);
  const uint8_t expect[12] = {0, 127, 127, 126, 55, 0, 1, 2, 3, 5, 127, 127};
  EXPECT_TRUE(std::equal(expect, expect + 12, img.data));
}

TEST(AugmentColor, FactorOneIsIdentityAndBrightnessTruncates) {
  const Image img = noise_image(19, 7, 11);
  for (auto op : {xa::adjust_brightness, xa::adjust_contrast, xa::adjust_saturation}) {
    Image copy = img.clone();
    op(copy, 1.0);
    EXPECT_TRUE(same_pixels(copy, img));
  }
  Image b(1, 1, CV_8UC3, cv::Scalar(100, 200, 3));
  xa::adjust_brightness(b, 1.4);  // 140, 280 -> 255, 4.2 -> 4
  EXPECT_EQ(b.at<cv::Vec3b>(0, 0), cv::Vec3b(140, 255, 4));
}

TEST(AugmentColor, HueKernelEqualsPillowTranscriptionOnEveryColour) {
  std::vector<uint8_t> cube(3u << 24);
  for (uint32_t c = 0; c < (1u << 24); ++c) {
    cube[3 * c] = static_cast<uint8_t>(c >> 16);
    cube[3 * c + 1] = static_cast<uint8_t>(c >> 8);
    cube[3 * c + 2] = static_cast<uint8_t>(c);
  }
  for (const int shift : {0, 231}) {
    std::vector<uint8_t> fast = cube, reference = cube;
    xa::hue_shift(fast.data(), 1u << 24, static_cast<uint8_t>(shift));
    xa::hue_shift_reference(reference.data(), 1u << 24, static_cast<uint8_t>(shift));
    size_t differing = 0;
    for (size_t i = 0; i < fast.size(); ++i) differing += fast[i] != reference[i];
    EXPECT_EQ(differing, 0u) << "shift " << shift;
  }
}

TEST(AugmentColor, HueShiftWrapsNegativeFactorsLikeNumpy) {
  // numpy.uint8(-0.05 * 255) = 244 on x86: hue -0.05 equals a shift of +244.
  const Image img = noise_image(16, 16, 13);
  Image a = img.clone(), b = img.clone();
  xa::adjust_hue(a, -0.05);
  xa::hue_shift_reference(b.data, b.total(), 244);
  EXPECT_TRUE(same_pixels(a, b));
  EXPECT_THROW(xa::adjust_hue(a, 0.6), xdino::Error);
}

TEST(AugmentTensor, NormalizesIntoABatchSlot) {
  const Image img = noise_image(5, 4, 17);
  torch::Tensor batch = torch::zeros({2, 3, 4, 5});
  xa::Normalizer()(img, batch[1]);
  EXPECT_EQ(batch[0].abs().sum().item<float>(), 0.0f);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 5; ++x) {
        const float v = img.at<cv::Vec3b>(y, x)[c];
        EXPECT_EQ(batch[1][c][y][x].item<float>(), (v / 255.0f - mean[c]) / std[c]);
      }
    }
  }
  EXPECT_THROW(xa::Normalizer()(img, torch::zeros({3, 5, 4})), xdino::Error);
  EXPECT_THROW(xa::Normalizer()(img, torch::zeros({3, 4, 5}, torch::kFloat64)), xdino::Error);
}
