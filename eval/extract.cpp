#include "eval/extract.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "augment/data/loader.h"
#include "core/check.h"
#include "core/log.h"
#include "core/progress.h"

namespace xdino::eval {
namespace {

// What the other commands write (docs/usage.md, "Outputs"): a run's record is never replaced
// by a feature file.
bool another_commands_file(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with(".pth") || ends_with(".ini") || ends_with(".json") || name == "log.txt" ||
      name.rfind("events.out.tfevents.", 0) == 0)
    return true;
  char head[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(head, sizeof head) && std::memcmp(head, "PK\x03\x04", 4) == 0;  // a checkpoint
}

void check_replaceable(const std::string& output, bool force) {
  std::error_code ec;
  if (!std::filesystem::exists(output, ec) || is_features_file(output)) return;
  XDINO_CHECK_ARG(!another_commands_file(output), "--output ", quote(output),
                  " is what another command writes (a checkpoint, config, log or result); "
                  "features never replace it, even with --force: pick another file name");
  XDINO_CHECK_ARG(force, "--output ", quote(output),
                  " exists and is not a feature file: pick another name, or add --force to "
                  "replace it");
}

}  // namespace

std::string feature_description(const ExtractOptions& options) {
  if (options.rows) return options.description;
  if (options.kind == FeatureKind::kBackbone) return "backbone";
  return "linear n=" + std::to_string(options.n_last_blocks) +
         " avgpool=" + (options.avgpool_patchtokens ? "true" : "false");
}

FeatureSet extract_features(models::Backbone& model, const augment::DatasetPtr& dataset,
                            const ExtractOptions& options, Communicator& comm,
                            torch::Device device) {
  const ImageInput& input = options.input;
  XDINO_CHECK_ARG(input.batch_size >= 1, "batch size must be >= 1, got ", input.batch_size);
  XDINO_CHECK_ARG(
      !options.patch_tokens || (options.kind == FeatureKind::kBackbone && !options.rows),
      "patch tokens come with the backbone feature only");
  augment::DataLoader loader(
      dataset, options.transform ? options.transform : input.transform(model.in_chans()),
      input.loader(device), comm.rank(), comm.world_size());
  loader.start_epoch(0);

  const int64_t n = dataset->size();
  const bool main = comm.is_main();
  torch::Tensor features;  // rank 0: [n, C] on the CPU
  torch::Tensor filled = torch::zeros({n}, torch::kBool);
  torch::NoGradGuard no_grad;
  Progress progress("features " + dataset->location(), loader.samples_per_epoch());
  while (std::optional<augment::Batch> batch = loader.next()) {
    const torch::Tensor x = batch->views[0].to(device, torch::kFloat32, /*non_blocking=*/true);
    torch::Tensor f, tokens;
    if (options.patch_tokens) {
      models::ProbeRequest request;
      request.patch_tokens = true;
      models::Probe probe = model.probe(x, request);
      f = probe.feature;
      tokens = probe.patch_tokens.to(torch::kFloat32).contiguous();
    } else {
      f = options.rows ? options.rows(model, x)
          : options.kind == FeatureKind::kBackbone
              ? model.forward(x)
              : model.linear_features(x, options.n_last_blocks, options.avgpool_patchtokens);
    }
    f = f.reshape({f.size(0), -1}).to(torch::kFloat32);
    if (options.normalize)
      f = torch::nn::functional::normalize(
          f, torch::nn::functional::NormalizeFuncOptions().p(2).dim(1).eps(1e-12));
    torch::Tensor index = batch->indices.to(device);
    if (comm.world_size() > 1) {
      f = torch::cat(comm.all_gather_varying(f.contiguous()));
      index = torch::cat(comm.all_gather_varying(index.contiguous()));
      if (tokens.defined()) tokens = torch::cat(comm.all_gather_varying(tokens));
    }
    if (main) {
      if (!features.defined()) {
        features = torch::zeros({n, f.size(1)}, torch::kFloat32);
        log::info("Storing features into tensor of shape ", features.sizes());
      }
      const torch::Tensor cpu_index = index.to(torch::kCPU);
      features.index_copy_(0, cpu_index, f.to(torch::kCPU));
      filled.index_fill_(0, cpu_index, true);
      if (tokens.defined() && options.patch_token_sink) options.patch_token_sink(tokens, cpu_index);
    }
    progress.step(batch->size());
  }
  progress.finish();
  FeatureSet out;
  if (!main) return out;
  XDINO_CHECK(features.defined(), "no image of ", dataset->location(), " could be read");

  std::vector<int64_t> labels = dataset->labels();
  const torch::Tensor keep = filled.nonzero().view(-1);
  out.features = features;
  out.labels = torch::tensor(labels, torch::kInt64);
  out.indices = keep;
  if (keep.size(0) < n) {
    log::warn(n - keep.size(0), " of ", n, " images of ", dataset->location(),
              " could not be read and have no feature row (left out)");
    out.features = features.index_select(0, keep);
    out.labels = out.labels.index_select(0, keep);
  }
  const int64_t* k = keep.data_ptr<int64_t>();
  out.paths.reserve(static_cast<size_t>(keep.size(0)));
  for (int64_t i = 0; i < keep.size(0); ++i) out.paths.push_back(dataset->path(k[i]));
  out.attributes.image_size = input.image_size;
  out.attributes.normalized = options.normalize;
  out.attributes.feature = feature_description(options);
  return out;
}

void run_features(const FeaturesOptions& o, Communicator& comm, torch::Device device,
                  const ChecksPassed& checks_passed) {
  XDINO_CHECK_ARG(o.split == "train" || o.split == "val", "--split must be train or val, got '",
                  o.split, "'");
  models::check_arch(o.model.arch);
  o.input.check();
  // Before any work: the file is written last, atomically, and cannot replace a folder.
  XDINO_CHECK_ARG(!std::filesystem::is_directory(o.output), "'", o.output,
                  "' is a directory, not a file (--output)");
  check_replaceable(o.output, o.force);
  const augment::DatasetPtr data = o.input.open(o.data_path, o.split);
  const FrozenBackbone frozen = load_frozen_backbone(o.model, o.input, device);
  const std::shared_ptr<models::Backbone>& model = frozen.model;
  const ImageInput& input = frozen.input;
  ExtractOptions e;
  e.input = input;
  e.patch_tokens = o.patch_tokens;
  const std::filesystem::path out(o.output);
  notify(checks_passed);
  if (comm.is_main() && out.has_parent_path())
    std::filesystem::create_directories(out.parent_path());
  // Rank 0 extracts inside the writer when the patch tokens stream to the file as they come.
  const auto extract = [&](const PatchTokenSink& sink) {
    e.patch_token_sink = sink;
    FeatureSet set = extract_features(*model, data, e, comm, device);
    if (comm.is_main()) set_model_attributes(set.attributes, o.model, o.split);
    return set;
  };
  if (!comm.is_main()) {
    extract(nullptr);
  } else if (o.patch_tokens) {
    int64_t rows = 0, channels = 0, tokens = 0, dim = 0;
    write_features_with_patch_tokens(out, data->size(), [&](const PatchTokenSink& sink) {
      FeatureSet set = extract([&](const torch::Tensor& t, const torch::Tensor& index) {
        tokens = t.size(1);
        dim = t.size(2);
        sink(t, index);
      });
      rows = set.features.size(0);
      channels = set.features.size(1);
      return set;
    });
    log::info("wrote ", rows, " x ", channels, " features and ", rows, " x ", tokens, " x ", dim,
              " patch tokens to ", o.output);
  } else {
    const FeatureSet set = extract(nullptr);
    write_features(out, set);
    log::info("wrote ", set.features.size(0), " x ", set.features.size(1), " features to ",
              o.output);
  }
  comm.barrier();
}

}  // namespace xdino::eval
