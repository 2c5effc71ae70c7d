// The grayscale data pipeline (--in_chans 1, issue 44): each image converted RGB -> L -> RGB,
// the RGB pipeline run on it, channel 0 written. Checked against the RGB pipeline itself: on
// the L-converted image every crop of the RGB pipeline has three equal channels (so the gray
// image stays gray through every op DINO uses), and the 1-channel crop is its channel 0; and
// against two facts of torchvision's ops on L images: saturation and hue leave gray unchanged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "augment/eval_transforms.h"
#include "augment/multicrop.h"
#include "augment/ops/color.h"
#include "augment/ops/tensor.h"
#include "augment/sample_transforms.h"
#include "core/check.h"

namespace xa = xdino::augment;
using xa::Image;

namespace {

Image colour_image(int w, int h) {
  Image img(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      img.at<cv::Vec3b>(y, x) =
          cv::Vec3b(static_cast<uint8_t>(3 * x + y), static_cast<uint8_t>(x * y + 40),
                    static_cast<uint8_t>(255 - 7 * y));
  return img;
}

Image luminance(const Image& rgb) {
  Image gray = rgb.clone();
  xa::to_grayscale(gray);
  return gray;
}

// The gray normalisation, but on three channels: the RGB pipeline's output is then
// comparable value for value.
xa::Normalization gray_values_on_three_channels() {
  const xa::Normalization gray = xa::default_normalization(1);
  return xa::normalization_for(3, gray.mean, gray.std);
}

void expect_gray_crop(const torch::Tensor& gray, const torch::Tensor& rgb,
                      const std::string& what) {
  ASSERT_EQ(gray.size(0), 1) << what;
  ASSERT_EQ(rgb.size(0), 3) << what;
  EXPECT_TRUE(torch::equal(rgb[0], rgb[1]) && torch::equal(rgb[0], rgb[2]))
      << what << ": the RGB pipeline made a gray image coloured";
  EXPECT_TRUE(torch::equal(gray[0], rgb[0])) << what;
}

}  // namespace

TEST(GrayscalePipeline, DefaultNormalisationAndRefusal) {
  const xa::Normalization one = xa::default_normalization(1);
  EXPECT_EQ(one.channels, 1);
  EXPECT_DOUBLE_EQ(one.mean[0], (0.485 + 0.456 + 0.406) / 3);
  EXPECT_NEAR(one.std[0], (0.229 + 0.224 + 0.225) / 3, 1e-15);
  const xa::Normalization three = xa::default_normalization(3);
  EXPECT_EQ(three.channels, 3);
  EXPECT_EQ(three.mean, xa::Normalization{}.mean);
  std::string message;
  try {
    xa::default_normalization(4);
  } catch (const xdino::UsageError& e) {
    message = e.what();
  }
  EXPECT_EQ(message.rfind("--in_chans 4: give --mean and --std, one value or 4 each", 0), 0u)
      << message;
}

// torchvision: adjust_saturation blends with the L image (the image itself when gray);
// adjust_hue returns L images unchanged. Our RGB ops on a gray image must agree.
TEST(GrayscalePipeline, SaturationAndHueLeaveGrayUnchanged) {
  const Image gray = luminance(colour_image(37, 23));
  for (double factor : {0.0, 0.6, 1.4}) {
    Image out = gray.clone();
    xa::adjust_saturation(out, factor);
    EXPECT_EQ(cv::norm(out, gray, cv::NORM_INF), 0) << "saturation " << factor;
  }
  for (double hue : {-0.1, 0.05, 0.1, 0.5}) {
    Image out = gray.clone();
    xa::adjust_hue(out, hue);
    EXPECT_EQ(cv::norm(out, gray, cv::NORM_INF), 0) << "hue " << hue;
  }
}

TEST(GrayscalePipeline, MultiCropIsChannelZeroOfTheRgbPipelineOnTheLImage) {
  xa::MultiCropOptions rgb_options;
  rgb_options.global_crops_size = 32;
  rgb_options.local_crops_size = 16;
  rgb_options.local_crops_number = 6;
  rgb_options.color_jitter_p = 1.0;  // every op DINO has, often
  rgb_options.grayscale_p = 0.5;
  rgb_options.global2_solarize_p = 0.5;
  rgb_options.normalization = gray_values_on_three_channels();
  xa::MultiCropOptions gray_options = rgb_options;
  gray_options.normalization = xa::default_normalization(1);
  const xa::MultiCropAugmentation rgb(rgb_options), gray(gray_options);
  EXPECT_EQ(gray.channels(), 1);
  const Image image = colour_image(61, 47);
  const Image l = luminance(image);
  for (uint64_t seed = 0; seed < 12; ++seed) {
    xa::Rng a(seed), b(seed);
    const auto g = gray(image, a);  // converts to L itself
    const auto r = rgb(l, b);
    ASSERT_EQ(g.size(), r.size());
    for (size_t c = 0; c < g.size(); ++c)
      expect_gray_crop(g[c], r[c], "seed " + std::to_string(seed) + " crop " + std::to_string(c));
  }
  // The writing transform the loader uses declares (1, S, S) views.
  const xa::SampleTransform t = xa::multi_crop_transform(gray_options);
  EXPECT_EQ(t.shapes().front(), (std::vector<int64_t>{1, 32, 32}));
  EXPECT_EQ(t.shapes().back(), (std::vector<int64_t>{1, 16, 16}));
  xa::Rng rng(3);
  EXPECT_EQ(t(image, rng).front().sizes(), (std::vector<int64_t>{1, 32, 32}));
}

TEST(GrayscalePipeline, EvalAndLinearTrainTransformsToo) {
  const Image image = colour_image(50, 41);
  const Image l = luminance(image);
  xa::EvalTransformOptions eo;
  eo.crop_size = 24;
  eo.normalization = gray_values_on_three_channels();
  const xa::EvalTransform eval_rgb(eo);
  eo.normalization = xa::default_normalization(1);
  const xa::EvalTransform eval_gray(eo);
  expect_gray_crop(eval_gray(image), eval_rgb(l), "eval");
  EXPECT_EQ(xa::eval_transform(eo).shapes().front(), (std::vector<int64_t>{1, 24, 24}));

  xa::LinearTrainOptions lo;
  lo.crop_size = 20;
  lo.normalization = gray_values_on_three_channels();
  const xa::LinearTrainTransform train_rgb(lo);
  lo.normalization = xa::default_normalization(1);
  const xa::LinearTrainTransform train_gray(lo);
  for (uint64_t seed = 0; seed < 6; ++seed) {
    xa::Rng a(seed), b(seed);
    expect_gray_crop(train_gray(image, a), train_rgb(l, b), "linear " + std::to_string(seed));
  }
  EXPECT_EQ(xa::linear_train_transform(lo).shapes().front(), (std::vector<int64_t>{1, 20, 20}));
  // The gray values are normalised with the one mean and std.
  const torch::Tensor crop = eval_gray(image);
  EXPECT_LE(crop.max().item<float>(), (1.0f - 0.449f) / 0.226f + 1e-5f);
  EXPECT_GE(crop.min().item<float>(), (0.0f - 0.449f) / 0.226f - 1e-5f);
}
