// A labelled image set on which DINO can be seen to learn within seconds: the class is a
// texture (horizontal, vertical or diagonal stripes, or a checkerboard, random period and
// phase), the colours are nuisance: each of the two ink colours is a random gradient across
// the image, plus pixel noise. Random crops of one image share its texture but not its
// colours, so what DINO's views agree on is the texture, while the features of a random
// network are dominated by colour (measured in tests/cli/test_learning.cpp).
//
// Contract: write_textures(root, n_train, n_val, size) writes root/{train,val}/classK/NNNN.png
// (ImageFolder, K in 0..3, n images per class and split, size x size RGB), the same bytes on
// every call. Needs OpenCV (link xdino_augment or above).
#pragma once

#include <cmath>
#include <filesystem>
#include <opencv2/core.hpp>
#include <random>
#include <string>

#include "augment/data/encode.h"

namespace xdino::testing {

inline void write_textures(const std::filesystem::path& root, int n_train, int n_val,
                           int size = 32) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> noise(0.0, 8.0);
  const double pi = std::acos(-1.0);
  // A colour field: a random gradient between two random RGB colours along a random direction.
  auto field = [&](cv::Mat& out) {
    double a[3], b[3];
    for (double& v : a) v = 255 * u(rng);
    for (double& v : b) v = 255 * u(rng);
    const double angle = 2 * pi * u(rng);
    out.create(size, size, CV_64FC3);
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        const double t = ((std::cos(angle) * x + std::sin(angle) * y) / size + 1) / 2;
        for (int c = 0; c < 3; ++c) out.at<cv::Vec3d>(y, x)[c] = a[c] * (1 - t) + b[c] * t;
      }
  };
  for (const auto& [split, n] : {std::pair{std::string("train"), n_train}, {"val", n_val}}) {
    for (int k = 0; k < 4; ++k) {
      const auto dir = root / split / ("class" + std::to_string(k));
      std::filesystem::create_directories(dir);
      for (int i = 0; i < n; ++i) {
        const double period = 5 + 5 * u(rng), phase = 10 * u(rng);
        cv::Mat fg, bg;
        field(fg);
        field(bg);
        cv::Mat img(size, size, CV_8UC3);
        for (int y = 0; y < size; ++y)
          for (int x = 0; x < size; ++x) {
            const double sx = std::sin(2 * pi * (x + phase) / period);
            const double sy = std::sin(2 * pi * (y + phase) / period);
            const double sd = std::sin(2 * pi * (x + y + phase) / period);
            const double v = k == 0 ? sy : k == 1 ? sx : k == 2 ? sd : sx * sy;
            const cv::Vec3d& ink = v > 0 ? fg.at<cv::Vec3d>(y, x) : bg.at<cv::Vec3d>(y, x);
            for (int c = 0; c < 3; ++c)
              img.at<cv::Vec3b>(y, x)[c] = cv::saturate_cast<uint8_t>(ink[c] + noise(rng));
          }
        char name[16];
        std::snprintf(name, sizeof name, "%04d.png", i);
        augment::write_png(dir / name, img);
      }
    }
  }
}

}  // namespace xdino::testing
