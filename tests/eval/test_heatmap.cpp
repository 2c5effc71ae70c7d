// Picture and file outputs of the visualisations: masks keep the requested attention mass,
// nearest upsampling, colour maps, PNG and .npy files that decode back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>

#include "core/atomic_file.h"
#include "eval/heatmap.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using namespace xdino::eval;

TEST(Heatmap, MaskKeepsTheSmallestSetReachingTheMass) {
  torch::manual_seed(0);
  const auto attn = torch::softmax(torch::randn({4, 50}) * 3, 1);
  for (double t : {0.3, 0.6, 0.9}) {
    const auto mask = attention_mask(attn, t);
    for (int h = 0; h < 4; ++h) {
      // Independent check: the kept set is the top entries; its mass reaches t, and without
      // its smallest member it would not.
      std::vector<double> kept, dropped;
      const double total = attn[h].sum().item<double>();
      for (int n = 0; n < 50; ++n)
        (mask[h][n].item<float>() > 0.5f ? kept : dropped)
            .push_back(attn[h][n].item<double>() / total);
      double mass = 0;
      for (double v : kept) mass += v;
      ASSERT_FALSE(kept.empty());
      const double smallest_kept = *std::min_element(kept.begin(), kept.end());
      for (double v : dropped) EXPECT_LE(v, smallest_kept);
      EXPECT_GT(mass, t - 1e-12) << "head " << h << " threshold " << t;
      EXPECT_LE(mass - smallest_kept, t + 1e-12) << "head " << h << " threshold " << t;
    }
  }
}

TEST(Heatmap, UpsampleNearestRepeatsEachPatch) {
  const auto maps = torch::arange(12, torch::kFloat).view({2, 2, 3});
  const auto up = upsample_nearest(maps, 4);
  ASSERT_EQ(up.sizes(), (std::vector<int64_t>{2, 8, 12}));
  for (int h = 0; h < 2; ++h)
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 12; ++x)
        EXPECT_EQ(up[h][y][x].item<float>(), maps[h][y / 4][x / 4].item<float>());
}

TEST(Heatmap, ColorizeScalesEachMapToItsRange) {
  const auto map = torch::tensor({{0.0f, 1.0f}, {2.0f, 4.0f}});
  const cv::Mat rgb = colorize(map);
  ASSERT_EQ(rgb.type(), CV_8UC3);
  // viridis: dark purple at the minimum, yellow at the maximum.
  const cv::Vec3b lo = rgb.at<cv::Vec3b>(0, 0), hi = rgb.at<cv::Vec3b>(1, 1);
  EXPECT_GT(lo[2], lo[1]) << "minimum is purple-blue";
  EXPECT_GT(hi[0], 200);
  EXPECT_GT(hi[1], 200);
  EXPECT_LT(hi[2], 100) << "maximum is yellow";
  const cv::Mat flat = colorize(torch::full({3, 3}, 5.0f));
  EXPECT_EQ(flat.at<cv::Vec3b>(2, 2), lo) << "a constant map shows the colormap's first entry";
}

TEST(Heatmap, OverlayBlendsHalfwayTowardsTheColour) {
  cv::Mat img(6, 6, CV_8UC3, cv::Scalar(100, 100, 100));
  auto mask = torch::zeros({6, 6});
  mask.slice(0, 2, 4).slice(1, 2, 4).fill_(1);
  const cv::Mat out = overlay_mask(img, mask);
  EXPECT_EQ(out.at<cv::Vec3b>(0, 0), cv::Vec3b(100, 100, 100)) << "outside the mask: unchanged";
  // Inside: 100*(1-0.5) + 0.5*255 = 177.5 for red, 50 for green/blue (the contour may redraw
  // the border pixels in pure red, so look at the blend rule on the pixel value ranges).
  const cv::Vec3b in = out.at<cv::Vec3b>(2, 2);
  EXPECT_GE(in[0], 177);
  EXPECT_LE(in[1], 50);
}

TEST(Heatmap, PngDecodesBackWithItsSize) {
  const fs::path dir = xdino::testing::fresh_dir("heatmap");
  const cv::Mat grid = make_grid(
      {{"image", {cv::Mat(20, 30, CV_8UC3, cv::Scalar(1, 2, 3))}, {}},
       {"heads", {colorize(torch::rand({5, 5})), colorize(torch::rand({5, 5}))}, {"h0", "h1"}}},
      64);
  write_png(dir / "grid.png", grid);
  const cv::Mat back = cv::imread((dir / "grid.png").string(), cv::IMREAD_UNCHANGED);
  EXPECT_EQ(back.cols, grid.cols);
  EXPECT_EQ(back.rows, grid.rows);
  EXPECT_EQ(back.channels(), 3);
  fs::remove_all(dir);
}

TEST(Heatmap, NpyHasAValidHeaderAndNumpyReadsIt) {
  const fs::path dir = xdino::testing::fresh_dir("heatmap");
  const auto t = torch::arange(24, torch::kFloat).view({2, 3, 4}) / 7;
  write_npy(dir / "maps.npy", t);
  write_npy(dir / "vec.npy", torch::arange(5, torch::kLong));
  const std::string bytes = xdino::read_file(dir / "maps.npy");
  ASSERT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  EXPECT_EQ(bytes.size(), 10 + header_len + 24 * 4);
  EXPECT_NE(bytes.find("'shape': (2, 3, 4)"), std::string::npos);
  EXPECT_NE(xdino::read_file(dir / "vec.npy").find("'shape': (5,)"), std::string::npos);
  const auto probe = xdino::testing::run_process({"/usr/bin/python3", "-c", "import numpy"});
  if (probe.exit_code == 0) {
    const auto r = xdino::testing::run_process(
        {"/usr/bin/python3", "-c",
         "import numpy as np, sys; a = np.load(sys.argv[1]); v = np.load(sys.argv[2]);"
         "assert a.shape == (2, 3, 4) and a.dtype == np.float32;"
         "assert abs(a[1, 2, 3] - 23 / 7) < 1e-6; assert list(v) == [0, 1, 2, 3, 4]; print('ok')",
         (dir / "maps.npy").string(), (dir / "vec.npy").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  fs::remove_all(dir);
}
