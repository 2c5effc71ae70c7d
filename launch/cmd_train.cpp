// `dino train`: DINO pretraining. Flags keep main_dino.py's names, meanings and defaults.
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "augment/data/loader.h"
#include "augment/data/open_dataset.h"
#include "augment/sample_transforms.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/curves.h"
#include "eval/online_knn.h"
#include "launch/command.h"
#include "launch/session.h"
#include "models/registry.h"
#include "ssl/trainer.h"

namespace xdino::launch {
namespace {

// The multi-crop loader seen through the trainer's DataSource interface.
class LoaderSource : public ssl::DataSource {
 public:
  LoaderSource(augment::DatasetPtr dataset, augment::SampleTransform transform,
               augment::LoaderOptions options, int rank, int world)
      : loader_(std::move(dataset), std::move(transform), options, rank, world) {}
  int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  void start_epoch(int64_t epoch, int64_t first_batch) override {
    loader_.start_epoch(epoch, first_batch);
  }
  std::vector<torch::Tensor> next_batch() override {
    auto batch = loader_.next();
    XDINO_CHECK(batch.has_value(), "the data loader ended the epoch before batch ",
                loader_.batches_per_epoch());
    return std::move(batch->views);
  }

 private:
  augment::DataLoader loader_;
};

// DinoOptions' crop flags as the augmentation's options (the rest keep DINO's defaults).
augment::MultiCropOptions multi_crop_options(const ssl::DinoOptions& o) {
  augment::MultiCropOptions mo;
  static_cast<CropSizes&>(mo) = o;  // the crop flags, one assignment
  XDINO_CHECK_ARG(
      o.blur_sigma.size() == 2 && o.blur_sigma[0] > 0 && o.blur_sigma[0] <= o.blur_sigma[1],
      "--blur_sigma takes two values 0 < min <= max (pixels), got ", o.blur_sigma.size(),
      " values");
  mo.blur_sigma_min = o.blur_sigma[0];
  mo.blur_sigma_max = o.blur_sigma[1];
  return mo;
}

// The online k-NN monitor's flags (ours; docs/dino.md, "Watching it learn").
struct MonitorFlags {
  int64_t knn_every = 0;
  int64_t knn_train_samples = 5000;
  int64_t knn_val_samples = 1000;
  std::string knn_data_path;  // "": --data_path
};

// Wires eval::OnlineKnn and curves.png into the trainer's epoch callbacks.
class LearningMonitor {
 public:
  LearningMonitor(const ssl::DinoOptions& o, const MonitorFlags& m, Communicator& comm,
                  torch::Device device)
      : o_(o), m_(m), comm_(comm), device_(device), dir_(o.output_dir) {
    XDINO_CHECK_ARG(m.knn_every >= 0, "--knn_every must be >= 0 (0 disables), got ", m.knn_every);
    if (m.knn_every == 0) return;
    eval::OnlineKnnOptions ko;
    ko.data_path = m.knn_data_path.empty() ? o.data_path : m.knn_data_path;
    ko.train_samples = m.knn_train_samples;
    ko.val_samples = m.knn_val_samples;
    ko.image_size = o.global_crops_size;
    ko.num_workers = o.num_workers;
    knn_ = eval::OnlineKnn::open(ko);
  }

  // Before a run that starts from scratch: the initial teacher and raw pixels on the same
  // subsets, the reference lines of curves.png.
  void measure_reference(models::Backbone& teacher) {
    if (!knn_ || std::filesystem::exists(dir_ / "checkpoint.pth")) return;
    const auto random = knn_->measure(teacher, comm_, device_);
    const auto pixels = knn_->pixels(comm_);
    if (comm_.is_main()) {
      Json j = Json::object();
      j["knn_top1_random"] = random.top1;
      j["knn_top1_pixels"] = pixels.top1;
      j["k"] = knn_->options().k;
      j["knn_train"] = random.num_train;
      j["knn_val"] = random.num_val;
      write_file_atomically(dir_ / "knn_reference.json", python_dumps(j, 2) + "\n");
      log::info("online k-NN before training (", random.num_train, " train / ", random.num_val,
                " val images, ", knn_->options().k, "-NN): initial teacher ", random.top1,
                "%, raw pixels ", pixels.top1, "% (", random.seconds + pixels.seconds, " s)");
    }
    last_ = Clock::now();
  }

