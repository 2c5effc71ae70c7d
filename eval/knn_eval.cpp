#include "eval/knn_eval.h"

#include <charconv>
#include <chrono>
#include <filesystem>
#include <optional>

#include "augment/data/dataset.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "core/pth.h"
#include "core/python_format.h"
#include "eval/batch_norm_stats.h"
#include "eval/extract.h"
#include "eval/features_io.h"

namespace xdino::eval {
namespace fs = std::filesystem;
namespace {

// Python's str(float) for the official result lines ("76.04", "100.0").
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

torch::Tensor load_tensor_pth(const fs::path& path) {
  const c10::IValue v = load_pth(path);
  XDINO_CHECK(v.isTensor(), path,
              " holds no tensor (expected what eval_knn.py's "
              "--dump_features writes)");
  return v.toTensor();
}

struct Splits {
  FeatureSet train, test;
};

// The features of --load_features; `model` and `image_size` become the features' own (not the
// flags' defaults) when the files record them.
Splits load_dumped(const std::string& dir_text, BackboneSpec& model, int64_t& image_size) {
  const fs::path dir(dir_text);
  Splits s;
  if (fs::is_regular_file(dir / "trainfeat.h5") && fs::is_regular_file(dir / "testfeat.h5")) {
    s.train = read_features(dir / "trainfeat.h5");
    s.test = read_features(dir / "testfeat.h5");
    const FeatureAttributes& a = s.train.attributes;
    if (!a.arch.empty()) {  // the features' own model, not the flags' defaults
      model.arch = a.arch;
      model.patch_size = a.patch_size;
      image_size = a.image_size;
      model.pretrained_weights = a.checkpoint;
      model.checkpoint_key = a.checkpoint_key;
    }
    return s;
  }
  const char* files[] = {"trainfeat.pth", "testfeat.pth", "trainlabels.pth", "testlabels.pth"};
  for (const char* f : files)
    XDINO_CHECK_ARG(fs::is_regular_file(dir / f), "--load_features '", dir_text,
                    "' holds neither trainfeat.h5 + testfeat.h5 (dino knn --dump_features) nor "
                    "eval_knn.py's dumps (",
                    f, " is missing)");
  s.train.features = load_tensor_pth(dir / files[0]).to(torch::kCPU, torch::kFloat32);
  s.test.features = load_tensor_pth(dir / files[1]).to(torch::kCPU, torch::kFloat32);
  s.train.labels = load_tensor_pth(dir / files[2]).to(torch::kCPU, torch::kInt64);
  s.test.labels = load_tensor_pth(dir / files[3]).to(torch::kCPU, torch::kInt64);
  return s;
}

FeatureSet extract_split(models::Backbone& model, const ImageInput& input, const KnnEvalOptions& o,
                         const augment::DatasetPtr& data, const char* split, Communicator& comm,
                         torch::Device device) {
  ExtractOptions e;
  e.input = input;
  log::info("Extracting features for ", split, " set...");
  FeatureSet f = extract_features(model, data, e, comm, device);
  set_model_attributes(f.attributes, o.model, split);
  return f;
}

// The random-weights reference with the data's BatchNorm statistics (--recalibrate_bn;
// docs/evaluation.md, "The random-weights reference"): the model's BatchNorms recalibrated on
// that many training images, then both splits extracted again.
struct BatchNormReference {
  Splits data;
  int64_t images = 0;  // the statistics' images, over every process
  double seconds = 0;
};

BatchNormReference with_data_batch_norm(models::Backbone& model, const ImageInput& input,
                                        const KnnEvalOptions& o, const augment::DatasetPtr& train,
                                        const augment::DatasetPtr& val, Communicator& comm,
                                        torch::Device device) {
  const auto start = std::chrono::steady_clock::now();
  BatchNormReference r;
  r.images = recalibrate_batch_norm(model, input.open(o.data_path, "train", o.recalibrate_bn),
                                    input, comm, device);
  log::info("Random init with the BatchNorm statistics of the data:");
  r.data.train = extract_split(model, input, o, train, "train", comm, device);
  r.data.test = extract_split(model, input, o, val, "val", comm, device);
  r.seconds = seconds_since(start);
  return r;
}

KnnBackend parse_backend(const std::string& name) {
  if (name == "faiss") return KnnBackend::kFaiss;
  if (name == "torch") return KnnBackend::kTorch;
  XDINO_FAIL_ARG("unknown --knn_backend '", name, "' (expected faiss or torch)");
}

}  // namespace

KnnEvalResult run_knn_eval(const KnnEvalOptions& options, Communicator& comm, torch::Device device,
                           const ChecksPassed& checks_passed) {
  KnnParams params;
  params.ks = options.nb_knn;
  params.temperature = options.temperature;
  params.backend = parse_backend(options.knn_backend);
  reported_k(params.ks);  // rejects an empty --nb_knn before any work
  XDINO_CHECK_ARG(options.dump_features.empty() || options.load_features.empty(),
                  "--dump_features and --load_features exclude each other");
  if (options.load_features.empty()) models::check_arch(options.model.arch);
  options.input.check();
  XDINO_CHECK_ARG(options.recalibrate_bn >= 0, "--recalibrate_bn must be >= 0 (0: off), got ",
                  options.recalibrate_bn);
  const bool random_weights =
      options.load_features.empty() && weights_kind(options.model) == "random";
  XDINO_CHECK_ARG(options.recalibrate_bn == 0 || random_weights,
                  "--recalibrate_bn measures random weights with the BatchNorm statistics of the "
                  "data: it takes no --pretrained_weights, --load_features or pixels");

  BackboneSpec model_spec = options.model;
  int64_t image_size = options.input.image_size;
  const auto t0 = std::chrono::steady_clock::now();
  Splits data;
  std::optional<BatchNormReference> bn;
  std::string batch_norm;  // random weights: "initial" or "none"
  if (!options.load_features.empty()) {
    if (comm.is_main()) data = load_dumped(options.load_features, model_spec, image_size);
  } else {
    // Data first: a wrong --data_path fails before any model work.
    const ImageInput& in = options.input;
    const augment::DatasetPtr train =
        in.open(options.data_path, "train", options.subset.of("train"));
    const augment::DatasetPtr val = in.open(options.data_path, "val", options.subset.of("val"));
    const FrozenBackbone frozen = load_frozen_backbone(options.model, in, device);
    const std::shared_ptr<models::Backbone>& model = frozen.model;
    const ImageInput& input = frozen.input;
    if (random_weights) batch_norm = has_batch_norm(*model) ? "initial" : "none";
    data.train = extract_split(*model, input, options, train, "train", comm, device);
    data.test = extract_split(*model, input, options, val, "val", comm, device);
    if (options.recalibrate_bn > 0 && batch_norm == "none") {
      if (comm.is_main())
        log::info(options.model.arch,
                  " has no BatchNorm: random init is already the reference with the data's "
                  "BatchNorm statistics, measured once (--recalibrate_bn has nothing to do)");
    } else if (options.recalibrate_bn > 0) {
      bn = with_data_batch_norm(*model, input, options, train, val, comm, device);
    }
  }
  const double extraction_s = seconds_since(t0) - (bn ? bn->seconds : 0.0);

  KnnEvalResult result;
  notify(checks_passed);
  if (comm.is_main()) {
    if (!options.dump_features.empty()) {
      fs::create_directories(options.dump_features);
      write_features(fs::path(options.dump_features) / "trainfeat.h5", data.train);
      write_features(fs::path(options.dump_features) / "testfeat.h5", data.test);
      if (bn) {
        write_features(fs::path(options.dump_features) / "trainfeat_data_bn.h5", bn->data.train);
        write_features(fs::path(options.dump_features) / "testfeat_data_bn.h5", bn->data.test);
      }
      log::info("Features dumped to ", options.dump_features);
    }
    const auto classify = [&](const Splits& s) {
      torch::Tensor train = s.train.features, test = s.test.features;
      if (options.use_cuda && device.is_cuda()) {
        train = train.to(device);
        test = test.to(device);
        if (params.backend == KnnBackend::kFaiss && !faiss_has_gpu())
          params.backend = KnnBackend::kTorch;  // no GPU faiss in this build: search with torch
      }
      log::info("Features are ready! Start the k-NN classification (", backend_name(params.backend),
                ", ", train.size(0), " train x ", test.size(0), " test, dim ", train.size(1), ").");
      return knn_classify(train, s.train.labels, test, s.test.labels, params);
    };
    result.knn = classify(data);
    for (const KnnAccuracy& a : result.knn.per_k)
      log::info(a.k, "-NN classifier result: Top1: ", python_repr(a.top1),
                ", Top5: ", python_repr(a.top5));
    if (bn) {
      result.knn_data_batch_norm = classify(bn->data);
      for (const KnnAccuracy& a : result.knn_data_batch_norm->per_k)
        log::info(a.k, "-NN with the BatchNorm statistics of the data: Top1: ", python_repr(a.top1),
                  ", Top5: ", python_repr(a.top5));
    }

    Json& j = result.json = Json::object();
    j["protocol"] = "weighted k-NN (eval_knn.py)";
    add_model_fields(j, model_spec, image_size);
    j["temperature"] = options.temperature;
    j["num_train"] = result.knn.num_train;
    j["num_test"] = result.knn.num_test;
    j["num_classes"] = result.knn.num_classes;
    j["feature_dim"] = result.knn.feature_dim;
    j["backend"] = backend_name(params.backend);
    j["features"] = options.load_features.empty() ? std::string("extracted")
                                                  : "loaded from " + options.load_features;
    const int64_t rk = reported_k(params.ks);
    // results, reported and seconds of one k-NN, into `to`.
    const auto add_results = [&](Json& to, const KnnResult& knn, double seconds) {
      Json list = Json::array();
      Json reported;
      for (const KnnAccuracy& a : knn.per_k) {
        Json r = Json::object();
        r["k"] = a.k;
        r["top1"] = a.top1;
        r["top5"] = a.top5;
        if (a.k == rk && reported.is_null()) reported = r;
        list.push_back(r);
      }
      to["results"] = list;
      to["reported"] = reported;
      to["seconds"] = Json{{"extraction", seconds}, {"knn", knn.seconds}};
    };
    add_results(j, result.knn, extraction_s);
    if (!batch_norm.empty()) j["batch_norm"] = batch_norm;
    if (result.knn_data_batch_norm) {
      Json reference = Json::object();
      reference["images"] = bn->images;
      add_results(reference, *result.knn_data_batch_norm, bn->seconds);
      j["data_batch_norm"] = reference;
    }
    fs::create_directories(options.output_dir);
    write_file_atomically(fs::path(options.output_dir) / "knn.json", python_dumps(j, 2) + "\n");
    log::info("wrote ", (fs::path(options.output_dir) / "knn.json").string());
  }
  comm.barrier();
  return result;
}

}  // namespace xdino::eval
