// The preview picture: layout (rows of views, padding) and denormalisation, in closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "augment/data/decode.h"
#include "augment/data/encode.h"
#include "augment/preview.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "tests/support/files.h"

using namespace xdino::augment;

TEST(Preview, RowsOfViewsDenormalisedAndPadded) {
  // Row 0: a 4x4 view whose channel c holds (v_c - mean_c) / std_c, and a 2x2 one; row 1: 3x3.
  const std::vector<double> mean{0.485, 0.456, 0.406}, std{0.229, 0.224, 0.225};
  const double value[3] = {51 / 255.0, 153 / 255.0, 229 / 255.0};  // exact after the round trip
  torch::Tensor a = torch::empty({3, 4, 4});
  for (int c = 0; c < 3; ++c) a[c].fill_((value[c] - mean[c]) / std[c]);
  const torch::Tensor b = torch::full({3, 2, 2}, 10.0);   // far above 1: clipped to 255
  const torch::Tensor d = torch::full({3, 3, 3}, -10.0);  // far below 0: clipped to 0
  const Image grid = views_grid({{a, b}, {d}}, mean, std, 2);
  // Width: 2 + 4 + 2 + 2 + 2; height: 2 + 4 + 2 + 3 + 2.
  ASSERT_EQ(grid.cols, 12);
  ASSERT_EQ(grid.rows, 13);
  for (int c = 0; c < 3; ++c) {
    const int expected = static_cast<int>(std::lround(value[c] * 255));
    EXPECT_EQ(grid.at<cv::Vec3b>(2, 2)[c], expected) << c;
    EXPECT_EQ(grid.at<cv::Vec3b>(5, 5)[c], expected);
  }
  EXPECT_EQ(grid.at<cv::Vec3b>(2, 8), cv::Vec3b(255, 255, 255));  // row 0, view 1
  EXPECT_EQ(grid.at<cv::Vec3b>(4, 8), cv::Vec3b(128, 128, 128));  // below the short view
  EXPECT_EQ(grid.at<cv::Vec3b>(8, 2), cv::Vec3b(0, 0, 0));        // row 1 starts at 2+4+2
  EXPECT_EQ(grid.at<cv::Vec3b>(0, 0), cv::Vec3b(128, 128, 128));  // padding
  EXPECT_THROW(views_grid({{torch::zeros({1, 4, 4})}}), xdino::Error);
}

TEST(Preview, PngRoundTripsThroughTheDecoder) {
  const auto dir = xdino::testing::fresh_dir("preview_png");
  Image rgb(3, 5, CV_8UC3);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) rgb.at<cv::Vec3b>(r, c) = cv::Vec3b(r * 50, c * 40, 7);
  write_png((dir / "p.png").string(), rgb);
  const Image back = read_image(dir / "p.png");
  ASSERT_EQ(back.size(), rgb.size());
  EXPECT_EQ(cv::norm(back, rgb, cv::NORM_INF), 0);  // RGB order kept, lossless
  std::filesystem::remove_all(dir);
}
