#include "eval/linear_eval.h"

#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <vector>

#include "augment/data/dataset.h"
#include "augment/data/loader.h"
#include "augment/eval_transforms.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "core/paths.h"
#include "eval/extract.h"
#include "eval/features_io.h"
#include "eval/linear_checkpoint.h"

namespace xdino::eval {
namespace fs = std::filesystem;

const char* const kOfficialLinearProtocol =
    "official (eval_linear.py): frozen backbone, RandomResizedCrop + flip, SGD, cosine";
const char* const kCachedLinearProtocol = "cached-features (fast, not the official protocol)";

namespace {

// "<path> (<size> bytes, CRC-32 <hex>)": the file's identity by content, so a checkpoint
// retrained in place at the same path is another input. Reads the file once (~1 GB/s).
// A file by its content alone: the same weights named by a relative or an absolute path, or
// copied elsewhere, are the same features.
std::string file_identity(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  XDINO_CHECK(in.good(), "cannot read ", path);
  std::vector<char> buffer(1 << 20);
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t size = 0;
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer.data()), static_cast<uInt>(in.gcount()));
    size += static_cast<uint64_t>(in.gcount());
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc));
  return "(" + std::to_string(size) + " bytes, CRC-32 " + hex + ")";
}

// Probes written before identities were by content named the file too ("weights PATH (N
// bytes, CRC-32 X)"): compare them without it.
std::string without_paths(const std::string& identity) {
  static const std::regex named(R"((weights|features) .*? (\(\d+ bytes, CRC-32 [0-9a-f]+\)))");
  return std::regex_replace(identity, named, "$1 $2");
}

// Moves the whole record of a probe trained on other features out of the way, into
// <output_dir>/replaced/<n>/ (its checkpoint, log, result, config.ini and TensorBoard events),
// so that nothing a user finished is overwritten or pruned.
fs::path set_aside_probe(const fs::path& out_dir) {
  fs::path aside;
  for (int n = 1;; ++n) {
    aside = out_dir / "replaced" / std::to_string(n);
    if (!fs::exists(aside)) break;
  }
  fs::create_directories(aside);
  std::vector<fs::path> record;
  for (const char* name : {"checkpoint.pth", "log.txt", "linear.json", "config.ini"})
    if (fs::exists(out_dir / name)) record.push_back(out_dir / name);
  for (const auto& e : fs::directory_iterator(out_dir))
    if (e.is_regular_file() && e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
      record.push_back(e.path());
  for (const fs::path& p : record) fs::rename(p, aside / p.filename());
  return aside;
}

// What the probe learns from (LinearCheckpointInfo::features): the stored features, or the
// backbone and how its features are taken.
std::string features_identity(const LinearEvalOptions& o) {
  if (!o.load_features.empty()) return "features " + file_identity(o.load_features);
  const BackboneSpec& m = o.model;
  std::ostringstream os;
  os << m.arch << " patch " << m.patch_size << ", "
     << (m.pretrained_weights.empty()
             ? "random weights (seed " + std::to_string(m.seed) + ")"
             : "weights " + file_identity(m.pretrained_weights) + " key '" + m.checkpoint_key + "'")
     << ", " << o.n_last_blocks << " last blocks" << (o.avgpool_patchtokens ? " + avgpool" : "")
     << ", " << (o.cached_features ? "cached" : "augmented") << " at " << o.input.image_size
     << " px";
  return os.str();
}

// Batches of images from the augment loader, turned into classifier inputs by the frozen
// backbone under no-grad.
class BackboneBatches : public FeatureBatches {
 public:
  BackboneBatches(augment::DatasetPtr data, augment::SampleTransform transform,
                  augment::LoaderOptions lo, int rank, int world, models::Backbone& model,
                  const LinearEvalOptions& o, torch::Device device)
      : loader_(std::move(data), std::move(transform), lo, rank, world),
        model_(model),
        n_(o.n_last_blocks),
        avgpool_(o.avgpool_patchtokens),
        device_(device) {}

  void start_epoch(int64_t epoch) override { loader_.start_epoch(epoch); }
  bool next(torch::Tensor& features, torch::Tensor& targets) override {
    std::optional<augment::Batch> b = loader_.next();
    if (!b) return false;
    torch::NoGradGuard no_grad;
    const torch::Tensor x = b->views[0].to(device_, torch::kFloat32, /*non_blocking=*/true);
    features = model_.linear_features(x, n_, avgpool_).reshape({x.size(0), -1});
    targets = b->labels.to(device_);
    return true;
  }
  int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }

 private:
  augment::DataLoader loader_;
  models::Backbone& model_;
  int64_t n_;
  bool avgpool_;
  torch::Device device_;
};

