#include "eval/batch_norm_stats.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "augment/data/loader.h"
#include "core/check.h"
#include "core/log.h"
#include "models/batch_norm.h"

namespace xdino::eval {
namespace {

// One BatchNorm with running statistics, whichever class: its buffers, and how to set and
// restore its momentum (ours is a double; LibTorch's an optional<double>, std:: or c10::
// by version, hence the closures).
struct Norm {
  std::string name;
  torch::nn::Module* module;
  torch::Tensor mean, var, count;
  std::function<void(double)> set_momentum;
  std::function<void()> restore_momentum;
  models::BatchNormImpl* ours = nullptr;  // ours only: the one that takes a communicator
};

template <typename Impl>
bool add_libtorch_norm(const std::string& name, torch::nn::Module& module, std::vector<Norm>& out) {
  auto* bn = dynamic_cast<Impl*>(&module);
  if (bn == nullptr) return false;
  if (!bn->options.track_running_stats()) return true;  // always batch statistics: nothing kept
  const auto saved = bn->options.momentum();
  out.push_back({name, bn, bn->running_mean, bn->running_var, bn->num_batches_tracked,
                 [bn](double m) { bn->options.momentum(m); },
                 [bn, saved] { bn->options.momentum(saved); }});
  return true;
}

void add_norm(const std::string& name, torch::nn::Module& m, std::vector<Norm>& norms) {
  if (auto* ours = dynamic_cast<models::BatchNormImpl*>(&m)) {
    const double saved = ours->momentum;
    norms.push_back({name, ours, ours->running_mean, ours->running_var, ours->num_batches_tracked,
                     [ours](double v) { ours->momentum = v; },
                     [ours, saved] { ours->momentum = saved; }, ours});
    return;
  }
  add_libtorch_norm<torch::nn::BatchNorm1dImpl>(name, m, norms) ||
      add_libtorch_norm<torch::nn::BatchNorm2dImpl>(name, m, norms) ||
      add_libtorch_norm<torch::nn::BatchNorm3dImpl>(name, m, norms);
}

// The root is looked at apart from its descendants: LibTorch lists it only when it is held by
// a shared_ptr.
std::vector<Norm> find_norms(const torch::nn::Module& model) {
  std::vector<Norm> norms;
  add_norm("", const_cast<torch::nn::Module&>(model), norms);
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    add_norm(item.key(), *item.value(), norms);
  return norms;
}

// Puts back, whatever happens in between, every module's train/eval mode and every
// BatchNorm's momentum and communicator.
class RestoreOnExit {
 public:
  RestoreOnExit(torch::nn::Module& model, std::vector<Norm>& norms) : norms_(norms) {
    // modules() lists a module before its children, so restoring in this order sets each
    // one last to its own mode (train() recurses).
    modes_.emplace_back(&model, model.is_training());
    for (const auto& m : model.modules(/*include_self=*/false))
      modes_.emplace_back(m.get(), m->is_training());
  }
  ~RestoreOnExit() {
    for (Norm& n : norms_) {
      n.restore_momentum();
      if (n.ours) n.ours->set_communicator(nullptr);
    }
    for (const auto& [module, training] : modes_) module->train(training);
  }
  RestoreOnExit(const RestoreOnExit&) = delete;
  RestoreOnExit& operator=(const RestoreOnExit&) = delete;

 private:
  std::vector<Norm>& norms_;
  std::vector<std::pair<torch::nn::Module*, bool>> modes_;
};

}  // namespace

bool has_batch_norm(const torch::nn::Module& module) { return !find_norms(module).empty(); }

bool recalibrate_batch_norm(models::Backbone& model, const ImageBatches& next_batch,
                            Communicator& comm) {
  std::vector<Norm> norms = find_norms(model);
  if (norms.empty()) return false;
  torch::NoGradGuard no_grad;
  torch::Tensor batch = next_batch();
  XDINO_CHECK(batch.defined(), "no images to take the BatchNorm statistics from");

  RestoreOnExit restore(model, norms);
  model.eval();
  for (Norm& n : norms) n.module->train();
  if (comm.world_size() > 1) {
    const std::shared_ptr<Communicator> shared(&comm, [](Communicator*) {});  // not owned
    for (Norm& n : norms)
      if (n.ours) n.ours->set_communicator(shared);
  }
  for (Norm& n : norms) {
    n.mean.zero_();
    n.var.fill_(1);
    n.count.zero_();
  }
  std::vector<bool> runs(norms.size());
  for (int64_t k = 1; batch.defined(); ++k, batch = next_batch()) {
    for (Norm& n : norms) n.set_momentum(1.0 / static_cast<double>(k));
    model.forward(batch);
    for (size_t i = 0; i < norms.size(); ++i) {
      const int64_t count = norms[i].count.item<int64_t>();
      if (k == 1) runs[i] = count == 1;
      XDINO_CHECK(count == (runs[i] ? k : 0), "BatchNorm '", norms[i].name, "' ran ",
                  count - (runs[i] ? k - 1 : 0), " times in forward ", k,
                  ": the cumulative average of its statistics needs it once in every forward");
    }
  }
  return true;
}

int64_t recalibrate_batch_norm(models::Backbone& model, const augment::DatasetPtr& images,
                               const ImageInput& o, Communicator& comm, torch::Device device) {
  XDINO_CHECK_ARG(o.batch_size >= 1, "batch size must be >= 1, got ", o.batch_size);
  if (!has_batch_norm(model)) return 0;
  const auto start = std::chrono::steady_clock::now();
  augment::LoaderOptions lo = o.loader(device);
  // A short last batch is left out where there is a whole one (header: equal weights).
  const int64_t per_process = (images->size() + comm.world_size() - 1) / comm.world_size();
  lo.drop_last = per_process >= o.batch_size;
  augment::DataLoader loader(images, o.transform(model.in_chans()), lo, comm.rank(),
                             comm.world_size());
  loader.start_epoch(0);
  int64_t batches = 0, seen = 0;
  recalibrate_batch_norm(
      model,
      [&]() -> torch::Tensor {
        std::optional<augment::Batch> batch = loader.next();
        if (!batch) return {};
        ++batches;
        seen += batch->size();
        return batch->views[0].to(device, torch::kFloat32, /*non_blocking=*/true);
      },
      comm);
  // Every process reads as many batches of the same sizes (the sampler pads its shards).
  const int64_t used = seen * comm.world_size();
  if (comm.is_main())
    log::info("BatchNorm statistics of the data: ", used, " images of ", images->location(), " (",
              batches, batches == 1 ? " batch" : " batches", " of up to ", o.batch_size,
              " per process, ", o.image_size, " px), in ",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              " s");
  return used;
}

}  // namespace xdino::eval
