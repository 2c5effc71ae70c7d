#include "eval/knn_eval.h"

#include <charconv>
#include <chrono>
#include <filesystem>

#include "augment/data/dataset.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "core/pth.h"
#include "core/python_format.h"
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

Splits load_dumped(const std::string& dir_text, BackboneSpec& model) {
  const fs::path dir(dir_text);
  Splits s;
  if (fs::is_regular_file(dir / "trainfeat.h5") && fs::is_regular_file(dir / "testfeat.h5")) {
    s.train = read_features(dir / "trainfeat.h5");
    s.test = read_features(dir / "testfeat.h5");
    const FeatureAttributes& a = s.train.attributes;
    if (!a.arch.empty()) {  // the features' own model, not the flags' defaults
      model.arch = a.arch;
      model.patch_size = a.patch_size;
      model.image_size = a.image_size;
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

FeatureSet extract_split(models::Backbone& model, const KnnEvalOptions& o,
                         const augment::DatasetPtr& data, const char* split, Communicator& comm,
                         torch::Device device) {
  ExtractOptions e;
  e.batch_size = o.batch_size_per_gpu;
  e.num_workers = o.num_workers;
  e.image_size = o.model.image_size;
  log::info("Extracting features for ", split, " set...");
  FeatureSet f = extract_features(model, data, e, comm, device);
  set_model_attributes(f.attributes, o.model, split);
  return f;
}

KnnBackend parse_backend(const std::string& name) {
  if (name == "faiss") return KnnBackend::kFaiss;
  if (name == "torch") return KnnBackend::kTorch;
  XDINO_FAIL_ARG("unknown --knn_backend '", name, "' (expected faiss or torch)");
}

}  // namespace

KnnEvalResult run_knn_eval(const KnnEvalOptions& options, Communicator& comm,
                           torch::Device device) {
  KnnParams params;
  params.ks = options.nb_knn;
  params.temperature = options.temperature;
  params.backend = parse_backend(options.knn_backend);
  reported_k(params.ks);  // rejects an empty --nb_knn before any work
  XDINO_CHECK_ARG(options.dump_features.empty() || options.load_features.empty(),
                  "--dump_features and --load_features exclude each other");
  if (options.load_features.empty()) models::check_arch(options.model.arch);

  BackboneSpec model_spec = options.model;
  const auto t0 = std::chrono::steady_clock::now();
  Splits data;
  if (!options.load_features.empty()) {
    if (comm.is_main()) data = load_dumped(options.load_features, model_spec);
  } else {
    // Data first: a wrong --data_path fails before any model work.
    const augment::DatasetPtr train = open_eval_split(options.data_path, "train", options.subset);
    const augment::DatasetPtr val = open_eval_split(options.data_path, "val", options.subset);
    const auto model = load_frozen_backbone(options.model, device);
    data.train = extract_split(*model, options, train, "train", comm, device);
    data.test = extract_split(*model, options, val, "val", comm, device);
  }
  const double extraction_s = seconds_since(t0);

  KnnEvalResult result;
  if (comm.is_main()) {
    if (!options.dump_features.empty()) {
      fs::create_directories(options.dump_features);
      write_features(fs::path(options.dump_features) / "trainfeat.h5", data.train);
      write_features(fs::path(options.dump_features) / "testfeat.h5", data.test);
      log::info("Features dumped to ", options.dump_features);
    }
    torch::Tensor train = data.train.features, test = data.test.features;
    if (options.use_cuda && device.is_cuda()) {
      train = train.to(device);
      test = test.to(device);
      if (params.backend == KnnBackend::kFaiss && !faiss_has_gpu())
        params.backend = KnnBackend::kTorch;  // no GPU faiss in this build: search with torch
    }
    log::info("Features are ready! Start the k-NN classification (", backend_name(params.backend),
              ", ", train.size(0), " train x ", test.size(0), " test, dim ", train.size(1), ").");
    result.knn = knn_classify(train, data.train.labels, test, data.test.labels, params);
    for (const KnnAccuracy& a : result.knn.per_k)
      log::info(a.k, "-NN classifier result: Top1: ", python_repr(a.top1),
                ", Top5: ", python_repr(a.top5));

    Json& j = result.json = Json::object();
    j["protocol"] = "weighted k-NN (eval_knn.py)";
    add_model_fields(j, model_spec);
    j["temperature"] = options.temperature;
    j["num_train"] = result.knn.num_train;
    j["num_test"] = result.knn.num_test;
    j["num_classes"] = result.knn.num_classes;
    j["feature_dim"] = result.knn.feature_dim;
    j["backend"] = backend_name(params.backend);
    j["features"] = options.load_features.empty() ? std::string("extracted")
                                                  : "loaded from " + options.load_features;
    Json list = Json::array();
    const int64_t rk = reported_k(params.ks);
    Json reported;
    for (const KnnAccuracy& a : result.knn.per_k) {
      Json r = Json::object();
      r["k"] = a.k;
      r["top1"] = a.top1;
      r["top5"] = a.top5;
      if (a.k == rk && reported.is_null()) reported = r;
      list.push_back(r);
    }
    j["results"] = list;
    j["reported"] = reported;
    j["seconds"] = Json{{"extraction", extraction_s}, {"knn", result.knn.seconds}};
    fs::create_directories(options.output_dir);
    write_file_atomically(fs::path(options.output_dir) / "knn.json", python_dumps(j, 2) + "\n");
    log::info("wrote ", (fs::path(options.output_dir) / "knn.json").string());
  }
  comm.barrier();
  return result;
}

}  // namespace xdino::eval
