// Inference time and peak memory of X-ViT-S/16 and XCiT-S12/16 against ViT-S/16 as the
// resolution grows: XNorm and XCA are linear in the number of tokens, self-attention quadratic.
//
//   build/bench/bench_models [--out DIR] [--sizes 224,384,512,768] [--threads N]
//
// Every (model, size) point runs in a child process of its own (this binary re-executed with
// --child), so its peak resident memory (VmHWM) is not contaminated by other points. Batch 1,
// CPU, eval mode, no_grad; time = median of several forwards after one warm-up.
// Writes DIR/bench_models.csv and DIR/bench_models.png (default DIR: bench_out).
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/blas.h"
#include "core/check.h"
#include "models/registry.h"

namespace {

using xdino::models::create_backbone;

// The compared models, their plot labels and colours (BGR). Ratios are printed against the
// last one (ViT).
struct Series {
  const char* arch;
  const char* label;
  cv::Scalar colour;
};
const std::vector<Series>& series() {
  static const std::vector<Series> s = {
      {"xvit_small", "X-ViT-S/16", cv::Scalar(40, 160, 40)},
      {"xcit_small_12_p16", "XCiT-S12/16", cv::Scalar(200, 90, 30)},
      {"vit_small", "ViT-S/16", cv::Scalar(40, 40, 220)}};
  return s;
}

struct Point {
  std::string arch;
  int64_t size = 0, tokens = 0;
  double gflops = 0, median_ms = 0, cpu_ms = 0, model_mb = 0, peak_mb = 0;
  int reps = 0;
};

double status_mb(const std::string& field) {  // VmRSS / VmHWM of this process, MiB
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  return 0;
}

// CPU time of the whole process (all threads), ms: steadier than wall time on a shared machine.
double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

// Forward passes need fewer repetitions as they get slower (the 768 ViT takes seconds).
int repetitions(int64_t size) { return size <= 224 ? 10 : size <= 384 ? 5 : size <= 512 ? 3 : 2; }

int run_child(const std::string& arch, int64_t size) {
  torch::NoGradGuard no_grad;
  auto model = create_backbone(arch);
  model->eval();
  const torch::Tensor image = torch::randn({1, 3, size, size});
  const double model_mb = status_mb("VmRSS");
  model->forward(image);  // warm-up
  std::vector<double> ms, cpu;
  for (int i = 0; i < repetitions(size); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    model->forward(image);
    cpu.push_back(cpu_ms() - c0);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  const auto [rows, cols] = model->token_grid(size, size);
  std::printf("%s %lld %lld %.4f %.3f %.3f %.1f %.1f %zu\n", arch.c_str(),
              static_cast<long long>(size), static_cast<long long>(rows * cols),
              model->flops(size, size) / 1e9, ms[ms.size() / 2], cpu[cpu.size() / 2], model_mb,
              status_mb("VmHWM"), ms.size());
  return 0;
}

Point measure(const std::string& self, const std::string& arch, int64_t size, int threads) {
  int fds[2];
  XDINO_CHECK(pipe(fds) == 0, "pipe failed");
  const pid_t pid = fork();
  XDINO_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    const std::string t = std::to_string(threads), s = std::to_string(size);
    execl(self.c_str(), self.c_str(), "--child", arch.c_str(), s.c_str(), "--threads", t.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  XDINO_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "benchmark child for ", arch, " at ",
              size, " failed");
  Point p;
  std::istringstream is(out);
  is >> p.arch >> p.size >> p.tokens >> p.gflops >> p.median_ms >> p.cpu_ms >> p.model_mb >>
      p.peak_mb >> p.reps;
  return p;
}

// Smallest 1/2/5 x 10^k step with `ticks` steps covering `range`.
double nice_step(double range, int ticks) {
  const double raw = range / ticks, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

// Which of a Point's measurements a panel draws.
using PointValue = double Point::*;

// A line chart of y(tokens) for both models, drawn with OpenCV.
void draw_panel(cv::Mat& img, cv::Rect area, const std::vector<Point>& points, PointValue value,
                const std::string& title, const std::string& unit) {
  const int left = area.x + 70, right = area.x + area.width - 20;
  const int top = area.y + 40, bottom = area.y + area.height - 50;
  double xmax = 0, ymax = 0;
  for (const Point& p : points) {
    xmax = std::max(xmax, static_cast<double>(p.tokens));
    ymax = std::max(ymax, p.*value);
  }
  const double xstep = nice_step(xmax, 5), ystep = nice_step(ymax, 4);
  const int xticks = static_cast<int>(std::ceil(xmax / xstep));
  const int yticks = static_cast<int>(std::ceil(ymax / ystep));
  xmax = xticks * xstep;
  ymax = yticks * ystep;
  const auto px = [&](double x) { return left + static_cast<int>((right - left) * x / xmax); };
  const auto py = [&](double y) { return bottom - static_cast<int>((bottom - top) * y / ymax); };
  const cv::Scalar black(0, 0, 0), grey(200, 200, 200);
  cv::putText(img, title, {left, area.y + 25}, cv::FONT_HERSHEY_SIMPLEX, 0.6, black, 1,
              cv::LINE_AA);
  char label[32];
  for (int i = 0; i <= yticks; ++i) {
    const double y = ystep * i;
    cv::line(img, {left, py(y)}, {right, py(y)}, grey, 1);
    std::snprintf(label, sizeof(label), "%.0f", y);
    cv::putText(img, label, {area.x + 5, py(y) + 5}, cv::FONT_HERSHEY_SIMPLEX, 0.4, black, 1,
                cv::LINE_AA);
  }
  for (int i = 0; i <= xticks; ++i) {
    const double x = xstep * i;
    std::snprintf(label, sizeof(label), "%.0f", x);
    cv::putText(img, label, {px(x) - 12, bottom + 18}, cv::FONT_HERSHEY_SIMPLEX, 0.4, black, 1,
                cv::LINE_AA);
  }
  cv::rectangle(img, {left, top}, {right, bottom}, black, 1);
  cv::putText(img, "patch tokens N", {(left + right) / 2 - 50, bottom + 40},
              cv::FONT_HERSHEY_SIMPLEX, 0.45, black, 1, cv::LINE_AA);
  cv::putText(img, unit, {area.x + 5, top - 8}, cv::FONT_HERSHEY_SIMPLEX, 0.4, black, 1,
              cv::LINE_AA);
  int legend_y = top + 20;
  for (const auto& [arch, name, colour] : series()) {
    std::vector<cv::Point> line;
    for (const Point& p : points)
      if (p.arch == arch) line.emplace_back(px(static_cast<double>(p.tokens)), py(p.*value));
    cv::polylines(img, line, false, colour, 2, cv::LINE_AA);
    for (const cv::Point& q : line) cv::circle(img, q, 4, colour, cv::FILLED, cv::LINE_AA);
    cv::putText(img, name, {left + 10, legend_y}, cv::FONT_HERSHEY_SIMPLEX, 0.5, colour, 1,
                cv::LINE_AA);
    legend_y += 20;
  }
}

int run_parent(const std::string& self, const std::filesystem::path& out_dir,
               const std::vector<int64_t>& sizes, int threads) {
  std::cerr << xdino::blas_summary() << "\n";
  std::vector<Point> points;
  for (int64_t size : sizes)
    for (const Series& model : series()) {
      points.push_back(measure(self, model.arch, size, threads));
      const Point& p = points.back();
      std::cerr << p.arch << " " << p.size << "x" << p.size << ": " << p.median_ms << " ms ("
                << p.cpu_ms << " ms CPU), peak " << p.peak_mb
                << " MiB (model loaded: " << p.model_mb << " MiB)\n";
    }
  std::ostringstream csv;
  csv << "arch,image_size,tokens,gflops,median_ms,median_cpu_ms,reps,rss_model_mib,"
         "peak_rss_mib,peak_minus_model_mib\n";
  for (const Point& p : points)
    csv << p.arch << "," << p.size << "," << p.tokens << "," << p.gflops << "," << p.median_ms
        << "," << p.cpu_ms << "," << p.reps << "," << p.model_mb << "," << p.peak_mb << ","
        << p.peak_mb - p.model_mb << "\n";
  std::filesystem::create_directories(out_dir);
  xdino::write_file_atomically(out_dir / "bench_models.csv", csv.str());
  std::cout << csv.str();
  const size_t n = series().size();
  std::cout << "ratio ViT-S/16 : model (wall time, CPU time, memory added by the forward)\n";
  for (size_t i = 0; i + n <= points.size(); i += n) {
    const Point& vit = points[i + n - 1];
    for (size_t j = 0; j + 1 < n; ++j) {
      const Point& p = points[i + j];
      std::printf("  %lld %s: %.2fx time, %.2fx CPU time, %.2fx memory\n",
                  static_cast<long long>(p.size), p.arch.c_str(), vit.median_ms / p.median_ms,
                  vit.cpu_ms / p.cpu_ms,
                  (vit.peak_mb - vit.model_mb) / std::max(1.0, p.peak_mb - p.model_mb));
    }
  }

  for (Point& p : points) p.peak_mb -= p.model_mb;  // plot the memory the forward adds
  cv::Mat img(420, 1000, CV_8UC3, cv::Scalar(255, 255, 255));
  draw_panel(img, {0, 0, 500, 420}, points, &Point::median_ms,
             "Inference time, batch 1, CPU (" + std::to_string(threads) + " threads)", "ms");
  draw_panel(img, {500, 0, 500, 420}, points, &Point::peak_mb, "Peak memory added by the forward",
             "MiB");
  std::vector<uchar> png;
  cv::imencode(".png", img, png);
  xdino::write_file_atomically(out_dir / "bench_models.png", std::string(png.begin(), png.end()));
  std::cerr << "wrote " << (out_dir / "bench_models.csv").string() << " and "
            << (out_dir / "bench_models.png").string() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::filesystem::path out_dir = "bench_out";
    std::vector<int64_t> sizes = {224, 384, 512, 768};
    int threads = 2;
    std::string child_arch;
    int64_t child_size = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const auto next = [&] {
        XDINO_CHECK_ARG(i + 1 < argc, a, " needs a value");
        return std::string(argv[++i]);
      };
      if (a == "--out") {
        out_dir = next();
      } else if (a == "--threads") {
        threads = std::stoi(next());
      } else if (a == "--sizes") {
        sizes.clear();
        std::stringstream ss(next());
        for (std::string s; std::getline(ss, s, ',');) sizes.push_back(std::stoll(s));
      } else if (a == "--child") {
        child_arch = next();
        child_size = std::stoll(next());
      } else {
        XDINO_FAIL_ARG("unknown argument ", a,
                       " (usage: bench_models [--out DIR] [--sizes 224,384] [--threads N])");
      }
    }
    at::set_num_threads(threads);
    if (!child_arch.empty()) return run_child(child_arch, child_size);
    return run_parent(std::filesystem::canonical("/proc/self/exe").string(), out_dir, sizes,
                      threads);
  } catch (const std::exception& e) {
    std::cerr << "bench_models: error: " << e.what() << "\n";
    return 1;
  }
}
