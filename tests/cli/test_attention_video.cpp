// Attention videos (`dino visualize` on frames and on video files, video_generation.py): a
// folder of frames becomes attention/attn-* pictures and a video at --fps; that video, given back
// as input, is cut into the same number of frames at the frame rate it carries, whose pictures make
// a video again; --video_only only assembles; a file that is no video gets one line. Frame counts,
// sizes and rates are read back with OpenCV's VideoCapture.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::run_process;

namespace {

struct VideoInfo {
  int frames = 0;
  double fps = 0;
  cv::Size size;
};

VideoInfo read_back(const fs::path& file) {
  cv::VideoCapture capture(file.string());
  EXPECT_TRUE(capture.isOpened()) << file;
  VideoInfo info;
  info.fps = capture.get(cv::CAP_PROP_FPS);
  cv::Mat frame;
  while (capture.read(frame) && !frame.empty()) {
    info.size = frame.size();
    ++info.frames;
  }
  return info;
}

int count_files_with_prefix(const fs::path& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}

std::vector<std::string> visualize(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {xdino::testing::dino_binary(),
                                   "visualize",
                                   "--arch",
                                   "vit_tiny",
                                   "--patch_size",
                                   "16",
                                   "--image_size",
                                   "0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

}  // namespace

TEST(AttentionVideo, FramesToVideoAndBack) {
  const fs::path dir = xdino::testing::fresh_dir("attention_video");
  fs::create_directories(dir / "frames");
  for (int t = 0; t < 6; ++t) {  // a bright square moving over a gradient, 96 x 64
    cv::Mat f(64, 96, CV_8UC3);
    for (int y = 0; y < 64; ++y)
      for (int x = 0; x < 96; ++x) f.at<cv::Vec3b>(y, x) = cv::Vec3b(x * 2, y * 3, 60);
    f(cv::Rect(8 + 10 * t, 16, 24, 24)).setTo(cv::Scalar(255, 255, 255));
    char name[32];
    std::snprintf(name, sizeof name, "%05d.jpg", t);
    cv::imwrite((dir / "frames" / name).string(), f);
  }
  auto r = run_process(visualize({"--image_path", (dir / "frames").string(), "--output_dir",
                                  (dir / "out").string(), "--fps", "12", "--video_format", "avi"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_files_with_prefix(dir / "out" / "attention", "attn-"), 6);
  VideoInfo v = read_back(dir / "out" / "video.avi");
  EXPECT_EQ(v.frames, 6);
  EXPECT_NEAR(v.fps, 12.0, 1e-6);
  EXPECT_EQ(v.size, cv::Size(96, 64));

  // The video as input: frames, pictures and a video at the rate it carries.
  r = run_process(visualize({"--image_path", (dir / "out" / "video.avi").string(), "--output_dir",
                             (dir / "again").string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_files_with_prefix(dir / "again" / "frames", "frame-"), 6);
  EXPECT_TRUE(fs::exists(dir / "again" / "frames" / "frame-0005.jpg"));
  EXPECT_EQ(count_files_with_prefix(dir / "again" / "attention", "attn-frame-"), 6);
  v = read_back(dir / "again" / "video.mp4");
  EXPECT_EQ(v.frames, 6);
  EXPECT_NEAR(v.fps, 12.0, 1e-6);

  // --video_only: the pictures alone make the video.
  r = run_process(visualize({"--video_only", "--image_path", (dir / "again" / "attention").string(),
                             "--output_dir", (dir / "only").string(), "--fps", "5"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  v = read_back(dir / "only" / "video.mp4");
  EXPECT_EQ(v.frames, 6);
  EXPECT_NEAR(v.fps, 5.0, 1e-6);

  // A file that is not a video: one line, usage exit, nothing written.
  std::ofstream(dir / "broken.mp4") << "not a video";
  r = run_process(visualize({"--image_path", (dir / "broken.mp4").string(), "--output_dir",
                             (dir / "broken_out").string()}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot open the video " + (dir / "broken.mp4").string()), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "broken_out" / "video.mp4"));
  fs::remove_all(dir);
}
