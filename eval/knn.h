// Weighted k-NN classification on frozen features (the algorithm of eval_knn.py).
//
// Contract:
//  - Inputs: train features [N, C] and test features [M, C], float32, rows L2-normalised (the
//    caller's job: extract_features() and the feature files give normalised rows); labels
//    int64 [N] / [M], values >= 0. The number of classes is max label + 1 over both sets.
//  - search_neighbours(): exact inner-product search, the top-k train rows per query sorted by
//    similarity descending (ties in any order, as with torch.topk). Queries run in chunks of
//    `query_chunk` rows; a chunk never materialises more than faiss's block of similarities
//    (4096 x 1024 floats on the CPU), so memory stays bounded at ImageNet scale and the result
//    does not depend on the chunk size. Backends: faiss (CPU IndexFlatIP search, or
//    GpuIndexFlatIP when built with XDINO_WITH_FAISS_GPU and the features live on CUDA) and
//    torch (chunked mm + topk, the official algorithm; runs on the features' device).
//  - rank_classes(): the official vote for one query: weights exp(s_j / T) of the k nearest
//    neighbours (no normalisation), class score = sum of its neighbours' weights; returns the
//    `count` best classes by score descending. Equal scores rank the smaller class index first
//    (the official order among ties is implementation-defined); classes without votes follow.
//  - knn_classify(): one search with the largest k serves every k; top-1 = best class equals
//    the label; top-5 = label among the first min(5, k) ranked classes. Accuracies in percent.
//  - Throws xdino::UsageError if a k is < 1 or larger than N, or for empty/mismatched inputs.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace xdino::eval {

enum class KnnBackend { kFaiss, kTorch };

// The k papers quote (DINO's protocol): reported_k() picks it, the online monitor uses it.
constexpr int64_t kReportedK = 20;

// eval_knn.py's defaults live here, once: `dino knn` (knn_eval.h) and the online monitor
// (online_knn.h) take theirs from a default KnnParams.
struct KnnParams {
  std::vector<int64_t> ks = {10, 20, 100, 200};
  double temperature = 0.07;
  int64_t query_chunk = 4096;  // queries per search call; any value gives the same result
  KnnBackend backend = KnnBackend::kFaiss;
};

struct Neighbours {
  torch::Tensor similarities;  // float32 [M, k], descending per row
  torch::Tensor indices;       // int64 [M, k], rows of the train features
};

struct KnnAccuracy {
  int64_t k = 0;
  double top1 = 0.0;  // percent
  double top5 = 0.0;  // percent
};

struct KnnResult {
  std::vector<KnnAccuracy> per_k;  // in the order of KnnParams::ks
  int64_t num_classes = 0;
  int64_t num_train = 0;
  int64_t num_test = 0;
  int64_t feature_dim = 0;
  double seconds = 0.0;  // wall time of search + vote
};

Neighbours search_neighbours(const torch::Tensor& train_features,
                             const torch::Tensor& query_features, int64_t k,
                             int64_t query_chunk = 4096, KnnBackend backend = KnnBackend::kFaiss);

// `scores` is scratch space of num_classes zeros, returned zeroed (reused across queries).
std::vector<int64_t> rank_classes(const float* similarities, const int64_t* neighbour_labels,
                                  int64_t k, double temperature, int64_t num_classes, int64_t count,
                                  std::vector<double>& scores);

KnnResult knn_classify(const torch::Tensor& train_features, const torch::Tensor& train_labels,
                       const torch::Tensor& test_features, const torch::Tensor& test_labels,
                       const KnnParams& params);

// The k whose accuracy papers quote: kReportedK when present, else the k closest to it (the
// smaller one on a tie).
int64_t reported_k(const std::vector<int64_t>& ks);

const char* backend_name(KnnBackend backend);

// Whether this build searches CUDA features with GPU faiss (else the torch backend serves
// them on the GPU).
bool faiss_has_gpu();

}  // namespace xdino::eval