// This process's contiguous share of the validation set: every image counted exactly once.
augment::DatasetPtr val_shard(const augment::DatasetPtr& val, const Communicator& comm) {
  if (comm.world_size() == 1) return val;
  const int64_t n = val->size(), per = (n + comm.world_size() - 1) / comm.world_size();
  std::vector<int64_t> idx;
  for (int64_t i = per * comm.rank(); i < std::min(n, per * (comm.rank() + 1)); ++i)
    idx.push_back(i);
  return std::make_shared<augment::SubsetDataset>(val, std::move(idx));
}

augment::LoaderOptions loader_options(const LinearEvalOptions& o, bool shuffle,
                                      torch::Device device) {
  augment::LoaderOptions lo = o.input.loader(device);
  lo.shuffle = shuffle;
  lo.seed = o.seed;
  return lo;
}

// Rank 0's cached features, copied to every process (each trains on its shard).
FeatureSet share(FeatureSet set, Communicator& comm, torch::Device device) {
  if (comm.world_size() == 1) return set;
  torch::Tensor shape = comm.is_main() ? torch::tensor({set.features.size(0), set.features.size(1)})
                                       : torch::zeros({2}, torch::kInt64);
  std::vector<torch::Tensor> s{shape.to(device)};
  comm.broadcast(s, 0);
  const auto dims = s[0].to(torch::kCPU);
  const int64_t n = dims[0].item<int64_t>(), c = dims[1].item<int64_t>();
  std::vector<torch::Tensor> t{
      comm.is_main() ? set.features.to(device) : torch::empty({n, c}, torch::kFloat32).to(device),
      comm.is_main() ? set.labels.to(device) : torch::empty({n}, torch::kInt64).to(device)};
  comm.broadcast(t, 0);
  set.features = t[0].to(torch::kCPU);
  set.labels = t[1].to(torch::kCPU);
  return set;
}

Json epoch_line(const EpochStats& e) {
  Json j = Json::object();
  j["train_lr"] = e.train_lr;
  j["train_loss"] = e.train_loss;
  j["epoch"] = e.epoch;
  if (e.test) {
    j["test_loss"] = e.test->loss;
    j["test_acc1"] = e.test->acc1;
    if (!std::isnan(e.test->acc5)) j["test_acc5"] = e.test->acc5;
  }
  return j;
}

Json nan_null(double v) { return std::isnan(v) ? Json() : Json(v); }

// What a protocol hands to the probe: the facts linear.json records, and how to make the
// batches (made after the classifier, so that its seeded draw comes first).
struct ProbeInputs {
  int64_t classes = 0, dim = 0, num_train = 0, num_val = 0;
  std::function<std::unique_ptr<FeatureBatches>()> train_batches, val_batches;
};

