#include "augment/data/loader.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <chrono>
#include <cstring>

#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"

namespace xdino::augment {

namespace {

// torch DataLoader workers call torch.set_num_threads(1). A global set_num_threads would
// slow the training thread too; OpenMP's thread count is per thread, so set it here only,
// after ATen's lazy per-thread initialisation (which would otherwise overwrite it).
void serial_intra_op_in_this_thread() {
  (void)at::get_num_threads();
  using SetThreads = void (*)(int);
  static const auto set_threads =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set_threads != nullptr) set_threads(1);
}

// xdino errors keep their type (a UsageError from a transform still exits 2); others become
// xdino::Error with their first line and the sample they failed on.
std::exception_ptr as_error(std::exception_ptr e, const std::string& context) {
  auto wrap = [&](const std::string& what) {
    return std::make_exception_ptr(
        Error("data loader worker (" + context + "): " + what.substr(0, what.find('\n'))));
  };
  try {
    std::rethrow_exception(e);
  } catch (const Error&) {
    return e;
  } catch (const c10::Error& c) {
    return wrap(c.what_without_backtrace());
  } catch (const std::exception& s) {
    return wrap(s.what());
  } catch (...) {
    return wrap("unknown exception");
  }
}

}  // namespace

DataLoader::DataLoader(DatasetPtr dataset, SampleTransform transform, LoaderOptions options,
                       int rank, int world_size)
    : dataset_(std::move(dataset)),
      transform_(std::move(transform)),
      options_(options),
      sampler_(dataset_->size(), rank, world_size, options.shuffle, options.seed),
      batches_(augment::batches_per_epoch(dataset_->size(), world_size, options.batch_size,
                                          options.drop_last)),
      pin_(options.pin_memory && compat::cuda_available()) {
  XDINO_CHECK_ARG(options.batch_size >= 1, "batch size must be at least 1, got ",
                  options.batch_size);
  XDINO_CHECK_ARG(options.prefetch_batches >= 1, "prefetch_batches must be at least 1, got ",
                  options.prefetch_batches);
  XDINO_CHECK(static_cast<bool>(transform_), "the data loader needs a sample transform");
  XDINO_CHECK(!transform_.writes_in_place() || !transform_.shapes().empty(),
              "a writing sample transform needs the shapes of its views");
  int64_t threads = options.num_workers;
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (int64_t t = 0; t < threads; ++t) workers_.emplace_back([this] { worker_loop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void DataLoader::start_epoch(int64_t epoch, int64_t start_batch) {
  XDINO_CHECK(start_batch >= 0 && start_batch <= batches_, "cannot start epoch ", epoch,
              " at batch ", start_batch, ": it has ", batches_, " batches");
  std::vector<int64_t> order = sampler_.indices(epoch);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++generation_;
    epoch_ = epoch;
    order_ = std::move(order);
    end_ =
        options_.drop_last ? batches_ * options_.batch_size : static_cast<int64_t>(order_.size());
    next_claim_ = start_batch * options_.batch_size;
    next_batch_ = start_batch;
    pending_.clear();
    ready_.clear();
    error_ = nullptr;
    started_ = true;
  }
  work_cv_.notify_all();
}

bool DataLoader::can_claim() const {
  return started_ && !error_ && next_claim_ < end_ &&
         next_claim_ / options_.batch_size < next_batch_ + options_.prefetch_batches;
}

int64_t DataLoader::batch_length(int64_t batch) const {
  return std::min(options_.batch_size, end_ - batch * options_.batch_size);
}

void DataLoader::worker_loop() {
  serial_intra_op_in_this_thread();
  const int64_t bs = options_.batch_size;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || can_claim(); });
    if (stop_) return;
    const int64_t pos = next_claim_++;
    const uint64_t generation = generation_;
    const int64_t epoch = epoch_;
    const int64_t index = order_[static_cast<size_t>(pos)];
    const int64_t b = pos / bs;
    const size_t slot = static_cast<size_t>(pos - b * bs);
    if (slot == 0) {
      try {
        start_batch(b);
      } catch (...) {  // no exception may leave a worker: the consumer's next() reports it
        if (!error_) error_ = as_error(std::current_exception(), "batch " + std::to_string(b));
        pending_.erase(b);
        ready_cv_.notify_all();
        continue;
      }
    }
    std::vector<torch::Tensor> slots;
    for (const torch::Tensor& v : pending_.at(b).batch_views) slots.push_back(v[slot]);
    lock.unlock();

    Sample sample;
    std::exception_ptr failure;
    try {
      sample = produce(index, epoch, transform_.writes_in_place() ? &slots : nullptr);
    } catch (...) {
      failure = as_error(std::current_exception(), "sample " + dataset_->path(index));
    }

    lock.lock();
    if (generation != generation_) continue;  // the epoch was restarted meanwhile
    if (failure) {
      if (!error_) error_ = failure;
      ready_cv_.notify_all();
      continue;
    }
    Pending& p = pending_.at(b);
    if (!transform_.writes_in_place()) p.sample_views[slot] = std::move(sample.views);
    p.labels[slot] = sample.label;
    p.indices[slot] = sample.index;
    if (--p.remaining > 0) continue;
    Pending full = std::move(p);
    pending_.erase(b);
    lock.unlock();

    Batch batch;
    try {
      batch = finish(epoch, b, full);
    } catch (...) {
      failure = as_error(std::current_exception(), "batch " + std::to_string(b));
    }
    full = Pending();  // free the per-sample views outside the lock

    lock.lock();
    if (generation != generation_) continue;
    if (failure) {
      if (!error_) error_ = failure;
    } else {
      ready_.emplace(b, std::move(batch));
    }
    ready_cv_.notify_all();
  }
}

