// Images per second through DINO's multi-crop augmentation: ours (C++/OpenCV) and the official
// torchvision/PIL pipeline (bench_augment_torchvision.py), side by side in one run.
//
//   build/bench/bench_augment [--jpegs DIR] [--images N] [--threads 1 2] [--no-torchvision]
//
// Per image: read the file, decode the JPEG (or take a 28x28 Fashion-MNIST image and make it
// RGB), then 2 global crops of 224 and 8 local crops of 96 written as normalised float tensors
// into per-thread batches of 32. Threads take every N-th image. Without --jpegs, ImageNet-sized
// JPEGs (500x375) are cut from real photos by the Python script into a temporary folder.
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "augment/multicrop.h"
#include "augment/ops/blur.h"
#include "augment/ops/color.h"
#include "augment/ops/crop.h"
#include "augment/ops/random.h"
#include "augment/ops/resize.h"
#include "augment/ops/tensor.h"

namespace fs = std::filesystem;
namespace xa = xdino::augment;

namespace {

constexpr int kBatch = 32;

struct Args {
  std::string jpegs;
  std::string fashion_mnist = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
  std::string script = XDINO_BENCH_REFERENCE_DIR "/bench_augment_torchvision.py";
  int images = 640;
  std::vector<int> threads = {1, 2};
  bool torchvision = true;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<xa::Image> read_fashion_mnist(const std::string& path, int limit) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  unsigned char header[16];
  gzread(f, header, 16);
  std::vector<xa::Image> images;
  for (int i = 0; i < limit; ++i) {
    cv::Mat grey(28, 28, CV_8UC1);
    if (gzread(f, grey.data, 28 * 28) != 28 * 28) break;
    images.push_back(grey);
  }
  gzclose(f);
  return images;
}

// Decodes or converts one input to an RGB Image (counted in the timing).
using Loader = xa::Image (*)(const void* input);

xa::Image load_jpeg(const void* input) {
  const std::string bytes = read_file(*static_cast<const std::string*>(input));
  cv::Mat bgr = cv::imdecode(
      cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())),
      cv::IMREAD_COLOR);
  xa::Image rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

xa::Image load_grey(const void* input) {
  xa::Image rgb;
  cv::cvtColor(*static_cast<const cv::Mat*>(input), rgb, cv::COLOR_GRAY2RGB);
  return rgb;
}

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Rate {
  double wall = 0;  // images per second
  double cpu = 0;   // images per CPU-second of the threads that made them
};

// `threads` threads over `count` images cycling through `inputs`.
template <typename T>
Rate measure(const std::vector<T>& inputs, Loader load, int threads, int count) {
  const xa::MultiCropAugmentation aug;
  std::vector<double> cpu(threads, 0.0);
  auto work = [&](int t, int n) {
    const double cpu0 = thread_cpu_seconds();
    std::vector<torch::Tensor> batch;
    for (int64_t c = 0; c < aug.num_crops(); ++c) {
      const int64_t s = aug.crop_size(c);
      batch.push_back(torch::empty({kBatch, 3, s, s}));
    }
    std::vector<float*> slot(batch.size());
    std::vector<int64_t> stride(batch.size());
    for (size_t c = 0; c < batch.size(); ++c) stride[c] = batch[c].numel() / kBatch;
    for (int i = t, k = 0; i < n; i += threads, k = (k + 1) % kBatch) {
      const xa::Image image = load(&inputs[i % inputs.size()]);
      xa::Rng rng(xa::sample_seed(0, 0, i));
      for (size_t c = 0; c < batch.size(); ++c)
        slot[c] = batch[c].data_ptr<float>() + k * stride[c];
      aug(image, rng, slot.data());
    }
    cpu[t] = thread_cpu_seconds() - cpu0;
  };
  work(0, 2 * threads);  // warm-up: page cache, thread-local buffers, code paths
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t, count);
  for (auto& th : pool) th.join();
  Rate r;
  r.wall = count / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total_cpu = 0;
  for (double c : cpu) total_cpu += c;
  r.cpu = count / total_cpu;
  return r;
}