// The official protocol: the frozen backbone on augmented training images (RandomResizedCrop +
// flip) and centre-cropped validation images, every epoch.
ProbeInputs official_inputs(const LinearEvalOptions& o, Communicator& comm, torch::Device device) {
  FrozenBackbone frozen = load_frozen_backbone(o.model, o.input, device);
  const std::shared_ptr<models::Backbone> model = frozen.model;
  const ImageInput input = frozen.input;  // the lambdas below keep copies of both
  augment::DatasetPtr train_data;
  if (!o.evaluate) train_data = input.open(o.data_path, "train", o.subset.of("train"));
  const augment::DatasetPtr val_data = input.open(o.data_path, "val", o.subset.of("val"));
  ProbeInputs in;
  in.classes = val_data->num_classes();
  if (train_data) in.classes = std::max(in.classes, train_data->num_classes());
  {
    torch::NoGradGuard no_grad;
    const auto probe =
        torch::zeros({1, model->in_chans(), input.image_size, input.image_size}, device);
    in.dim = model->linear_features(probe, o.n_last_blocks, o.avgpool_patchtokens).numel();
  }
  in.num_train = train_data ? train_data->size() : 0;
  in.num_val = val_data->size();
  in.val_batches = [&o, &comm, device, model, val_data,
                    input]() -> std::unique_ptr<FeatureBatches> {
    return std::make_unique<BackboneBatches>(
        val_shard(val_data, comm), input.transform(model->in_chans()),
        loader_options(o, false, device), 0, 1, *model, o, device);
  };
  in.train_batches = [&o, &comm, device, model, train_data,
                      input]() -> std::unique_ptr<FeatureBatches> {
    augment::LinearTrainOptions lt;
    lt.crop_size = input.image_size;
    lt.normalization = input.normalization(model->in_chans());
    const auto train_tf = std::make_shared<const augment::LinearTrainTransform>(lt);
    return std::make_unique<BackboneBatches>(
        train_data,
        [train_tf](const augment::Image& im, augment::Rng& rng) {
          return std::vector<torch::Tensor>{(*train_tf)(im, rng)};
        },
        loader_options(o, true, device), comm.rank(), comm.world_size(), *model, o, device);
  };
  return in;
}

// The cached-features mode (ours, fast, not the official protocol): features of both splits
// computed once without augmentation (or read with --load_features; dumped with
// --dump_features), held by every process.
ProbeInputs cached_inputs(const LinearEvalOptions& o, const ExtractOptions& ex, Communicator& comm,
                          torch::Device device) {
  FeatureSet train_set, val_set;
  if (!o.load_features.empty()) {
    if (comm.is_main()) {
      train_set = read_features(fs::path(o.load_features) / "trainfeat.h5");
      val_set = read_features(fs::path(o.load_features) / "testfeat.h5");
      XDINO_CHECK_ARG(!train_set.attributes.normalized, "--load_features ", o.load_features,
                      " holds L2-normalised (k-NN) features; "
                      "the linear probe takes unnormalised ones (dino linear --cached_features "
                      "true --dump_features DIR)");
    }
  } else {
    const FrozenBackbone frozen = load_frozen_backbone(o.model, o.input, device);
    const std::shared_ptr<models::Backbone>& model = frozen.model;
    const ImageInput& input = frozen.input;
    const auto train_data = input.open(o.data_path, "train", o.subset.of("train"));
    const auto val_data = input.open(o.data_path, "val", o.subset.of("val"));
    train_set = extract_features(*model, train_data, ex, comm, device);
    val_set = extract_features(*model, val_data, ex, comm, device);
    if (comm.is_main() && !o.dump_features.empty()) {
      fs::create_directories(o.dump_features);
      set_model_attributes(train_set.attributes, o.model, "train");
      set_model_attributes(val_set.attributes, o.model, "val");
      write_features(fs::path(o.dump_features) / "trainfeat.h5", train_set);
      write_features(fs::path(o.dump_features) / "testfeat.h5", val_set);
    }
  }
  auto train = std::make_shared<FeatureSet>(share(std::move(train_set), comm, device));
  auto val = std::make_shared<FeatureSet>(share(std::move(val_set), comm, device));
  ProbeInputs in;
  in.classes = std::max(train->labels.max().item<int64_t>(), val->labels.max().item<int64_t>()) + 1;
  in.dim = train->features.size(1);
  in.num_train = train->features.size(0);
  in.num_val = val->features.size(0);
  in.val_batches = [&o, &comm, device, val]() -> std::unique_ptr<FeatureBatches> {
    return std::make_unique<CachedBatches>(val->features, val->labels, o.input.batch_size, false, 0,
                                           comm.rank(), comm.world_size(), device);
  };
  in.train_batches = [&o, &comm, device, train]() -> std::unique_ptr<FeatureBatches> {
    return std::make_unique<CachedBatches>(train->features, train->labels, o.input.batch_size, true,
                                           o.seed, comm.rank(), comm.world_size(), device);
  };
  return in;
}

