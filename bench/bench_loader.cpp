// Loader throughput against calling the same per-image work directly, side by side.
//
//   build/bench/bench_loader [images=256] [batch=32]   (best of 3 runs per line)
//
// Writes JPEGs of ImageNet's typical size (500x375) into a temporary ImageFolder, then times
//   direct:   for each image: read + decode, then the transform, on the calling thread;
//   loader:   DataLoader with 1, 2, ... worker threads (up to the core count), one epoch,
//             consumer taking batches as fast as they come;
// for a multi-crop shaped like DINO's (2 x 224 + 8 x 96 random resized crops with OpenCV's
// bicubic resize and a flip, normalised, written into the batch in place: a stand-in of the
// same cost class as the PIL-exact MultiCropAugmentation) and an eval-shaped transform
// (resize the short side to 256, centre crop 224), both returning and writing. The ratio
// loader / (workers x direct) is the loader's efficiency: 1.0 means it adds nothing.
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <tuple>

#include "augment/image_folder.h"
#include "augment/loader.h"
#include "core/atomic_file.h"

namespace fs = std::filesystem;
using namespace xdino::augment;
using Clock = std::chrono::steady_clock;

namespace {

fs::path make_images(int count) {
  const fs::path root = fs::temp_directory_path() / ("xdino_bench_loader_" + std::to_string(::getpid()));
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

// Random resized crop of `size` (scale range, ratio 3/4..4/3), maybe flipped, normalised.
void crop_into(const Image& image, Rng& rng, double lo, double hi, int size, float* out) {
  const double area = image.rows * image.cols * rng.uniform(lo, hi);
  const double ratio = std::exp(rng.uniform(std::log(3.0 / 4), std::log(4.0 / 3)));
  const int w = std::clamp(static_cast<int>(std::sqrt(area * ratio)), 1, image.cols);
  const int h = std::clamp(static_cast<int>(std::sqrt(area / ratio)), 1, image.rows);
  const cv::Rect box(static_cast<int>(rng.randint(0, image.cols - w)),
                     static_cast<int>(rng.randint(0, image.rows - h)), w, h);
  cv::Mat crop;
  cv::resize(image(box), crop, cv::Size(size, size), 0, 0, cv::INTER_CUBIC);
  if (rng.uniform() < 0.5) cv::flip(crop, crop, 1);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < size; ++r) {
      const uint8_t* row = crop.ptr<uint8_t>(r);
      for (int q = 0; q < size; ++q)
        out[(c * size + r) * size + q] = (row[q * 3 + c] / 255.0f - mean[c]) / std[c];
    }
}

SampleTransform multi_crop_standin() {
  std::vector<std::vector<int64_t>> shapes;
  for (int k = 0; k < 10; ++k) shapes.push_back({3, k < 2 ? 224 : 96, k < 2 ? 224 : 96});
  return SampleTransform(shapes, [](const Image& image, Rng& rng,
                                    const std::vector<torch::Tensor>& out) {
    for (size_t k = 0; k < out.size(); ++k)
      crop_into(image, rng, k < 2 ? 0.4 : 0.05, k < 2 ? 1.0 : 0.4, k < 2 ? 224 : 96,
                out[k].data_ptr<float>());
  });
}

void eval_into(const Image& image, float* out) {
  const double s = 256.0 / std::min(image.rows, image.cols);
  cv::Mat resized;
  cv::resize(image, resized, cv::Size(static_cast<int>(image.cols * s), static_cast<int>(image.rows * s)),
             0, 0, cv::INTER_CUBIC);
  const cv::Mat crop = resized(cv::Rect((resized.cols - 224) / 2, (resized.rows - 224) / 2, 224, 224));
  for (int c = 0; c < 3; ++c)
    for (int r = 0; r < 224; ++r)
      for (int q = 0; q < 224; ++q) out[(c * 224 + r) * 224 + q] = crop.ptr<uint8_t>(r)[q * 3 + c] / 255.0f;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Images per second of decode + transform on this thread.
double direct_rate(const Dataset& data, const SampleTransform& t) {
  std::vector<torch::Tensor> out;
  for (const auto& s : t.shapes()) out.push_back(torch::empty(s));
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < data.size(); ++i) {
    Rng rng(sample_seed(0, 0, static_cast<uint64_t>(i)));
    const Image image = data.load(i);
    if (t.writes_in_place())
      t.write(image, rng, out);
    else
      t(image, rng);
  }
  return static_cast<double>(data.size()) / seconds_since(t0);
}

double loader_rate(const DatasetPtr& data, const SampleTransform& t, int64_t workers,
                   int64_t batch, double* wait_share) {
  LoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  DataLoader loader(data, t, o);
  loader.start_epoch(0);  // warm-up: threads started, allocator primed
  while (loader.next()) {
  }
  const xdino::augment::LoaderStats before = loader.stats();
  const auto t0 = Clock::now();
  loader.start_epoch(1);
  int64_t images = 0;
  while (std::optional<Batch> b = loader.next()) images += b->size();
  const double elapsed = seconds_since(t0);
  *wait_share = (loader.stats().wait_seconds - before.wait_seconds) / elapsed;
  return static_cast<double>(images) / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenCV's own threads (TBB) would make "direct" use every core: one thread per worker only.
  cv::setNumThreads(1);
  const int count = argc > 1 ? std::atoi(argv[1]) : 256;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 32;
  const fs::path root = make_images(count);
  const DatasetPtr data = std::make_shared<ImageFolderDataset>(root.string(), FolderLayout::kClasses);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%d JPEGs 500x375 (%.0f KB each on average), batch %lld, %d cores\n", count,
              static_cast<double>([&] {
                int64_t bytes = 0;
                for (const auto& e : fs::recursive_directory_iterator(root))
                  if (e.is_regular_file()) bytes += static_cast<int64_t>(e.file_size());
                return bytes;
              }()) / count / 1024.0,
              static_cast<long long>(batch), cores);
  const SampleTransform eval_writing({{3, 224, 224}}, [](const Image& image, Rng&,
                                                         const std::vector<torch::Tensor>& out) {
    eval_into(image, out[0].data_ptr<float>());
  });
  const SampleTransform eval_returning = [](const Image& image, Rng&) {
    torch::Tensor t = torch::empty({3, 224, 224});
    eval_into(image, t.data_ptr<float>());
    return std::vector<torch::Tensor>{t};
  };
  const std::vector<std::pair<std::string, SampleTransform>> transforms = {
      {"multi-crop (writing)", multi_crop_standin()},
      {"eval (writing)", eval_writing},
      {"eval (returning)", eval_returning}};
  for (const auto& [name, t] : transforms) {
    // Best of 3 for everything: other processes on the machine only ever slow a run down.
    double direct = 0;
    for (int r = 0; r < 3; ++r) direct = std::max(direct, direct_rate(*data, t));
    std::printf("%-22s direct (1 thread): %7.1f img/s\n", name.c_str(), direct);
    for (int w = 1; w <= cores; ++w) {
      double wait = 0, rate = 0;
      for (int r = 0; r < 3; ++r) {
        double wait_r = 0;
        const double rate_r = loader_rate(data, t, w, batch, &wait_r);
        if (rate_r > rate) std::tie(rate, wait) = std::tie(rate_r, wait_r);
      }
      std::printf("%-22s loader %d worker%s: %7.1f img/s  = %.2f x %d x direct  "
                  "(consumer waiting %.0f%% of the time)\n",
                  name.c_str(), w, w > 1 ? "s" : " ", rate, rate / (w * direct), w, 100 * wait);
    }
  }
  fs::remove_all(root);
  return 0;
}
