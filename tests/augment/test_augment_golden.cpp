// Augmentation kernels against Pillow 9.4 / torchvision 0.14 outputs on real photos
// (goldens and the script that made them: tests/data/augment/make_golden.py, cases.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "augment/eval_transforms.h"
#include "augment/multicrop.h"
#include "augment/ops/blur.h"
#include "augment/ops/color.h"
#include "augment/ops/crop.h"
#include "augment/ops/resize.h"
#include "augment/ops/tensor.h"
#include "tests/support/process.h"

namespace xa = xdino::augment;
using xa::Image;

namespace {

std::string data_path(const std::string& name) {
  return xdino::testing::test_data_dir() + "/augment/" + name;
}

Image load_rgb(const std::string& name) {
  cv::Mat bgr = cv::imread(data_path(name), cv::IMREAD_COLOR);
  EXPECT_FALSE(bgr.empty()) << "cannot read " << data_path(name);
  Image rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

struct Case {
  std::string line, op, input, output;
  std::vector<std::string> params;
  double num(size_t i) const { return std::stod(params.at(i)); }
  int integer(size_t i) const { return std::stoi(params.at(i)); }
};

std::vector<Case> cases(const std::string& op) {
  std::ifstream in(data_path("cases.txt"));
  EXPECT_TRUE(in.good()) << "missing " << data_path("cases.txt");
  std::vector<Case> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::vector<std::string> words;
    for (std::string w; ss >> w;) words.push_back(w);
    if (words.size() < 3 || words[0] != op) continue;
    Case c{line, words[0], words[1], words.back(), {}};
    c.params.assign(words.begin() + 2, words.end() - 1);
    out.push_back(c);
  }
  EXPECT_FALSE(out.empty()) << "no golden cases for " << op;
  return out;
}

// Largest per-value difference and the number of differing values.
void expect_image_near(const Image& got, const Image& want, int tolerance,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_EQ(got.type(), want.type()) << what;
  cv::Mat diff;
  cv::absdiff(got.reshape(1), want.reshape(1), diff);
  double max_diff = 0;
  cv::minMaxLoc(diff, nullptr, &max_diff);
  EXPECT_LE(max_diff, tolerance) << what << ": " << cv::countNonZero(diff) << " of " << diff.total()
                                 << " values differ";
}

}  // namespace

TEST(AugmentGolden, ResizeIsPillowExact) {
  for (const Case& c : cases("resize")) {
    const Image src = load_rgb(c.input);
    const auto filter =
        c.params[0] == "bicubic" ? xa::Interpolation::kBicubic : xa::Interpolation::kBilinear;
    const cv::Rect box(c.integer(1), c.integer(2), c.integer(3), c.integer(4));
    Image out;
    xa::resize(src, box, cv::Size(c.integer(5), c.integer(6)), filter, out);
    expect_image_near(out, load_rgb(c.output), 0, c.line);
  }
}

TEST(AugmentGolden, ResizeWindowEqualsResizeThenCrop) {
  const Image src = load_rgb("photo_b.png");
  const cv::Rect box(2, 3, 47, 31);
  for (const cv::Size size : {cv::Size(90, 70), cv::Size(20, 31), cv::Size(47, 12)}) {
    Image full, window;
    xa::resize(src, box, size, xa::Interpolation::kBicubic, full);
    const cv::Rect w(size.width / 3, size.height / 4, size.width / 2, size.height / 2);
    xa::resize_window(src, box, size, w, xa::Interpolation::kBicubic, window);
    expect_image_near(window, full(w).clone(), 0, "window of " + std::to_string(size.width));
  }
}

TEST(AugmentGolden, GaussianBlurIsPillowExact) {
  for (const Case& c : cases("blur")) {
    Image img = load_rgb(c.input);
    xa::gaussian_blur(img, c.num(0));
    expect_image_near(img, load_rgb(c.output), 0, c.line);
  }
}

TEST(AugmentGolden, ColorOpsArePillowExact) {
  for (const std::string op : {"brightness", "contrast", "saturation", "hue"}) {
    for (const Case& c : cases(op)) {
      Image img = load_rgb(c.input);
      const double f = c.num(0);
      if (op == "brightness") xa::adjust_brightness(img, f);
      if (op == "contrast") xa::adjust_contrast(img, f);
      if (op == "saturation") xa::adjust_saturation(img, f);
      if (op == "hue") xa::adjust_hue(img, f);
      expect_image_near(img, load_rgb(c.output), 0, c.line);
    }
  }
}

TEST(AugmentGolden, GrayscaleAndSolarizeAreExact) {
  for (const Case& c : cases("grayscale")) {
    Image img = load_rgb(c.input);
    xa::to_grayscale(img);
    expect_image_near(img, load_rgb(c.output), 0, c.line);
  }
  for (const Case& c : cases("solarize")) {
    Image img = load_rgb(c.input);
    xa::solarize(img, 128);
    expect_image_near(img, load_rgb(c.output), 0, c.line);
  }
}

TEST(AugmentGolden, CropPlansMatchTorchvisionComposition) {
  for (const Case& c : cases("plan")) {
    xa::CropPlan p;
    p.box = cv::Rect(c.integer(0), c.integer(1), c.integer(2), c.integer(3));
    p.size = c.integer(4);
    p.flip = c.integer(5) != 0;
    p.jitter = c.integer(6) != 0;
    for (int i = 0; i < 4; ++i) {
      p.jitter_params.order[i] = c.integer(7 + i);
      p.jitter_params.factor[i] = c.num(11 + i);
      p.jitter_params.enabled[i] = true;
    }
    p.grayscale = c.integer(15) != 0;
    p.blur = c.integer(16) != 0;
    p.sigma = c.num(17);
    p.solarize = c.integer(18) != 0;
    Image out;
    xa::MultiCropAugmentation::render(load_rgb(c.input), p, out);
    expect_image_near(out, load_rgb(c.output), 0, c.line);
  }
}

TEST(AugmentGolden, EvalTransformMatchesResizeCenterCrop) {
  for (const Case& c : cases("eval")) {
    xa::EvalTransformOptions o;
    o.crop_size = c.integer(0);
    o.resize_size = c.integer(1);
    const int stride = c.integer(2);
    Image out;
    xa::EvalTransform(o).crop(load_rgb(c.input), out);
    Image sub(static_cast<int>((out.rows + stride - 1) / stride),
              static_cast<int>((out.cols + stride - 1) / stride), CV_8UC3);
    for (int y = 0; y < sub.rows; ++y)
      for (int x = 0; x < sub.cols; ++x)
        sub.at<cv::Vec3b>(y, x) = out.at<cv::Vec3b>(y * stride, x * stride);
    expect_image_near(sub, load_rgb(c.output), 0, c.line);
  }
}

TEST(AugmentGolden, ToTensorNormalizeIsFloatExact) {
  for (const Case& c : cases("tensor")) {
    const Image img = load_rgb(c.input);
    const torch::Tensor got = xa::Normalizer()(img);
    std::ifstream in(data_path(c.output), std::ios::binary);
    std::vector<float> want(3 * img.total());
    in.read(reinterpret_cast<char*>(want.data()), want.size() * sizeof(float));
    ASSERT_TRUE(in.good()) << c.line;
    const float* g = got.data_ptr<float>();
    int differing = 0;
    for (size_t i = 0; i < want.size(); ++i) differing += g[i] != want[i];
    EXPECT_EQ(differing, 0) << c.line;
  }
}
