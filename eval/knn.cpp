#include "eval/knn.h"

#include <ATen/Parallel.h>
#include <faiss/utils/distances.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

#include "core/check.h"
#include "core/log.h"
#include "core/progress.h"

#ifdef XDINO_WITH_FAISS_GPU
#include <faiss/gpu/GpuIndexFlat.h>
#include <faiss/gpu/StandardGpuResources.h>
#endif

namespace xdino::eval {
namespace {

// Elements of one similarity block of the torch backend (512 MiB of float32).
constexpr int64_t kTorchBlockElements = int64_t{1} << 27;

void check_features(const torch::Tensor& t, const char* what) {
  XDINO_CHECK_ARG(t.defined() && t.dim() == 2 && t.size(0) > 0, what,
                  " features must be a non-empty [N, C] matrix");
  XDINO_CHECK_ARG(t.scalar_type() == torch::kFloat32, what, " features must be float32, got ",
                  t.scalar_type());
}

void warn_if_not_normalised(const torch::Tensor& f, const char* what) {
  const torch::Tensor sample = f.narrow(0, 0, std::min<int64_t>(f.size(0), 1000));
  const double worst = (sample.norm(2, 1) - 1.0).abs().max().item<double>();
  if (worst > 1e-3)
    log::warn("k-NN: ", what, " features are not L2-normalised (a row norm is off by ", worst,
              "); similarities are then not cosine similarities");
}

Neighbours search_torch(const torch::Tensor& train, const torch::Tensor& queries, int64_t k) {
  const int64_t m = queries.size(0);
  const int64_t rows = std::max<int64_t>(1, kTorchBlockElements / train.size(0));
  std::vector<torch::Tensor> sims, idx;
  const torch::Tensor train_t = train.t();
  for (int64_t start = 0; start < m; start += rows) {
    const torch::Tensor block =
        torch::mm(queries.narrow(0, start, std::min(rows, m - start)), train_t);
    auto [s, i] = block.topk(k, /*dim=*/1, /*largest=*/true, /*sorted=*/true);
    sims.push_back(s);
    idx.push_back(i);
  }
  return {torch::cat(sims).to(torch::kCPU), torch::cat(idx).to(torch::kCPU)};
}

Neighbours search_faiss_cpu(const torch::Tensor& train, const torch::Tensor& queries, int64_t k) {
  // The exact kernel IndexFlatIP::search runs, called on the caller's memory so the train
  // matrix (2 GB at ImageNet scale) is not copied into an index.
  const torch::Tensor x = queries.to(torch::kCPU).contiguous();
  const torch::Tensor y = train.to(torch::kCPU).contiguous();
  Neighbours out{torch::empty({x.size(0), k}, torch::kFloat32),
                 torch::empty({x.size(0), k}, torch::kInt64)};
  faiss::knn_inner_product(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1), x.size(0),
                           y.size(0), k, out.similarities.data_ptr<float>(),
                           out.indices.data_ptr<int64_t>());
  return out;
}

#ifdef XDINO_WITH_FAISS_GPU
Neighbours search_faiss_gpu(const torch::Tensor& train, const torch::Tensor& queries, int64_t k) {
  XDINO_CHECK(k <= 2048, "GPU faiss supports k <= 2048, got k = ", k,
              ": lower --nb_knn or keep the features on the CPU");
  faiss::gpu::StandardGpuResources resources;
  faiss::gpu::GpuIndexFlatConfig config;
  config.device = train.device().index() < 0 ? 0 : train.device().index();
  faiss::gpu::GpuIndexFlatIP index(&resources, static_cast<int>(train.size(1)), config);
  const torch::Tensor y = train.contiguous();
  index.add(y.size(0), y.data_ptr<float>());
  const torch::Tensor x = queries.to(train.device()).contiguous();
  auto sims = torch::empty({x.size(0), k}, x.options());
  auto idx = torch::empty({x.size(0), k}, x.options().dtype(torch::kInt64));
  index.search(x.size(0), x.data_ptr<float>(), k, sims.data_ptr<float>(),
               reinterpret_cast<faiss::Index::idx_t*>(idx.data_ptr<int64_t>()));
  return {sims.to(torch::kCPU), idx.to(torch::kCPU)};
}
#endif

Neighbours search_chunk(const torch::Tensor& train, const torch::Tensor& queries, int64_t k,
                        KnnBackend backend) {
  if (backend == KnnBackend::kTorch) return search_torch(train, queries.to(train.device()), k);
#ifdef XDINO_WITH_FAISS_GPU
  if (train.is_cuda()) return search_faiss_gpu(train, queries, k);
#endif
  return search_faiss_cpu(train, queries, k);
}

}  // namespace

