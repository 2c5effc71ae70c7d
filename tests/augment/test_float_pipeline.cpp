// The float pipeline (16-bit and multispectral images, augment/ops/float_image.h), against
// three independent truths:
//  - torchvision's tensor ops, run by Debian's python3-torchvision on the same float32 values
//    (resize as interpolate(antialias=True) on the crop, brightness, contrast, saturation, hue,
//    grayscale, solarize, Normalize), for 3 and 4 channels;
//  - the 8-bit Pillow-exact path: on an 8-bit image divided by 255, every op agrees with it to
//    within that path's rounding, and the whole multi-crop too (same Rng, same plans);
//  - the encoders: 16-bit PNG and 4-channel 16-bit TIFF written by OpenCV decode to v / 65535
//    exactly, channels in RGB(A) order, converted as Pillow's convert() would.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <string>
#include <vector>

#include "augment/data/decode.h"
#include "augment/data/image_folder.h"
#include "augment/multicrop.h"
#include "augment/ops/blur.h"
#include "augment/ops/color.h"
#include "augment/ops/crop.h"
#include "augment/ops/float_image.h"
#include "augment/ops/resize.h"
#include "augment/ops/tensor.h"
#include "core/check.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
namespace xa = xdino::augment;
using xa::Image;

namespace {

// Smooth gradients plus noise, values in [0, 1].
Image float_test_image(int width, int height, int channels, unsigned seed) {
  Image image(height, width, CV_MAKETYPE(CV_32F, channels));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(-0.15f, 0.15f);
  for (int y = 0; y < height; ++y) {
    float* p = image.ptr<float>(y);
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        const float base = std::fmod(
            0.3f * c + static_cast<float>(x) / width * 0.7f + static_cast<float>(y) / height * 0.4f,
            1.0f);
        p[x * channels + c] = std::clamp(base + noise(rng), 0.0f, 1.0f);
      }
  }
  return image;
}

// Values in [38, 217]: away from 0 and 255, where the 8-bit path clamps bicubic overshoot
// after each pass and the float path (as torch) does not.
Image eight_bit_test_image(int width, int height, unsigned seed) {
  Image f = float_test_image(width, height, 3, seed), image;
  f.convertTo(image, CV_8UC3, 255.0 * 0.7, 255.0 * 0.15);
  return image;
}

void write_floats(const fs::path& path, const float* data, size_t n) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
}

std::vector<float> read_floats(const fs::path& path, size_t n) {
  std::vector<float> v(n);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  EXPECT_TRUE(in.good()) << path;
  return v;
}

// HWC float image -> CHW values, as torchvision holds them.
std::vector<float> planar(const Image& image) {
  const int c = image.channels();
  std::vector<float> out(image.total() * c);
  const float* p = image.ptr<float>();
  for (size_t i = 0; i < image.total(); ++i)
    for (int k = 0; k < c; ++k) out[k * image.total() + i] = p[i * c + k];
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Each job line: "<name> <in> <channels> <h> <w> <op> <args...>"; the script writes <in>.out
// (CHW float32) per job. Ops: resize x y w h size filter | brightness f | contrast f |
// saturation f | hue f | grayscale | solarize t | normalize m0,m1,.. s0,s1,..
const char* kTorchvisionScript = R"(
import sys
import numpy as np
import torch
import torchvision.transforms.functional as F
try:  # torchvision >= 0.17 (Debian 13 has 0.21) made the module private
    from torchvision.transforms import _functional_tensor as F_t
except ImportError:  # 0.14, Debian 12
    from torchvision.transforms import functional_tensor as F_t
# torchvision refuses channel counts other than 1 and 3 in its colour ops; for those its own
# formulas (_blend, the mean over all values) are the reference, and saturation is unchanged.
blend = F_t._blend
for line in open(sys.argv[1]):
    name, src, c, h, w, op, *args = line.split()
    c, h, w = int(c), int(h), int(w)
    img = torch.from_numpy(np.fromfile(src, dtype=np.float32).reshape(c, h, w).copy())
    if op == "resize":
        x, y, bw, bh, size = map(int, args[:5])
        mode = args[5]
        crop = img[:, y:y + bh, x:x + bw].unsqueeze(0)
        out = torch.nn.functional.interpolate(crop, size=(size, size), mode=mode,
                                              align_corners=False, antialias=True)[0]
    elif op == "brightness":
        f = float(args[0])
        out = F.adjust_brightness(img, f) if c in (1, 3) else blend(img, torch.zeros_like(img), f)
    elif op == "contrast":
        f = float(args[0])
        out = (F.adjust_contrast(img, f) if c in (1, 3) else
               blend(img, torch.mean(img, dim=(-3, -2, -1), keepdim=True), f))
    elif op == "saturation":
        out = F.adjust_saturation(img, float(args[0])) if c in (1, 3) else img
    elif op == "hue":
        out = F.adjust_hue(img, float(args[0]))
    elif op == "grayscale":
        out = F.rgb_to_grayscale(img, num_output_channels=3)
    elif op == "solarize":
        t = float(args[0])
        out = F.solarize(img, t) if c in (1, 3) else torch.where(img >= t, 1.0 - img, img)
    elif op == "normalize":
        mean = [float(v) for v in args[0].split(",")]
        std = [float(v) for v in args[1].split(",")]
        out = F.normalize(img, mean, std)
    out.contiguous().numpy().astype(np.float32).tofile(src + ".out")
)";

