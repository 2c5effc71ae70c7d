// Seconds per DINO training step and images/s, with a breakdown (data, forward, backward,
// optimizer, EMA), on synthetic crops: 2 global crops of 224 px and 8 local crops of 96 px per
// image, fp32 on this CPU, every parameter updated (after the last-layer freeze).
//   build/bench/bench_train [--arch a,b] [--out_dim 65536,4096] [--batch 8] [--steps 5]
//                           [--warmup 2] [--threads N] [--profile trace.json]
//                           [--global_size 224] [--local_size 96] [--locals 8]
//                           [--head_hidden_dim 2048]
// --profile writes a Chrome trace of the timed steps (LibTorch's autograd profiler), to see
// which operators the time goes to.
// bench/official_dino_step.py times the official PyTorch step with the same settings; run
// both and compare (bench/RESULTS.md).
#include <ATen/Parallel.h>
#include <ATen/CPUGeneratorImpl.h>
#if __has_include(<torch/csrc/autograd/profiler_legacy.h>)
#include <torch/csrc/autograd/profiler_legacy.h>
#define XDINO_HAVE_RECORD_PROFILE 1
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/blas.h"
#include "core/log.h"
#include "models/registry.h"
#include "ssl/trainer.h"

namespace {

using xdino::ssl::StepTimes;

// Fresh random crops for every batch, as the Python reference makes them.
class RandomCrops : public xdino::ssl::DataSource {
 public:
  RandomCrops(int64_t batches, int64_t batch, int64_t global, int64_t local, int64_t locals)
      : batches_(batches), batch_(batch), global_(global), local_(local), locals_(locals) {}
  int64_t batches_per_epoch() const override { return batches_; }
  void start_epoch(int64_t, int64_t) override {}
  std::vector<torch::Tensor> next_batch() override {
    std::vector<torch::Tensor> crops;
    for (int64_t i = 0; i < 2 + locals_; ++i) {
      const int64_t s = i < 2 ? global_ : local_;
      crops.push_back(torch::randn({batch_, 3, s, s}));
    }
    return crops;
  }

 private:
  int64_t batches_, batch_, global_, local_, locals_;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

StepTimes minus(const StepTimes& a, const StepTimes& b) {
  StepTimes d;
  d.data = a.data - b.data;
  d.forward = a.forward - b.forward;
  d.backward = a.backward - b.backward;
  d.optimizer = a.optimizer - b.optimizer;
  d.ema = a.ema - b.ema;
  d.steps = a.steps - b.steps;
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  std::string archs = "xcit_nano_12_p16,xcit_tiny_12_p16", dims = "65536,4096";
  int64_t batch = 8, steps = 5, warmup = 2, global = 224, local = 96, locals = 8;
  int64_t head_hidden = 2048;
  std::string profile;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--arch") archs = v;
    else if (k == "--out_dim") dims = v;
    else if (k == "--batch") batch = std::atoll(v.c_str());
    else if (k == "--steps") steps = std::atoll(v.c_str());
    else if (k == "--warmup") warmup = std::atoll(v.c_str());
    else if (k == "--global_size") global = std::atoll(v.c_str());
    else if (k == "--local_size") local = std::atoll(v.c_str());
    else if (k == "--locals") locals = std::atoll(v.c_str());
    else if (k == "--head_hidden_dim") head_hidden = std::atoll(v.c_str());
    else if (k == "--threads") at::set_num_threads(std::atoi(v.c_str()));
    else if (k == "--profile") profile = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  xdino::log::set_level(xdino::log::Level::kWarn);
  std::printf("%s\nintra-op threads: %d\n", xdino::blas_summary().c_str(), at::get_num_threads());
  const auto out = std::filesystem::temp_directory_path() / "xdino_bench_train";
  for (const auto& arch : split(archs)) {
    for (const auto& dim : split(dims)) {
      std::filesystem::remove_all(out);
      std::filesystem::create_directories(out);
      xdino::ssl::TrainOptions o;
      o.arch = arch;
      o.out_dim = std::atoll(dim.c_str());
      o.batch_size_per_gpu = batch;
      o.head_hidden_dim = head_hidden;
      o.global_crops_size = global;
      o.local_crops_size = local;
      o.local_crops_number = locals;
      o.epochs = 1;
      o.warmup_epochs = 0;
      o.freeze_last_layer = 0;
      o.saveckp_freq = 0;
      o.device = "cpu";
      o.output_dir = out.string();
      auto data = std::make_shared<RandomCrops>(warmup + steps, batch, global, local, locals);
      xdino::ssl::Trainer trainer(o, [&](const xdino::models::BackboneOptions& bo) {
        return xdino::models::create_backbone(arch, bo);
      }, data);
      StepTimes at_warmup;
#ifdef XDINO_HAVE_RECORD_PROFILE
      std::unique_ptr<torch::autograd::profiler::RecordProfile> recording;
#endif
      std::chrono::steady_clock::time_point t0;
      double wall = 0;
      trainer.set_hooks({nullptr, [&](int64_t it) {
        if (it + 1 == warmup) {
          at_warmup = trainer.times();
#ifdef XDINO_HAVE_RECORD_PROFILE
          if (!profile.empty())
            recording = std::make_unique<torch::autograd::profiler::RecordProfile>(
                profile + "." + arch + "." + dim + ".json");
#endif
          t0 = std::chrono::steady_clock::now();
        }
        if (it + 1 == warmup + steps) {
          wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#ifdef XDINO_HAVE_RECORD_PROFILE
          recording.reset();
#endif
        }
      }});
      trainer.train();
      const StepTimes t = minus(trainer.times(), at_warmup);
      const double n = static_cast<double>(t.steps);
      std::printf(
          "{\"arch\": \"%s\", \"out_dim\": %s, \"batch\": %ld, \"threads\": %d, "
          "\"sec_per_step\": %.4f, \"images_per_sec\": %.3f, \"data_sec\": %.4f, "
          "\"forward_sec\": %.4f, \"backward_sec\": %.4f, \"optimizer_sec\": %.4f, "
          "\"ema_sec\": %.4f}\n",
          arch.c_str(), dim.c_str(), static_cast<long>(batch), at::get_num_threads(), wall / n,
          static_cast<double>(batch) * n / wall, t.data / n, t.forward / n, t.backward / n,
          t.optimizer / n, t.ema / n);
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(out);
  return 0;
}