// {input/workers -> rates} from the Python script's JSON lines.
std::map<std::string, Rate> run_torchvision(const Args& a, const std::string& jpegs) {
  std::string cmd = "/usr/bin/python3 " + a.script + " --jpegs " + jpegs + " --images " +
                    std::to_string(a.images) + " --workers 0";
  for (int t : a.threads) cmd += " " + std::to_string(t);
  std::map<std::string, Rate> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    const std::string s(line);
    auto field = [&](const std::string& key) {
      const size_t at = s.find("\"" + key + "\": ");
      return at == std::string::npos ? std::string() : s.substr(at + key.size() + 4);
    };
    const std::string input = field("input").substr(1, field("input").find('"', 1) - 1);
    const int workers = std::atoi(field("workers").c_str());
    Rate r;
    r.wall = std::atof(field("images_per_s").c_str());
    r.cpu = std::atof(field("images_per_cpu_s").c_str());
    out[input + "/" + std::to_string(workers)] = r;
  }
  pclose(p);
  return out;
}

// CPU microseconds per call of each DINO stage on `image` (8-bit RGB, or a float image of
// `normalization.channels` channels: the float pipeline, augment/ops/float_image.h).
std::vector<std::pair<std::string, double>> stage_times(const xa::Image& image,
                                                        const xa::Normalization& normalization) {
  const cv::Rect global_box(image.cols / 10, image.rows / 10, image.cols * 4 / 5,
                            image.rows * 4 / 5);
  const cv::Rect local_box(image.cols / 4, image.rows / 4, image.cols * 2 / 5, image.rows / 2);
  xa::Image global, local, work;
  xa::resize(image, global_box, cv::Size(224, 224), xa::Interpolation::kBicubic, global);
  const int64_t channels = normalization.channels;
  std::vector<float> tensor(channels * 224 * 224);
  const xa::Normalizer normalize(normalization);
  xa::MultiCropOptions options;
  options.normalization = normalization;
  const xa::MultiCropAugmentation aug(options);
  std::vector<std::vector<float>> crops;
  std::vector<float*> slots;
  for (int64_t c = 0; c < aug.num_crops(); ++c)
    crops.emplace_back(channels * aug.crop_size(c) * aug.crop_size(c));
  for (auto& c : crops) slots.push_back(c.data());
  uint64_t index = 0;
  const auto resize_global = [&] {
    xa::resize(image, global_box, {224, 224}, xa::Interpolation::kBicubic, work);
  };
  const auto resize_local = [&] {
    xa::resize(image, local_box, {96, 96}, xa::Interpolation::kBicubic, local);
  };
  const std::vector<std::pair<std::string, std::function<void()>>> stages = {
      {"resize 80% box -> 224 (bicubic)", resize_global},
      {"resize 20% box -> 96 (bicubic)", resize_local},
      {"hflip 224", [&] { xa::hflip(work = global.clone()); }},
      {"brightness 224", [&] { xa::adjust_brightness(work = global.clone(), 1.2); }},
      {"contrast 224", [&] { xa::adjust_contrast(work = global.clone(), 0.8); }},
      {"saturation 224", [&] { xa::adjust_saturation(work = global.clone(), 1.1); }},
      {"hue 224", [&] { xa::adjust_hue(work = global.clone(), -0.07); }},
      {"grayscale 224", [&] { xa::to_grayscale(work = global.clone()); }},
      {"gaussian blur 224, sigma 1.5", [&] { xa::gaussian_blur(work = global.clone(), 1.5); }},
      {"solarize 224", [&] { xa::solarize(work = global.clone(), 128); }},
      {"copy 224 (included above)", [&] { work = global.clone(); }},
      {"to tensor + normalize 224", [&] { normalize(global, tensor.data()); }},
      {"multi-crop, 10 crops (no decode)",
       [&] {
         xa::Rng rng(xa::sample_seed(0, 0, index++));
         aug(image, rng, slots.data());
       }},
  };
  std::vector<std::pair<std::string, double>> times;
  for (const auto& [name, run] : stages) {
    run();
    const int reps = 100;
    const double start = thread_cpu_seconds();
    for (int r = 0; r < reps; ++r) run();
    times.emplace_back(name, (thread_cpu_seconds() - start) / reps * 1e6);
  }
  return times;
}

