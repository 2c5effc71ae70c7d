// Video object segmentation (eval/video/): label propagation against a Python transcription of
// eval_video_segmentation.py's (the neighbourhood mask built pair by pair, as restrict_
// neighborhood does), Pillow's NEAREST resize against PIL, J and F on tiny masks whose answer
// is known by hand, and `dino video_segmentation` end to end on a DAVIS-like set
// (tests/data/video/make_davis.py) whose J&F is recomputed in Python from the written PNGs by
// the davis2017-evaluation definitions (tests/support/video_reference.py).
// Skipped (failing in CI, tests/support/require.h) without Python torch/PIL/skimage.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "core/ivalue.h"
#include "core/json.h"
#include "core/pth.h"
#include "eval/video/davis_metrics.h"
#include "eval/video/indexed_png.h"
#include "eval/video/label_propagation.h"
#include "eval/video/video_segmentation.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
namespace video = xdino::eval::video;
using xdino::testing::kPython;
using xdino::testing::last_line;
using xdino::testing::python_lacks;
using xdino::testing::repo_file;
using xdino::testing::run_process;

namespace {

// What the Python references import.
const std::vector<std::string> kVideoModules = {"torch", "PIL", "skimage"};

torch::Tensor python_reference(const std::string& mode, const xdino::IDict& input,
                               const fs::path& dir) {
  xdino::save_pth(dir / "in.pth", input);
  const auto r = run_process({kPython, repo_file("tests/support/video_reference.py"), mode,
                              (dir / "in.pth").string(), (dir / "out.pth").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return xdino::load_pth(dir / "out.pth").toTensor();
}

cv::Mat square(int size, int x, int y, int side) {
  cv::Mat m(size, size, CV_8UC1, cv::Scalar(0));
  m(cv::Rect(x, y, side, side)).setTo(1);
  return m;
}

}  // namespace

TEST(VideoSegmentation, PropagationMatchesThePythonTranscription) {
  const std::string missing = python_lacks(kVideoModules);
  if (!missing.empty()) XDINO_SKIP_MISSING() << missing;
  const fs::path dir = xdino::testing::fresh_dir("propagation");
  torch::manual_seed(3);
  for (const int64_t radius : {2, 0}) {
    const int64_t n = 3, c = 8, h = 5, w = 7, k = 3;
    const torch::Tensor target = torch::randn({h * w, c});
    const torch::Tensor sources = torch::randn({n, c, h * w});
    const torch::Tensor segs = torch::rand({n, k, h, w});
    xdino::IDict in = xdino::make_dict();
    in.insert("target", target);
    in.insert("sources", sources);
    in.insert("segs", segs);
    in.insert("radius", radius);
    in.insert("topk", int64_t{5});
    const torch::Tensor theirs = python_reference("propagate", in, dir);
    const torch::Tensor mask =
        radius > 0 ? video::neighbourhood_mask(h, w, radius) : torch::Tensor();
    const torch::Tensor ours = video::propagate(target, sources, segs, mask, 5);
    ASSERT_EQ(ours.sizes(), theirs.sizes());
    EXPECT_TRUE(torch::allclose(ours, theirs, 1e-5, 1e-6))
        << "radius " << radius << ": max difference " << (ours - theirs).abs().max().item<float>();
  }
  fs::remove_all(dir);
}

TEST(VideoSegmentation, FramesAndMasksShareTheFeatureGrid) {
  // The scripts' sizes: the short side 480, the long one floored to a multiple of 64.
  EXPECT_EQ(video::frame_size(480, 854), std::make_pair(480, 832));  // DAVIS
  EXPECT_EQ(video::frame_size(854, 480), std::make_pair(832, 480));
  EXPECT_EQ(video::frame_size(180, 320), std::make_pair(480, 832));
  for (const auto& [h, w] : {std::pair{480, 854}, {854, 480}, {180, 320}, {300, 300}, {64, 64}})
    EXPECT_EQ(video::mask_size(h, w), video::frame_size(h, w)) << h << " x " << w;
  // Square: 480 x 448 for both (the script's read_seg would give the mask 448 x 480).
  EXPECT_EQ(video::mask_size(300, 300), std::make_pair(480, 448));
}

TEST(VideoSegmentation, NearestResizeIsPillows) {
  const std::string missing = python_lacks(kVideoModules);
  if (!missing.empty()) XDINO_SKIP_MISSING() << missing;
  const fs::path dir = xdino::testing::fresh_dir("nearest");
  const torch::Tensor labels = torch::randint(0, 5, {37, 61}, torch::kUInt8);
  const cv::Mat m(37, 61, CV_8UC1, labels.data_ptr<uint8_t>());
  for (const auto& [w, h] :
       std::vector<std::pair<int, int>>{{20, 11}, {854, 480}, {61, 37}, {7, 90}}) {
    xdino::IDict in = xdino::make_dict();
    in.insert("labels", labels);
    in.insert("width", int64_t{w});
    in.insert("height", int64_t{h});
    const torch::Tensor theirs = python_reference("nearest", in, dir);
    const cv::Mat ours = video::resize_nearest(m, w, h);
    const torch::Tensor ours_t = torch::from_blob(ours.data, {h, w}, torch::kUInt8);
    EXPECT_TRUE(torch::equal(ours_t, theirs)) << w << "x" << h;
  }
  fs::remove_all(dir);
}

TEST(VideoSegmentation, JAndFOnMasksWithAKnownAnswer) {
  // J: a 4x4 square against itself shifted one pixel right: 12 shared, 20 in the union.
  EXPECT_DOUBLE_EQ(video::region_similarity(square(10, 2, 2, 4), square(10, 3, 2, 4), {}), 0.6);
  EXPECT_DOUBLE_EQ(video::region_similarity(square(10, 2, 2, 4), square(10, 2, 2, 4), {}), 1.0);
  // Both empty: 1 by definition. Void pixels do not count: voiding the non-shared column of
  // each leaves 12 / 12.
  const cv::Mat empty(10, 10, CV_8UC1, cv::Scalar(0));
  EXPECT_DOUBLE_EQ(video::region_similarity(empty, empty, {}), 1.0);
  cv::Mat void_pixels(10, 10, CV_8UC1, cv::Scalar(0));
  void_pixels.col(2).setTo(1);
  void_pixels.col(6).setTo(1);
  EXPECT_DOUBLE_EQ(video::region_similarity(square(10, 2, 2, 4), square(10, 3, 2, 4), void_pixels),
                   1.0);
  // F: in a 100 x 100 image the tolerance is ceil(0.008 x 141.4) = 2 pixels. A 40-pixel
  // square moved by 2 keeps every boundary pixel within 2 of the other's: F = 1. Moved by 3,
  // its two vertical sides (about half the boundary) fall outside: F about 1/2.
  const cv::Mat gt = square(100, 30, 30, 40);
  EXPECT_DOUBLE_EQ(video::boundary_measure(gt, square(100, 32, 30, 40), {}), 1.0);
  const double f3 = video::boundary_measure(gt, square(100, 33, 30, 40), {});
  EXPECT_GT(f3, 0.4);
  EXPECT_LT(f3, 0.6);
  // The boundary map of a 2x2 square at (1,1) in a 4x4 image: seg2bmap marks a pixel that
  // differs from its right, lower or lower-right neighbour, so the ring around the square's
  // upper-left pixel (which equals all three) up to row/column 2; the last row and column
  // compare with one neighbour only and are 0 here.
  cv::Mat small(4, 4, CV_8UC1, cv::Scalar(0));
  small(cv::Rect(1, 1, 2, 2)).setTo(1);
  const cv::Mat b = video::boundary_map(small);
  const uint8_t expected[4][4] = {{1, 1, 1, 0}, {1, 0, 1, 0}, {1, 1, 1, 0}, {0, 0, 0, 0}};
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(b.at<uint8_t>(y, x), expected[y][x]) << y << "," << x;
  // Decay: 9 frames, bins [0..2] and [6..8]: (1 + 1 + 1)/3 - (0 + 0 + 0)/3 = 1.
  const video::Statistics s = video::statistics({1, 1, 1, 1, 0.6, 0.4, 0, 0, 0});
  EXPECT_NEAR(s.mean, 5.0 / 9, 1e-12);
  EXPECT_NEAR(s.recall, 5.0 / 9, 1e-12);
  EXPECT_NEAR(s.decay, 1.0, 1e-12);
}

TEST(VideoSegmentation, EndToEndJAndFMatchThePythonToolkitDefinitions) {
  const std::string missing = python_lacks(kVideoModules);
  if (!missing.empty()) XDINO_SKIP_MISSING() << missing;
  const fs::path dir = xdino::testing::fresh_dir("video_segmentation");
  auto r = run_process(
      {kPython, repo_file("tests/data/video/make_davis.py"), (dir / "davis").string(), "6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path out = dir / "out";
  r = run_process({xdino::testing::dino_binary(), "video_segmentation", "--data_path",
                   (dir / "davis").string(), "--arch", "vit_tiny", "--output_dir", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(out / "video_segmentation.json");
  std::stringstream text;
  text << in.rdbuf();
  const xdino::Json ours = xdino::parse_json(text.str(), "video_segmentation.json");
  r = run_process({kPython, repo_file("tests/support/video_reference.py"), "jf",
                   (dir / "davis").string(), out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const xdino::Json ref = xdino::parse_json(r.out, "video_reference.py");
  EXPECT_NEAR(ours["J&F-Mean"].get<double>(), ref["JF"].get<double>(), 1e-12);
  const char* names[] = {"Mean", "Recall", "Decay"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(ours[std::string("J-") + names[i]].get<double>(), ref["J"][i].get<double>(), 1e-12);
    EXPECT_NEAR(ours[std::string("F-") + names[i]].get<double>(), ref["F"][i].get<double>(), 1e-12);
  }
  ASSERT_EQ(ours["sequences"].size(), 2u);
  EXPECT_EQ(ours["sequences"][1]["objects"].size(), 2u);  // "pair" has two objects
  // The masks are palette PNGs in the DAVIS palette, as PIL sees them.
  r = run_process({kPython, "-c",
                   "import sys; from PIL import Image; im = Image.open(sys.argv[1]); "
                   "print(im.mode, im.getpalette()[:9])",
                   (out / "pair" / "00003.png").string()});
  EXPECT_EQ(r.out, "P [0, 0, 0, 128, 0, 0, 0, 128, 0]\n") << r.err;
  EXPECT_EQ(video::read_label_png(out / "pair" / "00000.png").size(), cv::Size(320, 180));

  // A frame whose size differs from its annotation: one line, exit 1.
  const fs::path first = dir / "davis" / "Annotations" / "480p" / "walk" / "00000.png";
  video::write_label_png(first, cv::Mat(90, 160, CV_8UC1, cv::Scalar(1)), video::davis_palette());
  r = run_process({xdino::testing::dino_binary(), "video_segmentation", "--data_path",
                   (dir / "davis").string(), "--arch", "vit_tiny", "--output_dir",
                   (dir / "bad").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(last_line(r.err).find("is 320x180 but its annotation is 160x90"), std::string::npos)
      << r.err;
  fs::remove_all(dir);
}