// --evaluate: the stored classifier on the validation batches.
LinearEvalResult evaluate_stored(const LinearEvalOptions& o, LinearClassifier& classifier,
                                 FeatureBatches& val, Communicator& comm) {
  const fs::path weights = o.linear_weights.empty() ? fs::path(o.output_dir) / "checkpoint.pth"
                                                    : fs::path(o.linear_weights);
  const std::string problem = file_problem(weights);
  XDINO_CHECK_ARG(problem.empty(), "--evaluate: linear weights '", weights.string(), "' ", problem,
                  " (--linear_weights; eval_linear.py would download reference "
                  "weights, this build never downloads)");
  load_linear_weights(weights, classifier);
  const ValidationStats s = validate_linear(classifier, val, comm);
  log::info("Accuracy of the network on the ", s.samples, " test images: ", s.acc1, "%");
  LinearEvalResult result;
  result.outcome.best_acc = s.acc1;
  result.outcome.best_acc5 = s.acc5;
  return result;
}

// linear.json: the protocol, the model, the data's sizes, the schedule, best and last epochs.
Json result_json(const LinearEvalOptions& o, const ExtractOptions& ex, const ProbeInputs& in,
                 const char* protocol, const LinearOutcome& r, int world_size, double base_lr,
                 double seconds) {
  Json j = Json::object();
  j["protocol"] = protocol;
  add_model_fields(j, o.model, o.input.image_size);
  j["feature"] = feature_description(ex);
  j["feature_dim"] = in.dim;
  j["num_labels"] = o.num_labels;
  j["num_train"] = in.num_train;
  j["num_val"] = in.num_val;
  j["epochs"] = o.epochs;
  j["lr"] = o.lr;
  j["batch_size_per_gpu"] = o.input.batch_size;
  j["world_size"] = world_size;
  j["scaled_lr"] = base_lr;
  j["best"] = Json{{"epoch", r.best_epoch}, {"acc1", r.best_acc}, {"acc5", nan_null(r.best_acc5)}};
  Json last = Json::object();
  if (r.last) {
    last["epoch"] = r.last->epoch;
    last["train_loss"] = r.last->train_loss;
    if (r.last->test) {
      last["test_loss"] = r.last->test->loss;
      last["acc1"] = r.last->test->acc1;
      last["acc5"] = nan_null(r.last->test->acc5);
    }
  }
  j["last"] = last;
  j["seconds"] = seconds;
  return j;
}

}  // namespace

