// Seconds per DINO training step and images/s, with a breakdown (data, forward, backward,
// optimizer, EMA), on synthetic crops: 2 global crops of 224 px and 8 local crops of 96 px per
// image, every parameter updated (after the last-layer freeze), on any device and precision.
//   build/bench/bench_train [--arch a,b] [--out_dim 65536,4096] [--batch 8] [--steps 5]
//                           [--warmup 2] [--threads N] [--profile trace.json]
//                           [--global_size 224] [--local_size 96] [--locals 8]
//                           [--head_hidden_dim 2048] [--device auto|cpu|cuda|cuda:N]
//                           [--precision auto|fp32|bf16|fp16] [--replicas N]
//                           [--xca auto|ops|sdpa] [--kernels auto|ops|fused]
//                           [--koleo_loss_weight W] [--centering centering|sinkhorn_knopp]
//                           [--ibot_loss_weight W] [--ibot_separate_head true|false]
//                           [--cuda_graph true|false]
// --device and --precision mean what they mean for `dino train` (train/precision.h), with the
// same one-line errors (exit 2). The crops are made once, on the training device, so the
// figures are the step's and not the host's random numbers and copies (bench_loader times the
// data pipeline). On CUDA every step ends with a device synchronise, so the phase split is
// only indicative there but the step time is exact, and the JSON adds the peak allocated
// device memory; on the CPU it adds the heap memory the forward leaves alive for backward.
// The JSON also gives the step's work, "tflop_per_step" (ssl/step_flops.h, docs/flops.md), and
// "tflops_per_sec" achieved: MFU is the latter over the device's peak.
// --xca picks XCA's path (models/backbone.h, XcaAttention): the op path, or one
// scaled_dot_product_attention call (LibTorch 2.1+), for an A/B of the two. --kernels picks
// the XCA blocks' LayerNorm path (models/layers.h, LayerKernels): torch's, or kernels/cuda's
// fused one where it applies (a CUDA build on a card), for the same A/B. The DINOv2 options
// mean what they mean for `dino train` (ssl/recipe.h), to time what each adds to the step.
// --cuda_graph true replays the forward and backward as one CUDA graph, as `dino train
// --cuda_graph` does; its eager steps and the capture then fall in the warm-up (at least 4).
// --profile writes a Chrome trace of the timed steps, to see which operators the time goes to:
// LibTorch's autograd profiler on the CPU; in a CUDA build Kineto's, which also records every
// kernel, and the JSON adds "gpu_kernel_sec_per_step" (the union of the kernels' intervals) and
// "gpu_idle_fraction" (the share of the timed steps' wall time no kernel ran: launch overhead
// and host syncs, docs/flops.md).
// bench/reference/official_dino_step.py times the official PyTorch step with the same settings,
// and bench/reference/compare_train.py alternates this binary with main_dino.py's own step
// (bench/reference/official_step.py) and prints both (bench/results/training_step_cpu.md).
// Started with a launcher's variables (torchrun's RANK, WORLD_SIZE, ...; SLURM's; Open MPI's)
// each process is one rank of a distributed step, as in `dino train`: gradients averaged in
// buckets that overlap backward. Rank 0 prints, adding "world", "allreduce_bytes_per_step"
// (what each rank hands to all-reduce per step: gradients, the loss's center, the step's
// flags) and "grad_wait_sec" (the gradient all-reduce backward did not hide).
// bench/scenarios/multinode_step.sh runs it across two simulated hosts.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#if defined(XDINO_WITH_CUDA)
#include <torch/csrc/autograd/profiler_kineto.h>  // CUDA kernels on the trace's timeline
#elif __has_include(<torch/csrc/autograd/profiler_legacy.h>)
#include <torch/csrc/autograd/profiler_legacy.h>
#define XDINO_HAVE_RECORD_PROFILE 1
#endif

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/blas.h"
#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"
#include "distributed/distributed.h"
#include "distributed/launcher_env.h"
#include "models/registry.h"
#include "ssl/step_flops.h"
#include "ssl/trainer.h"

