// The data loader: worker threads decode and transform samples into batches, ahead of the
// consumer; the equivalent of torch DataLoader(dataset, sampler=DistributedSampler, ...).
// Hand-written on purpose: torch::data has no per-sample RNG (augmentations reproducible
// whatever the thread count), no resume in the middle of an epoch and no replacement of a
// corrupt file by another sample (docs/architecture.md).
//
// Contract:
//  - The SampleTransform (sample_transform.h) maps one decoded image to its views: 10 for
//    DINO's multi-crop, 1 for the eval transform. It runs concurrently on the worker threads
//    and draws all its randomness from the Rng it is given. A writing transform fills slots
//    of the batch tensors directly; a returning one is collated (copied) into them.
//  - Per epoch, this rank's samples are DistributedSampler(n, rank, world, shuffle, seed)
//    .indices(epoch), cut into batches of batch_size in that order (the last, short one
//    dropped with drop_last). Sample i of epoch e is transformed with
//    Rng(sample_seed(seed, e, i)), so batches do not depend on the number of threads or
//    their scheduling, and start_epoch(e, k) reproduces batches k, k+1, ... of epoch e exactly.
//  - Batch::views[v] is (B, ...) = view v of every sample stacked (the official collate of a
//    list of views); labels and indices are (B) int64. Batches are in page-locked memory when
//    pin_memory and CUDA is available, so .to(cuda, non_blocking=true) overlaps.
//  - At most prefetch_batches batches are being built or waiting at any time. Unpinned batch
//    memory is reused once the consumer has dropped every reference to a batch (its
//    tensors and any slice of them); a batch still referenced is never overwritten.
//  - A sample whose load() throws xdino::Error (corrupt, truncated, unreadable) is reported
//    once by log::warn with the reason and path, remembered, counted in stats(), and replaced
//    by the next readable sample in dataset order (index + 1, + 2, ... wrapping), transformed
//    with the replaced sample's Rng; Batch::indices holds the index actually loaded. The run
//    stops (xdino::Error) only when more than max(10, max_corrupt_fraction * n) distinct
//    files are unreadable, which means the data path, not a file, is broken.
//  - Any other failure in a worker (the transform throwing, views of different shapes)
//    surfaces in the consumer: next() throws xdino::Error (c10 and std exceptions are
//    wrapped, keeping their message).
//  - Worker threads run ATen ops with one intra-op thread, as torch DataLoader workers do.
//  - Destruction stops and joins the workers; it may happen mid-epoch.
//  - One consumer thread: start_epoch(), next() and stats() are not meant to race each other.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <vector>

#include "augment/data/dataset.h"
#include "augment/data/sample_transform.h"
#include "augment/data/sampler.h"
#include "augment/ops/random.h"

namespace xdino::augment {

struct LoaderOptions {
  int64_t batch_size = 64;
  int64_t num_workers = 0;  // threads; 0: std::thread::hardware_concurrency()
  int64_t prefetch_batches = 2;
  bool shuffle = true;
  bool drop_last = true;
  int64_t seed = 0;
  bool pin_memory = true;
  double max_corrupt_fraction = 0.01;
};

struct Batch {
  std::vector<torch::Tensor> views;  // views[v]: (B, ...) as the transform's view v
  torch::Tensor labels;              // (B) int64, -1 for unlabeled data
  torch::Tensor indices;             // (B) int64 dataset indices
  int64_t epoch = 0;
  int64_t position = 0;  // batch number within the epoch, 0-based
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

struct LoaderStats {
  int64_t batches = 0;  // delivered by next() since construction
  int64_t samples = 0;
  int64_t corrupt_files = 0;  // distinct unreadable samples found
  int64_t replaced = 0;       // samples replaced because theirs was unreadable
  double wait_seconds = 0;    // consumer time blocked in next(): the loader's cost to training
};

class DataLoader {
 public:
  DataLoader(DatasetPtr dataset, SampleTransform transform, LoaderOptions options = {},
             int rank = 0, int world_size = 1);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Batches per epoch on this rank (main_dino.py's niter with drop_last).
  int64_t batches_per_epoch() const { return batches_; }
  // Samples per epoch on this rank before batching (the sampler's num_samples).
  int64_t samples_per_epoch() const { return sampler_.num_samples(); }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  const Dataset& dataset() const { return *dataset_; }

  // Abandons any epoch in progress and starts `epoch` at batch `start_batch`.
  void start_epoch(int64_t epoch, int64_t start_batch = 0);
  // The next batch of the epoch, or nullopt when the epoch is over.
  std::optional<Batch> next();
  LoaderStats stats() const;

 private:
  struct Pending {
    std::vector<torch::Tensor> batch_views;                // writing transforms
    std::vector<std::vector<torch::Tensor>> sample_views;  // returning transforms
    std::vector<int64_t> labels, indices;
    int64_t remaining = 0;
  };
  struct Sample {
    std::vector<torch::Tensor> views;
    int64_t label = -1;
    int64_t index = -1;
  };

  void worker_loop();
  bool can_claim() const;
  int64_t batch_length(int64_t batch) const;
  void start_batch(int64_t batch);
  Sample produce(int64_t index, int64_t epoch, const std::vector<torch::Tensor>* slots);
  Image load_readable(int64_t index, int64_t* loaded);
  Batch finish(int64_t epoch, int64_t position, Pending& pending);
  // Batch tensors of these sizes: a pooled set the consumer has released, or new ones.
  // Requires mutex_.
  std::vector<torch::Tensor> take_buffers(const std::vector<std::vector<int64_t>>& sizes,
                                          const std::vector<torch::ScalarType>& dtypes);

  DatasetPtr dataset_;
  SampleTransform transform_;
  LoaderOptions options_;
  DistributedSampler sampler_;
  int64_t batches_;
  bool pin_;

  mutable std::mutex mutex_;
  std::condition_variable work_cv_, ready_cv_;
  bool stop_ = false;
  bool started_ = false;
  uint64_t generation_ = 0;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
  int64_t end_ = 0;         // sample positions in this epoch
  int64_t next_claim_ = 0;  // next sample position a worker takes
  int64_t next_batch_ = 0;  // next batch next() returns
  std::map<int64_t, Pending> pending_;
  std::map<int64_t, Batch> ready_;
  std::exception_ptr error_;
  LoaderStats stats_;
  // Unpinned batch buffers for reuse once released: fresh memory costs page faults, ~10-30%
  // of the multi-crop's CPU time (bench/results/augment_and_loader.md).
  std::vector<std::vector<torch::Tensor>> pool_;

  mutable std::mutex bad_mutex_;
  std::unordered_set<int64_t> bad_;
  std::atomic<int64_t> replaced_{0};

  std::vector<std::thread> workers_;
};

}  // namespace xdino::augment