// An op that replaces the image by its resized crop `box`, size x size.
std::function<void(Image&)> resize_to(cv::Rect box, int size, xa::Interpolation filter) {
  return [=](Image& im) {
    Image out;
    xa::resize(im, box, cv::Size(size, size), filter, out);
    im = out;
  };
}

struct TorchvisionJob {
  std::string op;  // as the script names it
  std::string args;
  int channels;
  std::function<void(Image&)> ours;  // in place, or replacing the image (resize)
  double tolerance;
};

}  // namespace

TEST(FloatPipeline, OpsEqualTorchvisionTensorOps) {
  if (const std::string lacks = xdino::testing::python_lacks({"torch", "torchvision", "numpy"});
      !lacks.empty())
    XDINO_SKIP_MISSING() << lacks;
  const int w = 53, h = 41;
  const std::vector<TorchvisionJob> jobs = {
      // Down (antialiased) and up, both filters, 3 and 4 channels.
      {"resize", "3 5 44 33 16 bicubic", 3,
       resize_to({3, 5, 44, 33}, 16, xa::Interpolation::kBicubic), 2e-6},
      {"resize", "0 0 53 41 24 bilinear", 4,
       resize_to({0, 0, 53, 41}, 24, xa::Interpolation::kBilinear), 2e-6},
      {"resize", "10 7 13 11 32 bicubic", 4,
       resize_to({10, 7, 13, 11}, 32, xa::Interpolation::kBicubic), 2e-6},
      {"brightness", "1.3", 4, [](Image& im) { xa::adjust_brightness(im, 1.3); }, 1e-6},
      {"contrast", "0.65", 3, [](Image& im) { xa::adjust_contrast(im, 0.65); }, 2e-6},
      {"contrast", "1.4", 4, [](Image& im) { xa::adjust_contrast(im, 1.4); }, 2e-6},
      {"saturation", "1.2", 3, [](Image& im) { xa::adjust_saturation(im, 1.2); }, 1e-6},
      {"saturation", "0.7", 4, [](Image& im) { xa::adjust_saturation(im, 0.7); }, 0.0},
      {"hue", "0.09", 3, [](Image& im) { xa::adjust_hue(im, 0.09); }, 1e-5},
      {"hue", "-0.1", 3, [](Image& im) { xa::adjust_hue(im, -0.1); }, 1e-5},
      {"grayscale", "", 3, [](Image& im) { xa::to_grayscale(im); }, 1e-6},
      {"solarize", std::to_string(128.0f / 255.0f), 4, [](Image& im) { xa::solarize(im, 128); },
       0.0},
  };
  const fs::path dir = xdino::testing::fresh_dir("float_pipeline");
  std::ofstream list(dir / "jobs.txt");
  std::vector<Image> inputs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    inputs.push_back(float_test_image(w, h, jobs[i].channels, static_cast<unsigned>(i)));
    const fs::path in = dir / ("in" + std::to_string(i));
    const std::vector<float> chw = planar(inputs.back());
    write_floats(in, chw.data(), chw.size());
    list << "job" << i << ' ' << in.string() << ' ' << jobs[i].channels << ' ' << h << ' ' << w
         << ' ' << jobs[i].op << ' ' << jobs[i].args << '\n';
  }
  // Normalize, 4 channels: ours writes CHW directly.
  const xa::Normalization n{{0.2, 0.4, 0.5, 0.6}, {0.3, 0.25, 0.2, 0.15}, 4};
  const Image norm_input = float_test_image(w, h, 4, 99);
  {
    const std::vector<float> chw = planar(norm_input);
    write_floats(dir / "norm", chw.data(), chw.size());
    list << "norm " << (dir / "norm").string() << " 4 " << h << ' ' << w
         << " normalize 0.2,0.4,0.5,0.6 0.3,0.25,0.2,0.15\n";
  }
  list.close();
  std::ofstream(dir / "tv.py") << kTorchvisionScript;
  const auto r = xdino::testing::run_process(
      {xdino::testing::kPython, (dir / "tv.py").string(), (dir / "jobs.txt").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Image ours = inputs[i].clone();
    jobs[i].ours(ours);
    const std::vector<float> mine = planar(ours);
    const std::vector<float> theirs =
        read_floats(dir / ("in" + std::to_string(i) + ".out"), mine.size());
    EXPECT_LE(max_abs_diff(mine, theirs), jobs[i].tolerance)
        << jobs[i].op << " " << jobs[i].args << ", " << jobs[i].channels << " channels";
  }
  const torch::Tensor normalised = xa::Normalizer(n)(norm_input);
  const std::vector<float> mine(normalised.data_ptr<float>(),
                                normalised.data_ptr<float>() + normalised.numel());
  EXPECT_EQ(max_abs_diff(mine, read_floats(dir / "norm.out", mine.size())), 0.0);
  fs::remove_all(dir);
}

