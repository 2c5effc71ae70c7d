#include "distributed/replicas.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/blas.h"
#include "core/check.h"

namespace xdino::distributed {
namespace {

thread_local const ReplicaPlace* t_place = nullptr;

// Thrown in the replicas that wait in a collective when another replica has failed; run()
// reports the failure itself, never this.
struct Released : std::exception {
  const char* what() const noexcept override { return "a replica failed"; }
};

}  // namespace

const ReplicaPlace* current_replica() { return t_place; }

torch::Tensor replica_rows(const torch::Tensor& full) {
  const ReplicaPlace* place = t_place;
  if (place == nullptr || place->count == 1) return full;
  const int64_t count = place->count, b = place->samples;
  XDINO_CHECK(b > 0 && full.size(0) % (b * count) == 0, "replica_rows: ", full.size(0),
              " rows are not blocks of ", count, " replicas x ", b, " samples");
  const int64_t groups = full.size(0) / (b * count);
  std::vector<int64_t> shape = full.sizes().vec();
  shape[0] = b;
  shape.insert(shape.begin(), count);
  shape.insert(shape.begin(), groups);
  std::vector<int64_t> out_shape = full.sizes().vec();
  out_shape[0] = groups * b;
  return full.reshape(shape).select(1, place->index).reshape(out_shape);
}

// Shared by the group, its threads and its communicator (which may outlive the group in a
// module's hands; its collectives then refuse to run).
struct ReplicaGroup::State {
  int count = 1;
  std::shared_ptr<Communicator> outer;

  // Job dispatch.
  std::mutex job_mutex;
  std::condition_variable job_cv, done_cv;
  const std::function<void(int)>* job = nullptr;
  uint64_t job_generation = 0;
  int running = 0;
  bool stopping = false;
  std::vector<ReplicaPlace> places;
  std::exception_ptr first_error;

  // Collectives: a barrier that a failing replica can release.
  std::mutex barrier_mutex;
  std::condition_variable barrier_cv;
  int arrived = 0;
  uint64_t barrier_generation = 0;
  bool released = false;
  std::vector<void*> slots;  // per replica: what it offers to the current collective
  std::vector<torch::Tensor> gathered;

  void barrier() {
    std::unique_lock<std::mutex> lock(barrier_mutex);
    if (released) throw Released();
    const uint64_t generation = barrier_generation;
    if (++arrived == count) {
      arrived = 0;
      ++barrier_generation;
      barrier_cv.notify_all();
      return;
    }
    barrier_cv.wait(lock, [&] { return barrier_generation != generation || released; });
    if (barrier_generation == generation) throw Released();
  }

  void release() {
    std::lock_guard<std::mutex> lock(barrier_mutex);
    released = true;
    barrier_cv.notify_all();
  }

  void run_body(int index) {
    t_place = &places[static_cast<size_t>(index)];
    try {
      (*job)(index);
    } catch (const Released&) {
      // Released by another replica's failure: that one reports.
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(job_mutex);
        if (!first_error) first_error = std::current_exception();
      }
      release();
    }
    t_place = nullptr;
  }

  void worker(int index) {
    at::set_num_threads(1);
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(job_mutex);
        job_cv.wait(lock, [&] { return stopping || job_generation != seen; });
        if (stopping) return;
        seen = job_generation;
      }
      run_body(index);
      std::lock_guard<std::mutex> lock(job_mutex);
      if (--running == 0) done_cv.notify_all();
    }
  }

  int index() const {
    XDINO_CHECK(t_place != nullptr, "a replica collective was called outside ReplicaGroup::run");
    return t_place->index;
  }
};

namespace {

// Over every replica of every process, or (within_process) this process's replicas alone.
class ReplicaCommunicator final : public Communicator {
 public:
  ReplicaCommunicator(std::shared_ptr<ReplicaGroup::State> state, bool within_process)
      : state_(std::move(state)), outer_(within_process ? local_communicator() : state_->outer) {}