// Where the time goes, per stage, on one decoded JPEG: the 8-bit path, and the float pipeline
// on the same pixels / 255 with 3 channels and with a fourth (a near-infrared band, say).
void print_stages(const std::string& jpeg) {
  const xa::Image image = load_jpeg(&jpeg);
  xa::Image rgb_float, four;
  image.convertTo(rgb_float, CV_32FC3, 1.0 / 255);
  std::vector<cv::Mat> planes;
  cv::split(rgb_float, planes);
  planes.push_back(planes[1].clone());
  cv::merge(planes, four);
  double decode_us = 0;
  {
    const double start = thread_cpu_seconds();
    for (int r = 0; r < 100; ++r) load_jpeg(&jpeg);
    decode_us = (thread_cpu_seconds() - start) / 100 * 1e6;
  }
  const auto eight = stage_times(image, xa::Normalization{});
  const auto f3 = stage_times(rgb_float, xa::Normalization{});
  const auto f4 = stage_times(four, xa::normalization_for(4, {0.5}, {0.25}));
  std::printf(
      "\nStages on %s (%dx%d), CPU time per call, us (decode JPEG + BGR->RGB: %.1f):\n\n"
      "| stage | 8-bit RGB | float RGB | ratio | float 4 channels | ratio |\n"
      "|---|---|---|---|---|---|\n",
      fs::path(jpeg).filename().c_str(), image.cols, image.rows, decode_us);
  for (size_t i = 0; i < eight.size(); ++i)
    std::printf("| %s | %.1f | %.1f | %.2fx | %.1f | %.2fx |\n", eight[i].first.c_str(),
                eight[i].second, f3[i].second, f3[i].second / eight[i].second, f4[i].second,
                f4[i].second / eight[i].second);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--jpegs" && i + 1 < argc) {
      a.jpegs = argv[++i];
    } else if (k == "--images" && i + 1 < argc) {
      a.images = std::atoi(argv[++i]);
    } else if (k == "--threads") {
      a.threads.clear();
      while (i + 1 < argc && argv[i + 1][0] != '-') a.threads.push_back(std::atoi(argv[++i]));
    } else if (k == "--no-torchvision") {
      a.torchvision = false;
    } else {
      std::cerr << "usage: bench_augment [--jpegs DIR] [--images N] [--threads N...] "
                   "[--no-torchvision]\n";
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::string jpegs = a.jpegs;
  if (jpegs.empty()) {
    jpegs = (fs::temp_directory_path() / "xdino_bench_jpegs").string();
    const std::string cmd = "/usr/bin/python3 " + a.script + " --make-jpegs " + jpegs;
    if (std::system(cmd.c_str()) != 0) return 1;
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(jpegs))
    if (e.path().extension() == ".jpg") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  const std::vector<xa::Image> greys = read_fashion_mnist(a.fashion_mnist, 1000);
  std::cout << files.size() << " JPEGs in " << jpegs << ", " << greys.size()
            << " Fashion-MNIST images, " << a.images << " images per measurement\n";

  std::map<std::string, Rate> ours;
  for (int t : a.threads) {
    ours["jpeg/" + std::to_string(t)] = measure(files, load_jpeg, t, a.images);
    ours["fashion-mnist/" + std::to_string(t)] = measure(greys, load_grey, t, a.images);
  }
  std::map<std::string, Rate> theirs;
  if (a.torchvision) theirs = run_torchvision(a, jpegs);

  auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
  std::printf(
      "\n| input | ours: threads | torchvision: DataLoader workers | ours img/s | torchvision "
      "img/s | ratio | ours img/CPU-s | torchvision img/CPU-s | ratio |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string input : {"jpeg", "fashion-mnist"}) {
    for (int t : a.threads) {
      const std::string key = input + "/" + std::to_string(t);
      const Rate o = ours[key], tv = theirs.count(key) ? theirs[key] : Rate();
      std::printf("| %s | %d | %d | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx |\n", input.c_str(),
                  t, t, o.wall, tv.wall, ratio(o.wall, tv.wall), o.cpu, tv.cpu,
                  ratio(o.cpu, tv.cpu));
    }
    const std::string key0 = input + "/0";
    if (theirs.count(key0) && ours.count(input + "/1")) {
      const Rate o = ours[input + "/1"], tv = theirs[key0];
      std::printf("| %s | 1 | 0 (in-process loop) | %.1f | %.1f | %.2fx | %.1f | %.1f | %.2fx |\n",
                  input.c_str(), o.wall, tv.wall, ratio(o.wall, tv.wall), o.cpu, tv.cpu,
                  ratio(o.cpu, tv.cpu));
    }
  }
  if (!files.empty()) print_stages(files[files.size() > 1 ? 1 : 0]);
  return 0;
}
