// Loader throughput against calling the same per-image work directly, side by side.
//
//   build/bench/bench_loader [images=256] [batch=32]   (best of 3 runs per line)
//
// Writes JPEGs of ImageNet's typical size (500x375) into a temporary ImageFolder, then times
//   direct:   for each image: read + decode, then the transform, on the calling thread;
//   loader:   DataLoader with 1, 2, ... worker threads (up to the core count), one epoch,
//             consumer taking batches as fast as they come;
// for DINO's multi-crop (MultiCropAugmentation: 2 x 224 + 8 x 96, written into the batch in
// place) and the eval transform (resize 256, centre crop 224), the latter also as a returning
// transform (a tensor per sample, collated by copy). Wall-clock rates depend on what else
// runs on the machine; images per CPU-second of the whole process (workers and consumer) do
// not, and their ratio loader / direct is the loader's efficiency: 1.0 means it adds nothing.
#include <time.h>
#include <unistd.h>  // getpid

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>
#include <tuple>

#include "augment/data/image_folder.h"
#include "augment/data/loader.h"
#include "augment/sample_transforms.h"
#include "core/atomic_file.h"

namespace fs = std::filesystem;
using namespace xdino::augment;
using Clock = std::chrono::steady_clock;

namespace {

fs::path make_images(int count) {
  const fs::path root =
      fs::temp_directory_path() / ("xdino_bench_loader_" + std::to_string(::getpid()));
  fs::remove_all(root);
  cv::RNG rng(1);
  for (int i = 0; i < count; ++i) {
    const fs::path dir = root / (i % 2 ? "b" : "a");
    fs::create_directories(dir);
    cv::Mat noise(375, 500, CV_8UC3), image;
    rng.fill(noise, cv::RNG::UNIFORM, 0, 256);
    cv::GaussianBlur(noise, image, cv::Size(0, 0), 3.0);
    cv::addWeighted(image, 0.7, noise, 0.3, 0, image);  // detail, so JPEG sizes are realistic
    std::vector<uchar> jpeg;
    cv::imencode(".jpg", image, jpeg, {cv::IMWRITE_JPEG_QUALITY, 90});
    xdino::write_file_atomically(dir / (std::to_string(i) + ".jpg"),
                                 std::string(jpeg.begin(), jpeg.end()));
  }
  return root;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of every thread of this process: unlike wall time, others' load does not inflate it.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Rate {
  double wall = 0;  // images per second
  double cpu = 0;   // images per CPU-second
  double wait = 0;  // share of the time the consumer waited
  void keep_best(const Rate& r) {
    if (r.wall > wall) std::tie(wall, wait) = std::tie(r.wall, r.wait);
    cpu = std::max(cpu, r.cpu);
  }
};

// Decode + transform on this thread.
Rate direct_rate(const Dataset& data, const SampleTransform& t) {
  std::vector<torch::Tensor> out;
  for (const auto& s : t.shapes()) out.push_back(torch::empty(s));
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  for (int64_t i = 0; i < data.size(); ++i) {
    Rng rng(sample_seed(0, 0, static_cast<uint64_t>(i)));
    const Image image = data.load(i);
    if (t.writes_in_place())
      t.write(image, rng, out);
    else
      t(image, rng);
  }
  const double n = static_cast<double>(data.size());
  return {n / seconds_since(t0), n / (cpu_seconds() - c0), 0};
}

Rate loader_rate(const DatasetPtr& data, const SampleTransform& t, int64_t workers, int64_t batch) {
  LoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  DataLoader loader(data, t, o);
  loader.start_epoch(0);  // warm-up: threads started, allocator primed
  while (loader.next()) {
  }
  const xdino::augment::LoaderStats before = loader.stats();
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  loader.start_epoch(1);
  int64_t images = 0;
  while (std::optional<Batch> b = loader.next()) images += b->size();
  const double elapsed = seconds_since(t0), cpu = cpu_seconds() - c0;
  const double waited = loader.stats().wait_seconds - before.wait_seconds;
  return {static_cast<double>(images) / elapsed, static_cast<double>(images) / cpu,
          waited / elapsed};
}

}  // namespace

int main(int argc, char** argv) {
  // OpenCV's own threads (TBB) would make "direct" use every core: one thread per worker only.
  cv::setNumThreads(1);
  const int count = argc > 1 ? std::atoi(argv[1]) : 256;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 32;
  const fs::path root = make_images(count);
  const DatasetPtr data =
      std::make_shared<ImageFolderDataset>(root.string(), FolderLayout::kClasses);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%d JPEGs 500x375 (%.0f KB each on average), batch %lld, %d cores\n", count,
              static_cast<double>([&] {
                int64_t bytes = 0;
                for (const auto& e : fs::recursive_directory_iterator(root))
                  if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
                return bytes;
              }()) /
                  count / 1024.0,
              static_cast<long long>(batch), cores);
  const auto eval = std::make_shared<const EvalTransform>();
  const SampleTransform eval_returning = [eval](const Image& image, Rng&) {
    return std::vector<torch::Tensor>{(*eval)(image)};
  };
  const std::vector<std::pair<std::string, SampleTransform>> transforms = {
      {"multi-crop (writing)", multi_crop_transform({})},
      {"eval (writing)", eval_transform({})},
      {"eval (returning)", eval_returning}};
  std::printf("%-22s %-10s %9s %11s %12s %9s\n", "transform", "how", "img/s", "img/CPU-s",
              "CPU ratio", "waiting");
  for (const auto& [name, t] : transforms) {
    // Best of 3 for everything: other processes on the machine only ever slow a run down.
    Rate direct;
    for (int r = 0; r < 3; ++r) direct.keep_best(direct_rate(*data, t));
    std::printf("%-22s %-10s %9.1f %11.1f %12s %9s\n", name.c_str(), "direct", direct.wall,
                direct.cpu, "1", "");
    for (int w = 1; w <= cores; ++w) {
      Rate rate;
      for (int r = 0; r < 3; ++r) rate.keep_best(loader_rate(data, t, w, batch));
      const std::string how = "loader " + std::to_string(w) + "w";
      std::printf("%-22s %-10s %9.1f %11.1f %12.3f %8.0f%%\n", name.c_str(), how.c_str(), rate.wall,
                  rate.cpu, rate.cpu / direct.cpu, 100 * rate.wait);
    }
  }
  fs::remove_all(root);
  return 0;
}