  int rank() const override {
    const int index = t_place != nullptr ? t_place->index : 0;
    return outer_->rank() * state_->count + index;
  }
  int world_size() const override { return outer_->world_size() * state_->count; }
  bool owns_module_state() const override { return t_place == nullptr || t_place->index == 0; }

  using Communicator::all_reduce_sum;
  void all_reduce_sum(std::vector<torch::Tensor>& tensors) override {
    auto& s = *state_;
    const int me = s.index();
    s.slots[static_cast<size_t>(me)] = &tensors;
    s.barrier();
    if (me == 0) {
      torch::NoGradGuard no_grad;
      for (int r = 1; r < s.count; ++r) {
        const auto& theirs =
            *static_cast<std::vector<torch::Tensor>*>(s.slots[static_cast<size_t>(r)]);
        XDINO_CHECK(theirs.size() == tensors.size(), "replicas all-reduce different tensor lists");
        for (size_t j = 0; j < tensors.size(); ++j) tensors[j].add_(theirs[j]);
      }
      if (outer_->world_size() > 1) outer_->all_reduce_sum(tensors);
    }
    take_from_replica_0(me, tensors);
  }

  void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    auto& s = *state_;
    const int me = s.index();
    XDINO_CHECK(root >= 0 && root < world_size(), "broadcast from rank ", root, " of ",
                world_size());
    const int root_process = root / s.count, root_replica = root % s.count;
    s.slots[static_cast<size_t>(me)] = &tensors;
    s.barrier();
    if (me == 0) {
      torch::NoGradGuard no_grad;
      if (root_replica != 0 && outer_->rank() == root_process) {
        const auto& src =
            *static_cast<std::vector<torch::Tensor>*>(s.slots[static_cast<size_t>(root_replica)]);
        for (size_t j = 0; j < tensors.size(); ++j) tensors[j].copy_(src[j]);
      }
      if (outer_->world_size() > 1) outer_->broadcast(tensors, root_process);
    }
    take_from_replica_0(me, tensors);
  }

  std::vector<torch::Tensor> all_gather(const torch::Tensor& t) override {
    return gather(t, /*varying=*/false);
  }
  std::vector<torch::Tensor> all_gather_varying(const torch::Tensor& t) override {
    return gather(t, /*varying=*/true);
  }

  void barrier() override {
    auto& s = *state_;
    const int me = s.index();
    s.barrier();
    if (me == 0 && outer_->world_size() > 1) outer_->barrier();
    s.barrier();
  }

 private:
  // The last phase of all_reduce and broadcast: once replica 0 holds the result, the others
  // copy it, and replica 0 leaves only when they have (its tensors are its caller's again).
  void take_from_replica_0(int me, std::vector<torch::Tensor>& tensors) {
    auto& s = *state_;
    s.barrier();
    if (me != 0) {
      torch::NoGradGuard no_grad;
      const auto& result = *static_cast<std::vector<torch::Tensor>*>(s.slots[0]);
      for (size_t j = 0; j < tensors.size(); ++j) tensors[j].copy_(result[j]);
    }
    s.barrier();
  }

