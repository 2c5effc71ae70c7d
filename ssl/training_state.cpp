#include "ssl/training_state.h"

#include <ATen/Context.h>

#include <mutex>

#include "core/check.h"
#include "core/log.h"

namespace xdino::ssl {
namespace {

at::Generator generator_of(const torch::Device& device) {
  return at::globalContext().defaultGenerator(device);
}

torch::Tensor rng_state(const torch::Device& device) {
  auto gen = generator_of(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(const torch::Device& device, const torch::Tensor& state) {
  auto gen = generator_of(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Every process's state, in rank order (the collective needs device tensors under NCCL).
std::vector<torch::Tensor> gather_state(Communicator& comm, const torch::Tensor& state,
                                        const torch::Device& device) {
  std::vector<torch::Tensor> out;
  for (const auto& t : comm.all_gather(state.to(device))) out.push_back(t.cpu());
  return out;
}

c10::impl::GenericList tensor_list(const std::vector<torch::Tensor>& ts) {
  auto l = make_list();
  for (const auto& t : ts) l.push_back(t.cpu());
  return l;
}

std::vector<torch::Tensor> tensors_of(const c10::IValue& v, const std::string& what) {
  XDINO_CHECK(v.isList(), what, " should be a list, found ", v.tagKind());
  std::vector<torch::Tensor> out;
  for (const auto& e : v.toListRef()) {
    XDINO_CHECK(e.isTensor(), what, " should hold tensors, found ", e.tagKind());
    out.push_back(e.toTensor());
  }
  return out;
}

}  // namespace

TrainingState TrainingState::capture(int64_t next_epoch, int64_t next_iteration,
                                     int64_t iterations_per_epoch, const EpochMeters& meters,
                                     Communicator& comm, const torch::Device& device) {
  TrainingState s;
  s.epoch = next_epoch;
  s.iteration = next_iteration;
  s.iterations_per_epoch = iterations_per_epoch;
  s.world_size = comm.world_size();
  s.epoch_stats = meters.reduced(comm);
  s.rank_stats = gather_state(comm, meters.to_tensor(), device);
  s.rng_cpu = gather_state(comm, rng_state(torch::kCPU), device);
  if (device.is_cuda()) s.rng_cuda = gather_state(comm, rng_state(device), device);
  s.exact = true;
  return s;
}

TrainingState::Position TrainingState::resume_position(int64_t niter, Communicator& comm,
                                                       const torch::Device& device,
                                                       EpochMeters& meters) const {
  Position pos{epoch, 0};
  if (!exact) {
    log::info("Resuming at the start of epoch ", pos.epoch,
              " (checkpoint without our resume "
              "state: batches and random numbers will differ from an uninterrupted run)");
    return pos;
  }
  if (iterations_per_epoch == niter) {
    pos = {iteration / niter, iteration % niter};
  } else if (iteration % iterations_per_epoch != 0 && comm.is_main()) {
    log::warn("iterations per epoch changed from ", iterations_per_epoch, " to ", niter,
              " (dataset, batch size or world size differ): restarting epoch ", pos.epoch,
              " from its first batch");
  }
  const auto rank = static_cast<size_t>(comm.rank());
  if (pos.batch > 0) {
    if (world_size == comm.world_size() && rank < rank_stats.size())
      meters = EpochMeters::from_tensor(rank_stats[rank]);
    else if (comm.is_main())
      meters = epoch_stats;  // the same iterations; their sums in another order
  }
  if (world_size == comm.world_size() && rank < rng_cpu.size()) {
    set_rng_state(torch::kCPU, rng_cpu[rank]);
    if (device.is_cuda() && rank < rng_cuda.size()) set_rng_state(device, rng_cuda[rank]);
  } else if (comm.is_main()) {
    log::warn("the checkpoint was written by ", world_size, " processes, this run has ",
              comm.world_size(), ": random streams restart (drop path masks will differ)");
  }
  return pos;
}

IDict TrainingState::to_dict() const {
  auto resume = make_dict();
  resume.insert("iteration", iteration);
  resume.insert("iterations_per_epoch", iterations_per_epoch);
  resume.insert("world_size", world_size);
  resume.insert("rng_cpu", tensor_list(rng_cpu));
  if (!rng_cuda.empty()) resume.insert("rng_cuda", tensor_list(rng_cuda));
  resume.insert("epoch_stats", epoch_stats.to_ivalue());
  if (!rank_stats.empty()) resume.insert("rank_epoch_stats", tensor_list(rank_stats));
  resume.insert("log_line", log_line);
  return resume;
}

void TrainingState::from_dict(const IDict& resume, const std::string& what) {
  iteration = as_int(get(resume, "iteration", what), "iteration");
  iterations_per_epoch = as_int(get(resume, "iterations_per_epoch", what), "iterations_per_epoch");
  world_size = as_int(get(resume, "world_size", what), "world_size");
  rng_cpu = tensors_of(get(resume, "rng_cpu", what), "rng_cpu");
  if (const c10::IValue* c = find(resume, "rng_cuda")) rng_cuda = tensors_of(*c, "rng_cuda");
  epoch_stats.from_ivalue(get(resume, "epoch_stats", what));
  // Absent from checkpoints written before it existed: rank 0 then takes the reduced sums.
  if (const c10::IValue* r = find(resume, "rank_epoch_stats"))
    rank_stats = tensors_of(*r, "rank_epoch_stats");
  // Absent from checkpoints written before it existed: nothing to repair then.
  if (const c10::IValue* l = find(resume, "log_line"); l != nullptr && l->isString())
    log_line = l->toStringRef();
  exact = true;
}

}  // namespace xdino::ssl