namespace {

using xdino::ssl::StepTimes;

// The same random crops for every batch, made once on the training device.
class FixedCrops : public xdino::ssl::DataSource {
 public:
  FixedCrops(int64_t batches, int64_t batch, int64_t global, int64_t local, int64_t locals,
             torch::Device device)
      : batches_(batches) {
    for (int64_t i = 0; i < 2 + locals; ++i) {
      const int64_t s = i < 2 ? global : local;
      crops_.push_back(torch::randn({batch, 3, s, s}, torch::TensorOptions().device(device)));
    }
  }
  int64_t batches_per_epoch() const override { return batches_; }
  void start_epoch(int64_t, int64_t) override {}
  std::vector<torch::Tensor> next_batch() override { return crops_; }

 private:
  int64_t batches_;
  std::vector<torch::Tensor> crops_;
};

int64_t whole_number(const std::string& flag, const std::string& v, int64_t min = 1) {
  size_t used = 0;
  int64_t n = min - 1;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
  }
  XDINO_CHECK_ARG(used == v.size() && n >= min, flag, " takes a whole number >= ", min, ", got '",
                  v, "'");
  return n;
}

// Bytes the C heap holds now (glibc, every arena): on the CPU LibTorch's tensors live there.
int64_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

std::string precision_name(const xdino::train::PrecisionPlan& plan) {
  if (!plan.autocast) return "fp32";
  return plan.autocast_dtype == torch::kHalf ? "fp16" : "bf16";
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

#ifdef XDINO_WITH_CUDA
// Kineto's profiler over the timed steps: a Chrome trace, and how long the GPU ran kernels.
class KernelProfile {
 public:
  KernelProfile() {
    namespace impl = torch::profiler::impl;
    const impl::ProfilerConfig config(impl::ProfilerState::KINETO);
    const std::set<impl::ActivityType> activities{impl::ActivityType::CPU,
                                                  impl::ActivityType::CUDA};
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
  }
  // Stops, writes the trace to `path` and returns the seconds during which at least one kernel
  // (or copy) ran on the device: overlapping intervals are counted once.
  double stop(const std::string& path) {
    auto result = torch::autograd::profiler::disableProfiler();
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& e : result->events())
      if (e.deviceType() == c10::DeviceType::CUDA && e.endNs() > e.startNs())
        spans.emplace_back(e.startNs(), e.endNs());
    std::sort(spans.begin(), spans.end());
    uint64_t busy = 0, open = 0, close = 0;
    for (const auto& [a, b] : spans) {
      if (a > close) {
        busy += close - open;
        open = a;
        close = b;
      } else {
        close = std::max(close, b);
      }
    }
    busy += close - open;
    result->save(path);
    return static_cast<double>(busy) * 1e-9;
  }
};
#endif

}  // namespace