// On an 8-bit image divided by 255, each float op stays within the 8-bit path's rounding.
TEST(FloatPipeline, AgreesWithThe8BitPathWithinItsRounding) {
  const Image eight = eight_bit_test_image(61, 47, 3);
  Image as_float;
  eight.convertTo(as_float, CV_32FC3, 1.0 / 255);
  struct Op {
    const char* name;
    std::function<void(Image&)> apply;
    double levels;  // tolerance, in levels of 255
  };
  const std::vector<Op> ops = {
      {"resize down bicubic", resize_to({2, 3, 50, 40}, 17, xa::Interpolation::kBicubic), 1.0},
      {"resize up bilinear", resize_to({5, 5, 20, 20}, 45, xa::Interpolation::kBilinear), 1.0},
      {"flip", [](Image& im) { xa::hflip(im); }, 0.0},
      {"brightness", [](Image& im) { xa::adjust_brightness(im, 1.25); }, 1.0},
      {"contrast", [](Image& im) { xa::adjust_contrast(im, 0.7); }, 1.5},
      {"saturation", [](Image& im) { xa::adjust_saturation(im, 1.3); }, 1.5},
      {"grayscale", [](Image& im) { xa::to_grayscale(im); }, 1.0},
      {"blur 0.6", [](Image& im) { xa::gaussian_blur(im, 0.6); }, 3.0},
      {"blur 1.9", [](Image& im) { xa::gaussian_blur(im, 1.9); }, 3.0},
      {"solarize", [](Image& im) { xa::solarize(im, 128); }, 0.0},
  };
  for (const Op& op : ops) {
    Image a = eight.clone(), b = as_float.clone();
    op.apply(a);
    op.apply(b);
    ASSERT_TRUE(xa::is_float_image(b)) << op.name;
    Image a_float;
    a.convertTo(a_float, CV_32FC3, 1.0 / 255);
    cv::Mat diff;
    cv::absdiff(a_float, b, diff);
    double max_diff = 0;
    cv::minMaxLoc(diff.reshape(1), nullptr, &max_diff);
    EXPECT_LE(max_diff * 255, op.levels + 1e-3) << op.name;
  }
}

// The multi-crop draws the same plans from the same Rng whatever the pixels, so the float
// crops of I / 255 are the 8-bit crops of I up to the 8-bit path's rounding. Pillow truncates
// after each of brightness, contrast and saturation (-0.5 level on average, up to 1, then
// scaled by the later factors, up to 1.4 each) and rounds after every resize and blur pass:
// without hue, at most 8 levels and 2 on average. Its hue works in 8-bit HSV (hue in steps of
// 1/256: up to ~6 levels per channel on saturated pixels): with hue, 3 on average.
// (1 level = 1 / (255 * 0.225) ~ 0.0174 here.)
TEST(FloatPipeline, MultiCropOfAnEightBitImageMatchesThe8BitPath) {
  const Image eight = eight_bit_test_image(90, 70, 5);
  Image as_float;
  eight.convertTo(as_float, CV_32FC3, 1.0 / 255);
  constexpr double kLevel = 1.0 / (255 * 0.225);
  for (const bool hue : {false, true}) {
    xa::MultiCropOptions o;
    o.global_crops_size = 32;
    o.local_crops_size = 16;
    o.local_crops_number = 3;
    if (!hue) o.color_jitter.hue = 0;
    const xa::MultiCropAugmentation aug(o);
    for (uint64_t seed = 0; seed < 6; ++seed) {
      xa::Rng r8(seed), rf(seed);
      const auto a = aug(eight, r8);
      const auto b = aug(as_float, rf);
      EXPECT_EQ(r8.uniform(), rf.uniform()) << "the Rng streams diverged, seed " << seed;
      for (size_t c = 0; c < a.size(); ++c) {
        const torch::Tensor diff = (a[c] - b[c]).abs();
        EXPECT_LT(diff.mean().item<double>(), (hue ? 3 : 2) * kLevel)
            << "hue " << hue << " seed " << seed << " crop " << c;
        if (!hue) {
          EXPECT_LT(diff.max().item<double>(), 8 * kLevel) << "seed " << seed << " crop " << c;
        }
      }
    }
  }
}