void DataLoader::start_batch(int64_t b) {
  Pending& p = pending_[b];
  const int64_t length = batch_length(b);
  p.remaining = length;
  p.labels.resize(static_cast<size_t>(length));
  p.indices.resize(static_cast<size_t>(length));
  if (!transform_.writes_in_place()) {
    p.sample_views.resize(static_cast<size_t>(length));
    return;
  }
  std::vector<std::vector<int64_t>> sizes;
  for (const std::vector<int64_t>& shape : transform_.shapes()) {
    sizes.push_back({length});
    sizes.back().insert(sizes.back().end(), shape.begin(), shape.end());
  }
  p.batch_views = take_buffers(sizes, std::vector<torch::ScalarType>(sizes.size(), torch::kFloat));
}

std::vector<torch::Tensor> DataLoader::take_buffers(const std::vector<std::vector<int64_t>>& sizes,
                                                    const std::vector<torch::ScalarType>& dtypes) {
  auto matches = [&](const std::vector<torch::Tensor>& set) {
    if (set.size() != sizes.size()) return false;
    for (size_t v = 0; v < set.size(); ++v)
      if (set[v].sizes() != c10::IntArrayRef(sizes[v]) || set[v].scalar_type() != dtypes[v] ||
          set[v].use_count() != 1 ||          // the consumer still holds the batch
          set[v].storage().use_count() != 1)  // ... or a slice or view of it
        return false;
    return true;
  };
  if (!pin_)
    for (const std::vector<torch::Tensor>& set : pool_)
      if (matches(set)) return set;
  std::vector<torch::Tensor> set;
  try {
    for (size_t v = 0; v < sizes.size(); ++v)
      set.push_back(
          torch::empty(sizes[v], torch::TensorOptions().dtype(dtypes[v]).pinned_memory(pin_)));
  } catch (const std::exception& e) {
    // What was being allocated, and what makes it smaller: the sizes come from the flags.
    int64_t bytes = 0;
    std::string shapes;
    for (size_t v = 0; v < sizes.size(); ++v) {
      int64_t n = c10::elementSize(dtypes[v]);
      for (int64_t d : sizes[v]) n *= d;
      bytes += n;
      shapes += (v ? ", " : "") + c10::str(c10::IntArrayRef(sizes[v]));
    }
    XDINO_FAIL("cannot allocate the data loader's batch buffers (", bytes, " bytes: ", shapes, "; ",
               std::string(e.what()).substr(0, std::string(e.what()).find('\n')),
               "): lower --batch_size_per_gpu, the crop or image sizes, or --in_chans");
  }
  // Pinned memory is pooled by CUDA's host allocator, which also waits for pending
  // non_blocking copies before reuse; reusing it here could overwrite data in flight.
  if (!pin_ && static_cast<int64_t>(pool_.size()) < options_.prefetch_batches + 2)
    pool_.push_back(set);
  return set;
}

DataLoader::Sample DataLoader::produce(int64_t index, int64_t epoch,
                                       const std::vector<torch::Tensor>* slots) {
  Sample s;
  Rng rng(sample_seed(static_cast<uint64_t>(options_.seed), static_cast<uint64_t>(epoch),
                      static_cast<uint64_t>(index)));
  const Image image = load_readable(index, &s.index);
  if (slots != nullptr)
    transform_.write(image, rng, *slots);
  else
    s.views = transform_(image, rng);
  s.label = dataset_->label(s.index);
  return s;
}

