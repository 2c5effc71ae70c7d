#include "eval/video/attention_video.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#include <vector>

#include "core/check.h"

namespace fs = std::filesystem;

namespace xdino::eval::video {

bool is_video_file(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::vector<std::string> kinds = {".mp4", ".avi", ".mov",  ".mkv", ".webm",
                                                 ".m4v", ".mpg", ".mpeg", ".wmv"};
  return fs::is_regular_file(path) && std::find(kinds.begin(), kinds.end(), ext) != kinds.end();
}

double extract_frames(const fs::path& video, const fs::path& dir) {
  cv::VideoCapture capture(video.string());
  XDINO_CHECK_ARG(capture.isOpened(), "cannot open the video ", video.string(),
                  " (not a video OpenCV's FFmpeg backend can decode)");
  const double fps = capture.get(cv::CAP_PROP_FPS);
  fs::create_directories(dir);
  cv::Mat frame;
  int64_t count = 0;
  while (capture.read(frame) && !frame.empty()) {
    char name[32];
    std::snprintf(name, sizeof name, "frame-%04lld.jpg", static_cast<long long>(count));
    XDINO_CHECK(cv::imwrite((dir / name).string(), frame), "cannot write ", (dir / name).string());
    ++count;
  }
  XDINO_CHECK_ARG(count > 0, "the video ", video.string(), " has no frame OpenCV can decode");
  return fps;
}

int64_t write_video(const fs::path& dir, const fs::path& file, double fps,
                    const std::string& format) {
  XDINO_CHECK_ARG(format == "mp4" || format == "avi", "--video_format must be mp4 or avi, got '",
                  format, "'");
  XDINO_CHECK_ARG(fps > 0, "the frame rate must be > 0, got ", fps, " (--fps)");
  std::vector<fs::path> pictures;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    if (name.rfind("attn-", 0) == 0 && (ext == ".jpg" || ext == ".png"))
      pictures.push_back(e.path());
  }
  std::sort(pictures.begin(), pictures.end());
  XDINO_CHECK_ARG(!pictures.empty(), "no attn-*.jpg/.png picture in ", dir.string());
  const cv::Mat first = cv::imread(pictures[0].string(), cv::IMREAD_COLOR);
  XDINO_CHECK(!first.empty(), "cannot read ", pictures[0].string());
  const int fourcc = format == "mp4" ? cv::VideoWriter::fourcc('m', 'p', '4', 'v')
                                     : cv::VideoWriter::fourcc('X', 'V', 'I', 'D');
  // The writer picks the container from the name: write under a temporary name of the same
  // extension, then rename, so a failed run leaves no half-written video.
  const fs::path temp = file.parent_path() / (".tmp-" + file.filename().string());
  cv::VideoWriter writer(temp.string(), fourcc, fps, first.size());
  XDINO_CHECK(writer.isOpened(), "OpenCV cannot open a ", format, " writer for ", file.string());
  for (const fs::path& p : pictures) {
    cv::Mat frame = cv::imread(p.string(), cv::IMREAD_COLOR);
    XDINO_CHECK(!frame.empty(), "cannot read ", p.string());
    if (frame.size() != first.size()) cv::resize(frame, frame, first.size());
    writer.write(frame);
  }
  writer.release();
  fs::rename(temp, file);
  return static_cast<int64_t>(pictures.size());
}

}  // namespace xdino::eval::video