LinearEvalResult run_linear_eval(const LinearEvalOptions& o, Communicator& comm,
                                 torch::Device device, const ChecksPassed& checks_passed) {
  const auto begin = std::chrono::steady_clock::now();
  XDINO_CHECK_ARG(o.num_labels >= 1, "--num_labels must be >= 1, got ", o.num_labels);
  XDINO_CHECK_ARG(o.load_features.empty() || o.cached_features,
                  "--load_features needs --cached_features true (the official protocol "
                  "augments images, so it cannot start from stored features)");
  if (o.load_features.empty()) models::check_arch(o.model.arch);
  o.input.check();
  const bool cached = o.cached_features;
  const char* protocol = cached ? kCachedLinearProtocol : kOfficialLinearProtocol;
  if (cached)
    log::warn(
        "--cached_features: training on features computed once without augmentation. "
        "This is a fast approximation, NOT the official linear protocol.");

  ExtractOptions ex;
  ex.input = o.input;
  ex.normalize = false;
  ex.kind = FeatureKind::kLinear;
  ex.n_last_blocks = o.n_last_blocks;
  ex.avgpool_patchtokens = o.avgpool_patchtokens;
  const ProbeInputs in =
      cached ? cached_inputs(o, ex, comm, device) : official_inputs(o, comm, device);
  XDINO_CHECK_ARG(in.classes <= o.num_labels, "the data has ", in.classes,
                  " classes but --num_labels is ", o.num_labels, ": raise --num_labels");
  if (in.classes < o.num_labels)
    log::info("the data has ", in.classes, " classes; the classifier has --num_labels ",
              o.num_labels, " outputs, as eval_linear.py would");

  torch::manual_seed(static_cast<uint64_t>(o.seed));  // the classifier's N(0, 0.01^2) draw
  LinearClassifier classifier(in.dim, o.num_labels);
  classifier->to(device);
  {  // DDP starts every process from rank 0's initial weights
    std::vector<torch::Tensor> p{classifier->linear->weight.detach(),
                                 classifier->linear->bias.detach()};
    comm.broadcast(p, 0);
  }
  log::info("Linear classifier ", in.dim, " -> ", o.num_labels, " on ", device.str(), " (",
            cached ? "cached features" : "features of augmented images", ")");

  const std::unique_ptr<FeatureBatches> val = in.val_batches();
  if (o.evaluate) return evaluate_stored(o, classifier, *val, comm);
  const std::unique_ptr<FeatureBatches> train = in.train_batches();

  const LinearSchedule& schedule = o;
  const double base_lr = scaled_lr(schedule, o.input.batch_size, comm.world_size());
  auto optimizer = make_linear_optimizer(classifier, base_lr);
  LinearCheckpointInfo info{o.epochs, base_lr, protocol, features_identity(o)};

  const fs::path out_dir(o.output_dir);
  int64_t start_epoch = 0;
  LinearOutcome resumed;
  const fs::path ckpt = out_dir / "checkpoint.pth";
  // eval_linear.py's restart_from_checkpoint, unless the probe there learned from other
  // features: then its epochs and best accuracy belong to another backbone (a pipeline rerun
  // after more pretraining would report them as this one's).
  if (fs::is_regular_file(ckpt)) {
    const std::string trained_on = linear_checkpoint_features(ckpt);
    if (!trained_on.empty() && without_paths(trained_on) != info.features) {
      comm.barrier();  // every process has read it before rank 0 moves it
      if (comm.is_main())
        log::warn(ckpt.string(), " holds a probe trained on other features (", trained_on,
                  "); it is kept in ", set_aside_probe(out_dir).string(), ", and this one (",
                  info.features, ") trains from epoch 0");
    } else {
      start_epoch = restore_linear_checkpoint(ckpt, classifier, *optimizer, resumed);
      log::info("Resuming from ", ckpt.string(), " at epoch ", start_epoch, " (best top-1 so far ",
                resumed.best_acc, "%)");
    }
  }
  notify(checks_passed);  // all checked, the old record aside: config.ini, then the probe's files
  if (comm.is_main()) fs::create_directories(out_dir);

  LinearEvalResult result;
  result.outcome = train_linear(
      classifier, *optimizer, *train, *val, schedule, base_lr, comm, start_epoch, resumed,
      [&](const EpochStats& e, const LinearOutcome& so_far) {
        if (!comm.is_main()) return;
        std::ofstream log_file(out_dir / "log.txt", std::ios::app);
        log_file << python_dumps(epoch_line(e)) << "\n";
        XDINO_CHECK(log_file.good(), "cannot append to ", (out_dir / "log.txt").string());
        save_linear_checkpoint(ckpt, classifier, *optimizer, e.epoch + 1, so_far, info);
      });

  if (comm.is_main()) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    result.json =
        result_json(o, ex, in, protocol, result.outcome, comm.world_size(), base_lr, seconds);
    write_file_atomically(out_dir / "linear.json", python_dumps(result.json, 2) + "\n");
    log::info("Training of the supervised linear classifier on frozen features completed.");
    char acc[32];
    std::snprintf(acc, sizeof acc, "%.1f", result.outcome.best_acc);
    log::info("Top-1 test accuracy: ", acc,
              cached ? " (cached features, not the official protocol)" : "");
  }
  comm.barrier();
  return result;
}

}  // namespace xdino::eval
