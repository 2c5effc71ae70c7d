// thumbnail() and reduce() against Pillow itself: the same pixels go through PIL (Debian's
// python3-pil 9.4, the Pillow that eval_image_retrieval.py's ANTIALIAS still exists in; Debian
// 13's Pillow 11 gives the same bytes under its other name, LANCZOS) and
// through ours, and every byte must agree. Sizes cover: Image.reduce by 2 and by 4 before the
// Lanczos resample (reducing_gap 2.0), reduce factors that differ per axis and leave partial
// blocks, no reduce, a portrait image, an image already small enough (left as it is), and
// aspect rounding to a side of 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "augment/eval_transforms.h"
#include "augment/ops/resize.h"
#include "core/check.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using xdino::augment::Image;

namespace {

// Noise on a gradient: every rounding step of a resample shows up in such pixels.
Image thumbnail_test_image(int width, int height, unsigned seed) {
  Image image(height, width, CV_8UC3);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-40, 40);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int base = (x * 255 / width + y * 255 / height + 80 * c) % 256;
        image.ptr<uint8_t>(y)[3 * x + c] =
            static_cast<uint8_t>(std::clamp(base + noise(rng), 0, 255));
      }
    }
  }
  return image;
}

void write_raw_image(const fs::path& path, const Image& image) {
  std::ofstream out(path, std::ios::binary);
  for (int y = 0; y < image.rows; ++y)
    out.write(reinterpret_cast<const char*>(image.ptr<uint8_t>(y)), 3 * image.cols);
}

Image read_raw(const fs::path& path, int width, int height) {
  Image image(height, width, CV_8UC3);
  std::ifstream in(path, std::ios::binary);
  for (int y = 0; y < height; ++y)
    in.read(reinterpret_cast<char*>(image.ptr<uint8_t>(y)), 3 * width);
  EXPECT_TRUE(in.good()) << path;
  return image;
}

// Each job line: "<op> <in> <w> <h> <a> <b> <out>"; op thumbnail (a = size) or reduce (a, b =
// factors). The script writes <out> raw and prints "<w> <h>" of it per job.
const char* kPillowScript = R"(
import sys
from PIL import Image
for line in open(sys.argv[1]):
    op, src, w, h, a, b, dst = line.split()
    im = Image.frombytes("RGB", (int(w), int(h)), open(src, "rb").read())
    if op == "thumbnail":
        # ANTIALIAS, as eval_image_retrieval.py writes it, is LANCZOS; Pillow 10 (Debian 13)
        # dropped the old name.
        im.thumbnail((int(a), int(a)), Image.LANCZOS)
    else:
        im = im.reduce((int(a), int(b)))
    open(dst, "wb").write(im.tobytes())
    print(im.size[0], im.size[1])
)";

struct Job {
  std::string op;
  int width, height, a, b;
};

}  // namespace

TEST(Thumbnail, BitExactWithPillow) {
  if (!xdino::testing::python_has("PIL"))
    XDINO_SKIP_MISSING() << "/usr/bin/python3 cannot import PIL";
  const std::vector<Job> jobs = {
      {"thumbnail", 1024, 768, 224, 0},  // Oxford's size: reduce 2x2, then Lanczos 512 -> 224
      {"thumbnail", 999, 333, 100, 0},   // reduce 4x1 with a partial last block
      {"thumbnail", 500, 1200, 320, 0},  // portrait, reduce 1x1 -> none, Lanczos only
      {"thumbnail", 230, 229, 224, 0},   // a few pixels smaller
      {"thumbnail", 100, 50, 224, 0},    // smaller than the target: unchanged
      {"thumbnail", 451, 7, 224, 0},     // the short side rounds to 3
      {"thumbnail", 2000, 3, 224, 0},    // ... and to 1 (at least 1)
      {
          "reduce",
          101,
          67,
          3,
          2,
      },
      {"reduce", 64, 64, 2, 2},
      {"reduce", 37, 41, 5, 1},
      {"reduce", 37, 41, 7, 7},
  };
  const fs::path dir = xdino::testing::fresh_dir("thumbnail");
  std::ofstream list(dir / "jobs.txt");
  std::vector<Image> inputs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    inputs.push_back(thumbnail_test_image(j.width, j.height, static_cast<unsigned>(i)));
    const fs::path in = dir / ("in" + std::to_string(i)), out = dir / ("out" + std::to_string(i));
    write_raw_image(in, inputs.back());
    list << j.op << ' ' << in.string() << ' ' << j.width << ' ' << j.height << ' ' << j.a << ' '
         << j.b << ' ' << out.string() << '\n';
  }
  list.close();
  std::ofstream(dir / "pillow.py") << kPillowScript;
  const auto r = xdino::testing::run_process(
      {"/usr/bin/python3", (dir / "pillow.py").string(), (dir / "jobs.txt").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream sizes(r.out);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    int w = 0, h = 0;
    ASSERT_TRUE(sizes >> w >> h);
    const Image ours = j.op == "thumbnail" ? xdino::augment::thumbnail(inputs[i], j.a)
                                           : xdino::augment::reduce(inputs[i], j.a, j.b);
    ASSERT_EQ(ours.cols, w) << j.op << " " << j.width << "x" << j.height;
    ASSERT_EQ(ours.rows, h) << j.op << " " << j.width << "x" << j.height;
    const Image theirs = read_raw(dir / ("out" + std::to_string(i)), w, h);
    cv::Mat diff;
    cv::absdiff(ours, theirs, diff);
    double max_diff = 0;
    cv::minMaxLoc(diff.reshape(1), nullptr, &max_diff);
    EXPECT_EQ(max_diff, 0) << j.op << " " << j.width << "x" << j.height << " -> " << w << "x" << h;
  }
  fs::remove_all(dir);
}

TEST(Thumbnail, SizeKeepsTheAspectRatio) {
  using xdino::augment::thumbnail_size;
  EXPECT_EQ(thumbnail_size(1024, 768, 224), cv::Size(224, 168));
  EXPECT_EQ(thumbnail_size(768, 1024, 224), cv::Size(168, 224));
  EXPECT_EQ(thumbnail_size(100, 50, 224), cv::Size(100, 50));
  EXPECT_EQ(thumbnail_size(2000, 3, 224), cv::Size(224, 1));
  EXPECT_THROW(thumbnail_size(10, 10, 0), xdino::UsageError);
}