bool faiss_has_gpu() {
#ifdef XDINO_WITH_FAISS_GPU
  return true;
#else
  return false;
#endif
}

const char* backend_name(KnnBackend backend) {
  return backend == KnnBackend::kTorch ? "torch (mm + topk)" : "faiss (exact inner product)";
}

Neighbours search_neighbours(const torch::Tensor& train_features,
                             const torch::Tensor& query_features, int64_t k, int64_t query_chunk,
                             KnnBackend backend) {
  check_features(train_features, "train");
  check_features(query_features, "query");
  XDINO_CHECK_ARG(train_features.size(1) == query_features.size(1),
                  "train and query features differ in width: ", train_features.size(1), " vs ",
                  query_features.size(1));
  XDINO_CHECK_ARG(k >= 1 && k <= train_features.size(0), "k = ", k,
                  " neighbours requested but there are ", train_features.size(0),
                  " train samples (lower --nb_knn)");
  XDINO_CHECK_ARG(query_chunk >= 1, "query chunk must be >= 1, got ", query_chunk);
  const int64_t m = query_features.size(0);
  std::vector<torch::Tensor> sims, idx;
  for (int64_t start = 0; start < m; start += query_chunk) {
    const torch::Tensor q = query_features.narrow(0, start, std::min(query_chunk, m - start));
    Neighbours part = search_chunk(train_features, q, k, backend);
    sims.push_back(part.similarities);
    idx.push_back(part.indices);
  }
  return {torch::cat(sims), torch::cat(idx)};
}

std::vector<int64_t> rank_classes(const float* similarities, const int64_t* neighbour_labels,
                                  int64_t k, double temperature, int64_t num_classes, int64_t count,
                                  std::vector<double>& scores) {
  // A negative score marks a class without votes: exp() may underflow to 0 for a real vote.
  if (static_cast<int64_t>(scores.size()) != num_classes) scores.assign(num_classes, -1.0);
  std::vector<int64_t> touched;
  touched.reserve(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const int64_t c = neighbour_labels[j];
    if (scores[c] < 0) {
      scores[c] = 0.0;
      touched.push_back(c);
    }
    scores[c] += std::exp(static_cast<double>(similarities[j]) / temperature);
  }
  const auto better = [&](int64_t a, int64_t b) {
    return scores[a] != scores[b] ? scores[a] > scores[b] : a < b;
  };
  const auto take = std::min<int64_t>(count, static_cast<int64_t>(touched.size()));
  std::partial_sort(touched.begin(), touched.begin() + take, touched.end(), better);
  std::vector<int64_t> ranked(touched.begin(), touched.begin() + take);
  for (int64_t c = 0; c < num_classes && static_cast<int64_t>(ranked.size()) < count; ++c)
    if (scores[c] < 0) ranked.push_back(c);
  for (const int64_t c : touched) scores[c] = -1.0;
  return ranked;
}

int64_t reported_k(const std::vector<int64_t>& ks) {
  XDINO_CHECK_ARG(!ks.empty(), "no k given for the k-NN classifier (--nb_knn)");
  int64_t best = ks.front();
  for (const int64_t k : ks) {
    const int64_t d = std::abs(k - kReportedK), db = std::abs(best - kReportedK);
    if (d < db || (d == db && k < best)) best = k;
  }
  return best;
}