TEST(FloatPipeline, MultiCropOfFourChannels) {
  const Image image = float_test_image(80, 64, 4, 11);
  xa::MultiCropOptions o;
  o.global_crops_size = 24;
  o.local_crops_size = 12;
  o.local_crops_number = 2;
  o.normalization = xa::normalization_for(4, {0.5}, {0.25});
  const xa::MultiCropAugmentation aug(o);
  EXPECT_EQ(aug.channels(), 4);
  xa::Rng rng(3);
  const auto crops = aug(image, rng);
  ASSERT_EQ(crops.size(), 4u);
  for (size_t c = 0; c < crops.size(); ++c) {
    EXPECT_EQ(crops[c].size(0), 4);
    EXPECT_TRUE(torch::isfinite(crops[c]).all().item<bool>());
    // [0, 1] values normalised by (0.5, 0.25): within [-2, 2].
    EXPECT_LE(crops[c].abs().max().item<float>(), 2.0f + 1e-5f);
  }
  // An 8-bit RGB image cannot feed four channels: one line saying so.
  xa::Rng rng2(3);
  EXPECT_THROW(aug(eight_bit_test_image(40, 40, 1), rng2), xdino::Error);
}

TEST(FloatPipeline, DecodesSixteenBitAndFourChannelsExactly) {
  // A 16-bit 4-channel image, channels stored B, G, R, A by OpenCV's encoders.
  cv::Mat bgra(9, 7, CV_16UC4);
  std::mt19937 rng(1);
  for (int y = 0; y < bgra.rows; ++y)
    for (int x = 0; x < bgra.cols; ++x)
      for (int c = 0; c < 4; ++c) bgra.ptr<uint16_t>(y)[4 * x + c] = static_cast<uint16_t>(rng());
  const auto encode = [](const char* ext, const cv::Mat& m) {
    std::vector<uchar> bytes;
    EXPECT_TRUE(cv::imencode(ext, m, bytes));
    return std::string(bytes.begin(), bytes.end());
  };
  xa::DecodeOptions o;
  o.pixels = xa::DecodeOptions::Pixels::kFloat;
  o.channels = 4;
  for (const char* ext : {".tiff", ".png"}) {
    const Image image = xa::decode_image(encode(ext, bgra), ext, o);
    ASSERT_EQ(image.type(), CV_32FC4) << ext;
    for (int y = 0; y < image.rows; ++y)
      for (int x = 0; x < image.cols; ++x) {
        const uint16_t* s = bgra.ptr<uint16_t>(y) + 4 * x;
        const float* d = image.ptr<float>(y) + 4 * x;
        const uint16_t rgba[4] = {s[2], s[1], s[0], s[3]};
        for (int c = 0; c < 4; ++c)
          ASSERT_EQ(d[c], static_cast<float>(rgba[c]) / 65535.0f) << ext << " " << c;
      }
  }
  // 4 -> 3 drops alpha; 4 -> 1 is the luma; 1 -> 3 replicates; 4 -> 2 is refused.
  const std::string tiff = encode(".tiff", bgra);
  o.channels = 3;
  Image rgb = xa::decode_image(tiff, "x.tiff", o);
  ASSERT_EQ(rgb.type(), CV_32FC3);
  EXPECT_EQ(rgb.ptr<float>(0)[0], static_cast<float>(bgra.ptr<uint16_t>(0)[2]) / 65535.0f);
  o.channels = 1;
  const Image gray = xa::decode_image(tiff, "x.tiff", o);
  ASSERT_EQ(gray.type(), CV_32FC1);
  const Image four = xa::decode_image(tiff, "x.tiff", {true, xa::DecodeOptions::Pixels::kFloat, 4});
  const float* px = four.ptr<float>(0);
  EXPECT_FLOAT_EQ(gray.ptr<float>(0)[0], 0.299f * px[0] + 0.587f * px[1] + 0.114f * px[2]);
  cv::Mat one(5, 6, CV_16UC1, cv::Scalar(4660));
  o.channels = 3;
  const Image replicated = xa::decode_image(encode(".png", one), "g.png", o);
  ASSERT_EQ(replicated.type(), CV_32FC3);
  EXPECT_EQ(replicated.ptr<float>(4)[3 * 5 + 2], 4660.0f / 65535.0f);
  o.channels = 2;
  try {
    xa::decode_image(tiff, "x.tiff", o);
    ADD_FAILURE() << "4 -> 2 channels was not refused";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.tiff has 4 channels and --in_chans is 2"),
              std::string::npos)
        << e.what();
  }
  // kAuto: 16-bit data takes the float pipeline, 8-bit RGB keeps Pillow's, and any count but
  // 1 or 3 takes the float one whatever the depth.
  const xa::DecodeOptions automatic = xa::float_pixels_if_needed(3);
  EXPECT_EQ(xa::resolve_pixels(automatic, encode(".png", one), "g.png").pixels,
            xa::DecodeOptions::Pixels::kFloat);
  EXPECT_EQ(xa::resolve_pixels(automatic, encode(".png", cv::Mat(4, 4, CV_8UC3)), "c.png").pixels,
            xa::DecodeOptions::Pixels::k8Bit);
  EXPECT_EQ(xa::resolve_pixels(xa::float_pixels_if_needed(4),
                               encode(".png", cv::Mat(4, 4, CV_8UC3)), "c.png")
                .pixels,
            xa::DecodeOptions::Pixels::kFloat);
}