  std::vector<torch::Tensor> gather(const torch::Tensor& t, bool varying) {
    auto& s = *state_;
    const int me = s.index();
    torch::Tensor mine = t;
    s.slots[static_cast<size_t>(me)] = &mine;
    s.barrier();
    if (me == 0) {
      std::vector<torch::Tensor> local;
      for (int r = 0; r < s.count; ++r)
        local.push_back(*static_cast<torch::Tensor*>(s.slots[static_cast<size_t>(r)]));
      s.gathered.clear();
      if (outer_->world_size() == 1) {
        s.gathered = local;
      } else if (!varying) {
        for (const auto& block : outer_->all_gather(torch::stack(local)))
          for (const auto& one : block.unbind(0)) s.gathered.push_back(one);
      } else {
        std::vector<int64_t> rows;
        for (const auto& one : local) rows.push_back(one.size(0));
        const auto all_rows = outer_->all_gather(torch::tensor(rows, torch::kLong));
        const auto blocks = outer_->all_gather_varying(torch::cat(local));
        for (size_t p = 0; p < blocks.size(); ++p) {
          const auto sizes = all_rows[p].to(torch::kCPU);
          int64_t start = 0;
          for (int r = 0; r < s.count; ++r) {
            const int64_t n = sizes[r].item<int64_t>();
            s.gathered.push_back(blocks[p].narrow(0, start, n));
            start += n;
          }
        }
      }
    }
    s.barrier();
    std::vector<torch::Tensor> out;
    for (const auto& one : s.gathered) out.push_back(one.clone());
    s.barrier();
    return out;
  }

  std::shared_ptr<ReplicaGroup::State> state_;
  std::shared_ptr<Communicator> outer_;
};

}  // namespace

ReplicaGroup::ReplicaGroup(int count, std::shared_ptr<Communicator> outer)
    : state_(std::make_shared<State>()) {
  XDINO_CHECK_ARG(count >= 1, "the number of replicas must be >= 1, got ", count);
  state_->count = count;
  state_->outer = outer ? std::move(outer) : local_communicator();
  state_->places.resize(static_cast<size_t>(count));
  state_->slots.resize(static_cast<size_t>(count));
  for (int r = 0; r < count; ++r) {
    state_->places[static_cast<size_t>(r)].index = r;
    state_->places[static_cast<size_t>(r)].count = count;
  }
}

ReplicaGroup::~ReplicaGroup() {
  {
    std::lock_guard<std::mutex> lock(state_->job_mutex);
    state_->stopping = true;
  }
  state_->job_cv.notify_all();
  for (auto& t : threads_) t.join();
}

int ReplicaGroup::count() const { return state_->count; }

std::shared_ptr<Communicator> ReplicaGroup::communicator() const {
  return std::make_shared<ReplicaCommunicator>(state_, /*within_process=*/false);
}

std::shared_ptr<Communicator> ReplicaGroup::process_communicator() const {
  return std::make_shared<ReplicaCommunicator>(state_, /*within_process=*/true);
}

void ReplicaGroup::run(const std::function<void(int)>& body, int64_t samples) {
  State& s = *state_;
  XDINO_CHECK(t_place == nullptr, "ReplicaGroup::run cannot nest");
  if (threads_.empty())
    for (int r = 1; r < s.count; ++r) threads_.emplace_back([this, r] { state_->worker(r); });

  // Every replica draws from a copy of the default generator (see the header).
  at::Generator base = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(base.mutex());
    for (auto& place : s.places) {
      place.generator = base.clone();
      place.samples = samples;
    }
  }
  const int threads_before = at::get_num_threads();
  const int blas_before = set_blas_threads(1);
  at::set_num_threads(1);
  {
    std::lock_guard<std::mutex> lock(s.job_mutex);
    s.job = &body;
    s.running = s.count - 1;
    s.first_error = nullptr;
    ++s.job_generation;
  }
  s.job_cv.notify_all();
  s.run_body(0);
  // Replica 0 is done; the others may still be working.
  {
    std::unique_lock<std::mutex> lock(s.job_mutex);
    s.done_cv.wait(lock, [&] { return s.running == 0; });
    s.job = nullptr;
  }
  at::set_num_threads(threads_before);
  if (blas_before > 0) set_blas_threads(blas_before);
  {
    std::lock_guard<std::mutex> lock(s.barrier_mutex);
    s.released = false;
    s.arrived = 0;
  }
  if (s.first_error) std::rethrow_exception(s.first_error);
  std::lock_guard<std::mutex> lock(base.mutex());
  base.set_state(s.places[0].generator.get_state());
}

}  // namespace xdino::distributed