KnnResult knn_classify(const torch::Tensor& train_features, const torch::Tensor& train_labels,
                       const torch::Tensor& test_features, const torch::Tensor& test_labels,
                       const KnnParams& params) {
  const auto begin = std::chrono::steady_clock::now();
  check_features(train_features, "train");
  check_features(test_features, "test");
  XDINO_CHECK_ARG(train_labels.dim() == 1 && train_labels.size(0) == train_features.size(0),
                  "train labels must have one entry per train feature row");
  XDINO_CHECK_ARG(test_labels.dim() == 1 && test_labels.size(0) == test_features.size(0),
                  "test labels must have one entry per test feature row");
  XDINO_CHECK_ARG(train_features.size(1) == test_features.size(1),
                  "train and test features differ in width: ", train_features.size(1), " vs ",
                  test_features.size(1));
  XDINO_CHECK_ARG(!params.ks.empty(), "no k given for the k-NN classifier (--nb_knn)");
  XDINO_CHECK_ARG(params.temperature > 0, "the k-NN temperature must be > 0, got ",
                  params.temperature);
  for (const int64_t k : params.ks)
    XDINO_CHECK_ARG(k >= 1 && k <= train_features.size(0), "k = ", k,
                    " neighbours requested but there are ", train_features.size(0),
                    " train samples (lower --nb_knn)");
  const torch::Tensor ytrain = train_labels.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor ytest = test_labels.to(torch::kCPU, torch::kInt64).contiguous();
  XDINO_CHECK_ARG(ytrain.min().item<int64_t>() >= 0 && ytest.min().item<int64_t>() >= 0,
                  "k-NN needs labelled data: found a negative (missing) label");
  warn_if_not_normalised(train_features, "train");
  warn_if_not_normalised(test_features, "test");

  KnnResult result;
  result.num_train = train_features.size(0);
  result.num_test = test_features.size(0);
  result.feature_dim = train_features.size(1);
  result.num_classes = std::max(ytrain.max().item<int64_t>(), ytest.max().item<int64_t>()) + 1;
  const int64_t kmax = *std::max_element(params.ks.begin(), params.ks.end());
  const size_t nk = params.ks.size();
  std::vector<std::atomic<int64_t>> top1(nk), top5(nk);
  const int64_t* train_y = ytrain.data_ptr<int64_t>();
  const int64_t* test_y = ytest.data_ptr<int64_t>();

  const int64_t m = result.num_test;
  const int64_t chunk = std::max<int64_t>(1, params.query_chunk);
  Progress progress("k-NN", m);
  for (int64_t start = 0; start < m; start += chunk) {
    const int64_t rows = std::min(chunk, m - start);
    const Neighbours nb =
        search_chunk(train_features, test_features.narrow(0, start, rows), kmax, params.backend);
    const float* sims = nb.similarities.data_ptr<float>();
    const int64_t* idx = nb.indices.data_ptr<int64_t>();
    at::parallel_for(0, rows, 64, [&](int64_t lo, int64_t hi) {
      std::vector<double> scores;
      std::vector<int64_t> labels(static_cast<size_t>(kmax));
      std::vector<int64_t> c1(nk, 0), c5(nk, 0);
      for (int64_t q = lo; q < hi; ++q) {
        for (int64_t j = 0; j < kmax; ++j) labels[j] = train_y[idx[q * kmax + j]];
        const int64_t target = test_y[start + q];
        for (size_t i = 0; i < nk; ++i) {
          const int64_t k = params.ks[i];
          const auto ranked = rank_classes(sims + q * kmax, labels.data(), k, params.temperature,
                                           result.num_classes, std::min<int64_t>(5, k), scores);
          c1[i] += ranked[0] == target;
          c5[i] += std::find(ranked.begin(), ranked.end(), target) != ranked.end();
        }
      }
      for (size_t i = 0; i < nk; ++i) {
        top1[i] += c1[i];
        top5[i] += c5[i];
      }
    });
    progress.step(rows);
  }
  progress.finish();
  for (size_t i = 0; i < nk; ++i)
    result.per_k.push_back({params.ks[i], 100.0 * static_cast<double>(top1[i]) / m,
                            100.0 * static_cast<double>(top5[i]) / m});
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return result;
}

}  // namespace xdino::eval