  ssl::EpochCallbacks callbacks() {
    ssl::EpochCallbacks c;
    c.measure = [this](models::Backbone& teacher, int64_t epoch) {
      Json j = Json::object();
      if (!knn_ || ((epoch + 1) % m_.knn_every != 0 && epoch + 1 != o_.epochs)) return j;
      const double epoch_seconds = std::chrono::duration<double>(Clock::now() - last_).count();
      const auto r = knn_->measure(teacher, comm_, device_);
      j["knn_top1"] = r.top1;
      j["knn_top5"] = r.top5;
      j["knn_train"] = r.num_train;
      j["knn_val"] = r.num_val;
      // No wall-clock time in log.txt: a run stopped and resumed writes the same file as one
      // that was not (tests/test_crash_consistency.cpp). The cost goes to the console.
      if (comm_.is_main())
        log::info("online k-NN after epoch ", epoch, " (teacher, ", knn_->options().k, "-NN, ",
                  r.num_train, "/", r.num_val, " images): top-1 ", r.top1, "% in ", r.seconds,
                  " s, ", 100.0 * r.seconds / std::max(epoch_seconds, 1e-9),
                  "% of the training time since the last measurement");
      last_ = Clock::now();
      return j;
    };
    c.logged = [this](int64_t) {
      if (comm_.is_main()) eval::write_training_curves(dir_);
    };
    return c;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const ssl::DinoOptions& o_;
  const MonitorFlags& m_;
  Communicator& comm_;
  torch::Device device_;
  std::filesystem::path dir_;
  std::unique_ptr<eval::OnlineKnn> knn_;
  Clock::time_point last_ = Clock::now();
};

class TrainCommand : public Command {
 public:
  void declare(Flags& f) override {
    ssl::DinoOptions& o = opt_;
    f.add("arch", &o.arch, "backbone: " + models::backbone_list(/*with_pixels=*/false))
        .add("patch_size", &o.patch_size, models::patch_size_help())
        .add("out_dim", &o.head.out_dim, "dimensionality of the DINO head output")
        .add("norm_last_layer", &o.head.norm_last_layer,
             "weight-normalise the head's last layer with a fixed unit norm")
        .add("momentum_teacher", &o.momentum_teacher,
             "base EMA momentum of the teacher, raised to 1 by a cosine schedule")
        .add("use_bn_in_head", &o.head.use_bn, "BatchNorm in the projection head")
        .add("head_hidden_dim", &o.head.hidden_dim,
             "width of the head's hidden layers (main_dino.py: 2048; smaller for CPU runs)")
        .add("head_bottleneck_dim", &o.head.bottleneck_dim,
             "width of the head's L2-normalised bottleneck (main_dino.py: 256)")
        .add("warmup_teacher_temp", &o.loss.warmup_teacher_temp, "initial teacher temperature")
        .add("teacher_temp", &o.loss.teacher_temp, "teacher temperature after the warmup")
        .add("warmup_teacher_temp_epochs", &o.loss.warmup_teacher_temp_epochs,
             "epochs of linear teacher-temperature warmup")
        .add("use_fp16", &o.use_fp16,
             "mixed precision on CUDA: fp16 autocast + dynamic loss scaling (ignored on CPU)")
        .add("precision", &o.precision,
             "auto (use_fp16 decides on CUDA, fp32 on CPU), fp32, bf16 (autocast, no loss "
             "scaling; CPU or CUDA) or fp16 (CUDA); overrides use_fp16 unless auto")
        .add("device", &o.device, "auto (this process's GPU if any, else the CPU), cpu, cuda:N")
        .add("weight_decay", &o.weight_decay, "initial weight decay")
        .add("weight_decay_end", &o.weight_decay_end, "final weight decay (cosine schedule)")
        .add("clip_grad", &o.clip_grad, "per-parameter gradient norm clip (0 disables)")
        .add("batch_size_per_gpu", &o.batch_size_per_gpu, "images per process and step")
        .add("epochs", &o.epochs, "training epochs")
        .add("freeze_last_layer", &o.freeze_last_layer,
             "epochs during which the head's last layer is not updated")
        .add("lr", &o.lr, "peak learning rate per 256 images (scaled by the total batch)")
        .add("warmup_epochs", &o.warmup_epochs, "epochs of linear learning-rate warmup")
        .add("min_lr", &o.min_lr, "final learning rate of the cosine schedule")
        .add("optimizer", &o.optimizer, "adamw, sgd or lars")
        .add("drop_path_rate", &o.drop_path_rate, "stochastic depth rate of the student")
        .add("global_crops_scale", &o.global_crops_scale,
             "area range of the global crops (RandomResizedCrop scale)")
        .add("local_crops_number", &o.local_crops_number, "number of local crops (0 disables)")
        .add("local_crops_scale", &o.local_crops_scale, "area range of the local crops")
        .add("global_crops_size", &o.global_crops_size, "side of the global crops in pixels")
        .add("local_crops_size", &o.local_crops_size, "side of the local crops in pixels")
        .add("blur_sigma", &o.blur_sigma,
             "Gaussian blur sigma range in pixels (main_dino.py: 0.1 2.0, for 224-pixel crops; "
             "scale it with the crop size)")
        .add("data_path", &o.data_path, "training data: " + augment::dataset_layouts())
        .add("max_samples", &o.max_samples,
             "train on a class-balanced subset of this many images (0: all)")
        .add("output_dir", &o.output_dir,
             "where logs and checkpoints go; rerunning with a checkpoint.pth there resumes")
        .add("saveckp_freq", &o.saveckp_freq, "keep checkpointNNNN.pth every this many epochs")
        .add("seed", &o.seed, "random seed")
        .add("num_workers", &o.num_workers, "data loading threads per process")
        .add("replicas", &o.replicas,
             "CPU: split each process's batch over this many threads that share the networks "
             "(the same step, computed on that many cores at once; 0: one per core)")
        .add("knn_every", &monitor_.knn_every,
             "online k-NN of the teacher every this many epochs and after the last (0: off); "
             "log.txt gets knn_top1, curves.png the curve")
        .add("knn_train_samples", &monitor_.knn_train_samples,
             "online k-NN: class-balanced training images in its bank")
        .add("knn_val_samples", &monitor_.knn_val_samples,
             "online k-NN: class-balanced val images it classifies")
        .add("knn_data_path", &monitor_.knn_data_path,
             "online k-NN: labelled data with train and val splits (default: --data_path)");
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    ssl::DinoOptions o = opt_;
    // main_dino.py: "we changed the name DeiT-S for ViT-S to avoid confusions".
    if (o.arch.rfind("deit", 0) == 0) o.arch = "vit" + o.arch.substr(4);

    const Session session = start_session(dist_);
    if (o.device == "auto") o.device = session.device.str();
    if (o.replicas == 0) o.replicas = auto_replicas(session, o.batch_size_per_gpu);
    const auto& comm = session.comm;
    write_config(flags, o.output_dir, *comm);

    augment::DatasetOptions dataset_options;
    dataset_options.max_samples = o.max_samples;
    const auto dataset = augment::open_dataset(o.data_path, "train", dataset_options);
    log::info("Data loaded: ", dataset->describe());
    augment::LoaderOptions lo;
    lo.batch_size = o.batch_size_per_gpu;
    lo.num_workers = o.num_workers;
    lo.seed = o.seed;
    auto data = std::make_shared<LoaderSource>(dataset,
                                               augment::multi_crop_transform(multi_crop_options(o)),
                                               lo, comm->rank(), comm->world_size());

    ssl::Trainer trainer(
        o, [&](const models::BackboneOptions& bo) { return models::create_backbone(o.arch, bo); },
        data, comm);
    LearningMonitor monitor(o, monitor_, *comm, trainer.precision().device);
    monitor.measure_reference(*trainer.teacher()->backbone);
    trainer.set_epoch_callbacks(monitor.callbacks());
    trainer.train();
    comm->finalize();
    return 0;
  }

 private:
  ssl::DinoOptions opt_;
  MonitorFlags monitor_;
  distributed::DistOptions dist_;
};

}  // namespace

std::unique_ptr<Command> make_train_command() { return std::make_unique<TrainCommand>(); }

}  // namespace xdino::launch