int run(int argc, char** argv) {
  std::string archs = "xcit_nano_12_p16,xcit_tiny_12_p16", dims = "65536,4096";
  std::string device = "auto", precision = "auto", xca = "auto", kernels = "auto";
  int64_t batch = 8, steps = 5, warmup = 2, global = 224, local = 96, locals = 8;
  int64_t head_hidden = 2048, replicas = 1;
  bool cuda_graph = false;
  std::string profile;
  xdino::ssl::RecipeOptions recipe;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    XDINO_CHECK_ARG(i + 1 < argc, k, " needs a value");
    const std::string v = argv[i + 1];
    if (k == "--arch")
      archs = v;
    else if (k == "--out_dim")
      dims = v;
    else if (k == "--batch")
      batch = whole_number(k, v);
    else if (k == "--steps")
      steps = whole_number(k, v);
    else if (k == "--warmup")
      warmup = whole_number(k, v);
    else if (k == "--global_size")
      global = whole_number(k, v);
    else if (k == "--local_size")
      local = whole_number(k, v);
    else if (k == "--locals")
      locals = whole_number(k, v, 0);
    else if (k == "--head_hidden_dim")
      head_hidden = whole_number(k, v);
    else if (k == "--replicas")
      replicas = whole_number(k, v);
    else if (k == "--threads")
      at::set_num_threads(static_cast<int>(whole_number(k, v)));
    else if (k == "--profile")
      profile = v;
    else if (k == "--device")
      device = v;
    else if (k == "--precision")
      precision = v;
    else if (k == "--xca")
      xca = v;
    else if (k == "--kernels")
      kernels = v;
    else if (k == "--koleo_loss_weight")
      recipe.koleo_loss_weight = std::stod(v);
    else if (k == "--centering")
      recipe.centering = v;
    else if (k == "--ibot_loss_weight")
      recipe.ibot_loss_weight = std::stod(v);
    else if (k == "--ibot_separate_head")
      recipe.ibot_separate_head = v == "true";
    else if (k == "--cuda_graph") {
      XDINO_CHECK_ARG(v == "true" || v == "false", "--cuda_graph takes true or false, got ", v);
      cuda_graph = v == "true";
    } else
      XDINO_FAIL_ARG("unknown option ", k,
                     " (see the comment at the top of bench/cpp/bench_train.cpp)");
  }
  // dino train's own resolution of --device/--precision (its --use_fp16 defaults to true).
  XDINO_CHECK_ARG(xca == "auto" || xca == "ops" || xca == "sdpa", "--xca ", xca,
                  " is not one of auto, ops, sdpa");
  const auto xca_attention = xca == "ops"    ? xdino::models::XcaAttention::kOps
                             : xca == "sdpa" ? xdino::models::XcaAttention::kSdpa
                                             : xdino::models::XcaAttention::kAuto;
  XDINO_CHECK_ARG(kernels == "auto" || kernels == "ops" || kernels == "fused", "--kernels ",
                  kernels, " is not one of auto, ops, fused");
  const auto layer_kernels = kernels == "ops"     ? xdino::models::LayerKernels::kOps
                             : kernels == "fused" ? xdino::models::LayerKernels::kFused
                                                  : xdino::models::LayerKernels::kAuto;
  const xdino::train::PrecisionPlan plan = xdino::train::resolve_precision(device, precision, true);
  if (cuda_graph) warmup = std::max<int64_t>(warmup, xdino::ssl::kGraphEagerSteps + 1);
  xdino::log::set_level(xdino::log::Level::kWarn);
  // A world of 1 without a launcher's variables.
  const auto comm = xdino::distributed::connect(xdino::distributed::dist_config_from_env());
  if (comm->is_main())
    std::printf("%s\nintra-op threads: %d\n%s\n", xdino::blas_summary().c_str(),
                at::get_num_threads(), plan.describe().c_str());
  const auto out =
      std::filesystem::temp_directory_path() / ("xdino_bench_train." + std::to_string(::getpid()));
  for (const auto& arch : split(archs)) {
    for (const auto& dim : split(dims)) {
      std::filesystem::remove_all(out);
      std::filesystem::create_directories(out);
      xdino::ssl::DinoOptions o;
      o.arch = arch;
      o.head.out_dim = whole_number("--out_dim", dim);
      o.batch_size_per_gpu = batch;
      o.head.hidden_dim = head_hidden;
      o.global_crops_size = global;
      o.local_crops_size = local;
      o.local_crops_number = locals;
      o.epochs = 1;
      o.warmup_epochs = 0;
      o.freeze_last_layer = 0;
      o.saveckp_freq = 0;
      o.device = device;
      o.precision = precision;
      o.output_dir = out.string();
      o.replicas = replicas;
      o.recipe = recipe;
      o.cuda_graph = cuda_graph;
      auto data =
          std::make_shared<FixedCrops>(warmup + steps, batch, global, local, locals, plan.device);
      xdino::compat::reset_peak_memory(plan.device);
      xdino::ssl::Trainer trainer(
          o,
          [&](const xdino::models::BackboneOptions& bo) {
            xdino::models::BackboneOptions paths = bo;
            paths.xca_attention = xca_attention;
            paths.layer_kernels = layer_kernels;
            return xdino::models::create_backbone(arch, paths);
          },
          data, comm);
      // Each step all-reduces every trainable gradient (fp32), the center and two flags.
      int64_t allreduce_bytes = (o.head.out_dim + 2) * 4;
      for (const auto& p : trainer.student()->parameters())
        if (p.requires_grad()) allreduce_bytes += p.numel() * 4;
      StepTimes at_warmup;
#ifdef XDINO_WITH_CUDA
      std::unique_ptr<KernelProfile> recording;
      double kernel_seconds = -1;
#elif defined(XDINO_HAVE_RECORD_PROFILE)
      std::unique_ptr<torch::autograd::profiler::RecordProfile> recording;
#endif
      const std::string trace = profile + "." + arch + "." + dim + ".json";
      std::chrono::steady_clock::time_point t0;
      double wall = 0;
      // On the CPU: heap bytes the forward and loss leave alive for backward (the activations
      // autograd saved, autocast copies, outputs), largest over the timed steps.
      int64_t heap_at_step_end = 0, retained = 0;
      const auto after_forward = [&](int64_t it, torch::Tensor&, torch::Tensor&) {
        if (!plan.device.is_cpu() || it < warmup) return;
        retained = std::max(retained, heap_in_use() - heap_at_step_end);
      };
      trainer.set_hooks(
          {after_forward, [&](int64_t it) {
             xdino::compat::synchronize(plan.device);
             heap_at_step_end = heap_in_use();
             if (it + 1 == warmup) {
               at_warmup = trainer.times();
#ifdef XDINO_WITH_CUDA
               if (!profile.empty()) recording = std::make_unique<KernelProfile>();
#elif defined(XDINO_HAVE_RECORD_PROFILE)
               if (!profile.empty())
                 recording = std::make_unique<torch::autograd::profiler::RecordProfile>(trace);
#endif
               t0 = std::chrono::steady_clock::now();
             }
             if (it + 1 == warmup + steps) {
               wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
#ifdef XDINO_WITH_CUDA
               if (recording) kernel_seconds = recording->stop(trace);
#endif
#if defined(XDINO_WITH_CUDA) || defined(XDINO_HAVE_RECORD_PROFILE)
               recording.reset();
#endif
             }
           }});
      trainer.train();
      const StepTimes t = trainer.times().since(at_warmup);
      const double n = static_cast<double>(t.steps);
      std::string extra;
      const int64_t peak = xdino::compat::peak_allocated_bytes(plan.device);
      if (peak >= 0) extra = ", \"peak_allocated_mib\": " + std::to_string(peak / (1024 * 1024));
      if (plan.device.is_cpu())
        extra = ", \"forward_retained_mib\": " + std::to_string(retained / (1024 * 1024));
      if (!comm->is_main()) continue;
      // The step's work as docs/flops.md counts it (ssl/step_flops.h), and what this rank did
      // of it per second: MFU is tflops_per_sec over the device's peak.
      xdino::ssl::DINOHeadOptions head = o.head;
      head.in_dim = trainer.student()->backbone->embed_dim();
      const double step_flops =
          xdino::ssl::dino_step_flops(*trainer.student()->backbone, head, o, batch).total();
      char work[96];
      std::snprintf(work, sizeof work, ", \"tflop_per_step\": %.4f, \"tflops_per_sec\": %.3f",
                    step_flops / 1e12, step_flops * n / wall / 1e12);
      extra += work;
#ifdef XDINO_WITH_CUDA
      if (kernel_seconds >= 0 && !plan.device.is_cpu()) {
        std::snprintf(work, sizeof work,
                      ", \"gpu_kernel_sec_per_step\": %.4f, \"gpu_idle_fraction\": %.3f",
                      kernel_seconds / n, 1.0 - kernel_seconds / wall);
        extra += work;
      }
#endif
      if (comm->world_size() > 1)
        extra += ", \"world\": " + std::to_string(comm->world_size()) +
                 ", \"allreduce_bytes_per_step\": " + std::to_string(allreduce_bytes) +
                 ", \"grad_wait_sec\": " + std::to_string(t.grad_wait / n);
      if (recipe.any()) extra += ", \"recipe\": \"" + xdino::ssl::describe_recipe(recipe) + "\"";
      if (cuda_graph) extra += ", \"cuda_graph\": true";
      std::printf(
          "{\"arch\": \"%s\", \"out_dim\": %s, \"batch\": %ld, \"threads\": %d, \"replicas\": %ld, "
          "\"device\": \"%s\", \"precision\": \"%s\", "
          "\"sec_per_step\": %.4f, \"images_per_sec\": %.3f, \"data_sec\": %.4f, "
          "\"forward_sec\": %.4f, \"backward_sec\": %.4f, \"optimizer_sec\": %.4f, "
          "\"ema_sec\": %.4f%s}\n",
          arch.c_str(), dim.c_str(), static_cast<long>(batch), at::get_num_threads(),
          static_cast<long>(replicas), plan.device.str().c_str(), precision_name(plan).c_str(),
          wall / n, static_cast<double>(batch) * n / wall, t.data / n, t.forward / n,
          t.backward / n, t.optimizer / n, t.ema / n, extra.c_str());
      std::fflush(stdout);
    }
  }
  std::filesystem::remove_all(out);
  comm->finalize();
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const xdino::UsageError& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
}
