// k-NN benchmark: our faiss search + vote, and the official algorithm (chunked mm + topk) in
// LibTorch, on clustered random unit features. bench/reference/bench_knn_official.py runs the
// official Python algorithm on the same files for the side-by-side numbers in
// bench/results/knn.md.
//
// usage: bench_knn [--train N] [--test M] [--dim C] [--classes K] [--queries Q]
//                  [--threads T] [--noise S] [--dump DIR] [--skip-torch]
//   --queries Q   time only the first Q test rows (cost is linear in the queries; used to
//                 extrapolate the ImageNet-sized case)
//   --dump DIR    write DIR/train.h5 and DIR/test.h5 for the Python side
#include <ATen/Parallel.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>

#include "eval/features_io.h"
#include "eval/knn.h"

using namespace xdino::eval;

namespace {

// Class means on the sphere plus noise: neighbours mostly share a label, as real features do.
// Noise of norm `noise` around unit class means: a same-class pair has cosine ~1/(1+noise^2)
// against a spread of ~1/sqrt(dim) for unrelated pairs, so k-NN is far from perfect.
void make_split(int64_t n, int64_t dim, int64_t classes, const torch::Tensor& means, double noise,
                torch::Tensor& x, torch::Tensor& y) {
  y = torch::randint(classes, {n}, torch::kInt64);
  x = torch::empty({n, dim});
  for (int64_t start = 0; start < n; start += 65536) {  // blocks: no 2 GB temporaries
    const int64_t rows = std::min<int64_t>(65536, n - start);
    const torch::Tensor block = means.index_select(0, y.narrow(0, start, rows)) +
                                noise * torch::randn({rows, dim}) / std::sqrt(double(dim));
    x.narrow(0, start, rows)
        .copy_(torch::nn::functional::normalize(
            block, torch::nn::functional::NormalizeFuncOptions().dim(1)));
  }
}

// Peak resident memory of this process so far (VmHWM), in GiB.
double peak_rss_gib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);
  return 0;
}

// Wall clock and CPU time of this process (all threads): the machine is shared, so both.
struct Clock {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  std::clock_t cpu = std::clock();
  double wall_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
  }
  double cpu_s() const { return double(std::clock() - cpu) / CLOCKS_PER_SEC; }
};

void print(const char* name, const KnnResult& r, const Clock& c, int64_t queries, int64_t total) {
  const double s = c.wall_s(), cpu = c.cpu_s();
  std::printf("%-28s wall %9.2f s  cpu %9.2f s  for %lld queries", name, s, cpu,
              static_cast<long long>(queries));
  if (queries < total)
    std::printf("  -> wall %.1f s, cpu %.1f s extrapolated to %lld", s * total / queries,
                cpu * total / queries, static_cast<long long>(total));
  std::printf("\n");
  for (const KnnAccuracy& a : r.per_k)
    std::printf("    %lld-NN  top1 %.4f  top5 %.4f\n", static_cast<long long>(a.k), a.top1, a.top5);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 60000, m = 10000, dim = 384, classes = 10, queries = -1, threads = 2;
  double noise = 5.0;
  std::string dump;
  bool skip_torch = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--train")
      n = std::stoll(next());
    else if (a == "--test")
      m = std::stoll(next());
    else if (a == "--dim")
      dim = std::stoll(next());
    else if (a == "--classes")
      classes = std::stoll(next());
    else if (a == "--queries")
      queries = std::stoll(next());
    else if (a == "--threads")
      threads = std::stoll(next());
    else if (a == "--noise")
      noise = std::stod(next());
    else if (a == "--dump")
      dump = next();
    else if (a == "--skip-torch")
      skip_torch = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (queries < 0 || queries > m) queries = m;
  at::set_num_threads(static_cast<int>(threads));
  omp_set_num_threads(static_cast<int>(threads));
  torch::manual_seed(0);
  const torch::Tensor means = torch::nn::functional::normalize(
      torch::randn({classes, dim}), torch::nn::functional::NormalizeFuncOptions().dim(1));
  torch::Tensor xtr, ytr, xte, yte;
  make_split(n, dim, classes, means, noise, xtr, ytr);
  make_split(m, dim, classes, means, noise, xte, yte);
  std::printf("train %lld x %lld, test %lld (timed: %lld), %lld classes, %lld threads\n",
              static_cast<long long>(n), static_cast<long long>(dim), static_cast<long long>(m),
              static_cast<long long>(queries), static_cast<long long>(classes),
              static_cast<long long>(threads));
  if (!dump.empty()) {
    std::filesystem::create_directories(dump);
    write_features(std::filesystem::path(dump) / "train.h5", {xtr, ytr, {}, {}, {}});
    write_features(std::filesystem::path(dump) / "test.h5", {xte, yte, {}, {}, {}});
  }
  const torch::Tensor q = xte.narrow(0, 0, queries), qy = yte.narrow(0, 0, queries);
  std::printf("data: %.2f GiB of features; peak RSS after generating them %.2f GiB\n",
              (xtr.numel() + xte.numel()) * 4.0 / (1 << 30), peak_rss_gib());

  KnnParams p;  // k = 10, 20, 100, 200, T = 0.07
  Clock c0;
  const KnnResult f = knn_classify(xtr, ytr, q, qy, p);
  print("ours: faiss + vote", f, c0, queries, m);
  std::printf("    peak RSS %.2f GiB\n", peak_rss_gib());
  if (!skip_torch) {
    p.backend = KnnBackend::kTorch;
    Clock c1;
    const KnnResult t = knn_classify(xtr, ytr, q, qy, p);
    print("ours: libtorch mm + topk", t, c1, queries, m);
    std::printf("    peak RSS %.2f GiB\n", peak_rss_gib());
  }
  return 0;
}