Image DataLoader::load_readable(int64_t index, int64_t* loaded) {
  const int64_t n = dataset_->size();
  const size_t limit = static_cast<size_t>(
      std::max<double>(10, options_.max_corrupt_fraction * static_cast<double>(n)));
  int64_t j = index;
  for (int64_t tries = 0; tries < n; ++tries, j = (j + 1) % n) {
    {
      std::lock_guard<std::mutex> lock(bad_mutex_);
      if (bad_.count(j)) continue;
    }
    try {
      Image image = dataset_->load(j);
      if (j != index) ++replaced_;
      *loaded = j;
      return image;
    } catch (const Error& e) {
      size_t bad_count;
      bool first;
      {
        std::lock_guard<std::mutex> lock(bad_mutex_);
        first = bad_.insert(j).second;
        bad_count = bad_.size();
      }
      if (first)
        log::warn(
            "unreadable image skipped (reported once; the next readable sample takes its "
            "place): ",
            e.what());
      XDINO_CHECK(bad_count <= limit, bad_count, " of the ", n, " images of ", dataset_->location(),
                  " are unreadable (last: ", dataset_->path(j), "); is the data path intact?");
    }
  }
  XDINO_FAIL("no readable image in ", dataset_->describe());
}

Batch DataLoader::finish(int64_t epoch, int64_t position, Pending& p) {
  Batch batch;
  batch.epoch = epoch;
  batch.position = position;
  batch.labels = torch::tensor(p.labels, torch::kLong);
  batch.indices = torch::tensor(p.indices, torch::kLong);
  if (pin_) {
    batch.labels = batch.labels.pin_memory();
    batch.indices = batch.indices.pin_memory();
  }
  if (transform_.writes_in_place()) {
    batch.views = std::move(p.batch_views);
    return batch;
  }
  // Returning transforms: stack view v of every sample, as the official collate does.
  const auto& views = p.sample_views;
  const size_t n = views.size();
  const size_t num_views = views[0].size();
  XDINO_CHECK(num_views > 0, "the sample transform returned no view");
  std::vector<std::vector<int64_t>> sizes;
  std::vector<torch::ScalarType> dtypes;
  for (size_t v = 0; v < num_views; ++v) {
    const torch::Tensor& first = views[0][v];
    XDINO_CHECK(first.defined() && first.device().is_cpu(), "view ", v,
                " of the sample transform is not a CPU tensor");
    for (size_t s = 0; s < n; ++s) {
      XDINO_CHECK(views[s].size() == num_views, "the sample transform returned ", views[s].size(),
                  " views for dataset index ", p.indices[s], " and ", num_views, " for index ",
                  p.indices[0]);
      const torch::Tensor& t = views[s][v];
      XDINO_CHECK(t.sizes() == first.sizes() && t.dtype() == first.dtype(), "view ", v,
                  " has shape ", t.sizes(), " for dataset index ", p.indices[s], " but ",
                  first.sizes(), " for index ", p.indices[0], ": views cannot be batched");
    }
    sizes.push_back({static_cast<int64_t>(n)});
    for (int64_t d : first.sizes()) sizes.back().push_back(d);
    dtypes.push_back(first.scalar_type());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    batch.views = take_buffers(sizes, dtypes);
  }
  for (size_t v = 0; v < num_views; ++v) {
    const size_t bytes = views[0][v].nbytes();
    auto* dst = static_cast<char*>(batch.views[v].data_ptr());
    for (size_t s = 0; s < n; ++s) {
      const torch::Tensor t = views[s][v].contiguous();
      std::memcpy(dst + s * bytes, t.data_ptr(), bytes);
    }
  }
  return batch;
}

std::optional<Batch> DataLoader::next() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  XDINO_CHECK(started_, "call start_epoch() before next()");
  if (error_) std::rethrow_exception(error_);
  if (next_batch_ >= batches_) return std::nullopt;
  ready_cv_.wait(lock, [&] { return error_ || ready_.count(next_batch_) > 0; });
  if (error_) std::rethrow_exception(error_);
  auto it = ready_.find(next_batch_);
  Batch batch = std::move(it->second);
  ready_.erase(it);
  ++next_batch_;
  stats_.batches += 1;
  stats_.samples += batch.size();
  stats_.wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  lock.unlock();
  work_cv_.notify_all();
  return batch;
}

LoaderStats DataLoader::stats() const {
  LoaderStats s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = stats_;
  }
  {
    std::lock_guard<std::mutex> lock(bad_mutex_);
    s.corrupt_files = static_cast<int64_t>(bad_.size());
  }
  s.replaced = replaced_.load();
  return s;
}

}  // namespace xdino::augment