// A corrupt first image does not decide, nor stop the opening: the loader reports and skips it
// (loader.h), and the first image that decodes picks the pipeline.
TEST(FloatPipeline, ACorruptFirstImageIsPassedOverWhenChoosingThePipeline) {
  const fs::path root = xdino::testing::fresh_dir("float_auto");
  fs::create_directories(root / "a");
  std::ofstream(root / "a" / "0.png") << "not a png";
  ASSERT_TRUE(
      cv::imwrite((root / "a" / "1.png").string(), cv::Mat(6, 5, CV_16UC1, cv::Scalar(300))));
  const xa::ImageFolderDataset data(root.string(), xa::FolderLayout::kClasses,
                                    xa::float_pixels_if_needed(3));
  const Image second = data.load(1);
  EXPECT_EQ(second.type(), CV_32FC3);
  EXPECT_EQ(second.ptr<float>(0)[0], 300.0f / 65535.0f);
  EXPECT_THROW(data.load(0), xdino::Error);
  fs::remove_all(root);
}

TEST(FloatPipeline, NormalisationFlags) {
  EXPECT_EQ(xa::normalization_for(3, {}, {}).mean, xa::Normalization{}.mean);
  EXPECT_EQ(xa::normalization_for(4, {0.5}, {0.25}).mean, std::vector<double>(4, 0.5));
  const auto usage = [](auto f) {
    try {
      f();
    } catch (const xdino::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no UsageError");
  };
  EXPECT_NE(
      usage([] { xa::normalization_for(4, {}, {}); }).find("--in_chans 4: give --mean and --std"),
      std::string::npos);
  EXPECT_NE(usage([] {
              xa::normalization_for(4, {0.1, 0.2}, {0.3});
            }).find("--mean has 2 values; give one or 4"),
            std::string::npos);
  EXPECT_NE(usage([] { xa::normalization_for(3, {0.1}, {}); }).find("--mean and --std go together"),
            std::string::npos);
  EXPECT_NE(usage([] {
              xa::Normalizer(xa::normalization_for(2, {0.5}, {0.0}));
            }).find("--std 0 is not a positive finite number"),
            std::string::npos);
  EXPECT_NE(usage([] {
              xa::normalization_for(2, {std::numeric_limits<double>::infinity()}, {1.0});
            }).find("--mean inf is not a finite number"),
            std::string::npos);
  // No image read here holds more than 4 channels (OpenCV's TIFF and PNG codecs).
  EXPECT_NE(usage([] {
              xa::normalization_for(5, {0.5}, {0.5});
            }).find("--in_chans 5: the images read here hold at most 4 channels"),
            std::string::npos);
}
