// The main job's numerics cannot move unnoticed: every stage that makes the README's digits, at
// a small size, must give tests/data/main_job_digest.json's numbers for this LibTorch.
//  - train: `dino train` runs the recipe of configs/fashion_mnist.ini ([train]: XCiT-N4/4, its
//    crops, head, schedules and data) on 256 images for 2 epochs (16 iterations) with 2
//    replicas, the main job's path on 2 cores (distributed/replicas.h): log.txt's epoch lines
//    (loss, lr, wd, momentum, teacher temperature and entropy, the KL figures, to 17 digits) and
//    a hash of every teacher tensor's bytes;
//  - k-NN: `dino knn` of that teacher at k = 10, 20, 100, 200 on class-balanced subsets (2000
//    train, 500 test images): knn.json's accuracies and a hash of the extracted features;
//  - the random-weights reference with the data's BatchNorm statistics (`--recalibrate_bn`,
//    the report's second random row): its accuracies;
//  - the linear probe, cached mode, 3 epochs on the same subsets: log.txt's lines.
// The full main job differs from this in its sizes alone (bench/results/main_job.md). The tuned
// recipe (configs/fashion_mnist_tuned.ini, README's second row of digits) has its own record:
// its training at the same size and its teacher's k-NN.
//
// So that every machine computes the same: one thread per replica (no split reductions) and
// AVX2 kernels everywhere (OpenBLAS's Haswell kernels, oneDNN and MKL capped at AVX2, ATen's
// AVX2 dispatch). Unpinned, the CPU's own kernels round differently: an AVX-512 Zen 4 and an
// AVX2 Zen 3 give the main job 78.34 and 78.35 (bench/results/main_job.md).
//
// A change that moves the digest fails here, naming the first number that moved. If it is
// meant to, re-measure the run (README's command for it), update README's digits, and
// record the new digest: XDINO_RECORD_DIGEST=1 ctest --test-dir build -R test_main_job_digest
// (once per LibTorch CI builds: Debian's 1.13 and pip's 2.15).
#include <gtest/gtest.h>
#include <torch/version.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/ivalue.h"
#include "core/json.h"
#include "core/pth.h"
#include "eval/features_io.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using xdino::Json;

namespace {

const std::string kLibTorch =
    "libtorch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);

// FNV-1a (64 bits) over each teacher tensor's name and bytes, in the checkpoint's order.
std::string teacher_hash(const fs::path& checkpoint) {
  uint64_t h = 1469598103934665603ull;
  const auto mix = [&](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  const auto teacher = xdino::load_pth(checkpoint).toGenericDict().at("teacher").toGenericDict();
  for (const auto& item : teacher) {
    const std::string& name = item.key().toStringRef();
    const torch::Tensor t = item.value().toTensor().contiguous().cpu();
    mix(name.data(), name.size());
    mix(t.data_ptr(), t.nbytes());
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

// The environment of every digest command: one thread, AVX2 kernels in every library.
const std::map<std::string, std::string> kPinned = {{"OMP_NUM_THREADS", "1"},
                                                    {"OPENBLAS_NUM_THREADS", "1"},
                                                    {"OPENBLAS_CORETYPE", "Haswell"},
                                                    {"DNNL_MAX_CPU_ISA", "AVX2"},
                                                    {"ONEDNN_MAX_CPU_ISA", "AVX2"},
                                                    {"ATEN_CPU_CAPABILITY", "avx2"},
                                                    {"MKL_CBWR", "AVX2"},
                                                    {"MKL_ENABLE_INSTRUCTIONS", "AVX2"}};

// `dino <args>` pinned; fails the test (and returns false) unless it exits 0.
bool run_pinned(std::vector<std::string> args) {
  args.insert(args.begin(), xdino::testing::dino_binary());
  const auto r = xdino::testing::run_process(args, kPinned, 300);
  EXPECT_EQ(r.exit_code, 0) << args[1] << ": " << r.err;
  return r.exit_code == 0;
}

// FNV-1a (64 bits) over the bytes of a feature file's features.
std::string features_hash(const fs::path& h5) {
  const torch::Tensor f = xdino::eval::read_features(h5).features.contiguous();
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const unsigned char*>(f.data_ptr());
  for (size_t i = 0; i < f.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// knn.json's accuracies, k by k, as one line.
std::string knn_results(const fs::path& dir) {
  return xdino::parse_json(xdino::read_file(dir / "knn.json"), "knn.json")["results"].dump();
}

// Records `measured` under `key` (XDINO_RECORD_DIGEST=1), or compares it with the record,
// number by number, naming `run` in what it says; skips (a failure under XDINO_REQUIRE_ALL)
// where nothing is recorded for it (another LibTorch).
void expect_recorded(const std::string& key, const std::string& run, const Json& measured) {
  const fs::path file = fs::path(xdino::testing::test_data_dir()) / "main_job_digest.json";
  Json recorded =
      fs::exists(file) ? xdino::parse_json(xdino::read_file(file), file.string()) : Json::object();
  const char* record = std::getenv("XDINO_RECORD_DIGEST");
  if (record != nullptr && std::string(record) == "1") {
    recorded[key] = measured;
    xdino::write_file_atomically(file, recorded.dump(2) + "\n");
    std::cout << "recorded the digest of " << key << " in " << file << "\n";
    return;
  }
  if (!recorded.contains(key))
    XDINO_SKIP_MISSING() << "no digest recorded for " << key << " in " << file
                         << "; record one: XDINO_RECORD_DIGEST=1 ctest --test-dir build -R "
                            "test_main_job_digest";
  const Json& want = recorded[key];
  const auto moved = [&](const std::string& what, const std::string& now, const std::string& was) {
    return run + "'s numbers moved (" + kLibTorch + "): " + what + " is now\n  " + now +
           "\nand was recorded as\n  " + was +
           "\nIf this change is meant to move them, re-measure the run (README's command for it), "
           "update README's digits, and re-record: XDINO_RECORD_DIGEST=1 ctest --test-dir build "
           "-R test_main_job_digest";
  };
  for (const auto& [what, now] : measured.items()) {
    ASSERT_TRUE(want.contains(what)) << "the digest of " << key << " records no " << what
                                     << "; re-record it (XDINO_RECORD_DIGEST=1)";
    if (now.is_array()) {
      ASSERT_EQ(now.size(), want[what].size()) << what << " of " << key;
      for (size_t i = 0; i < now.size(); ++i) {
        const std::string n = now[i].get<std::string>(), w = want[what][i].get<std::string>();
        EXPECT_EQ(n, w) << moved(what + " line " + std::to_string(i + 1), n, w);
      }
    } else {
      EXPECT_EQ(now, want[what]) << moved(what, now.get<std::string>(),
                                          want[what].get<std::string>());
    }
  }
}

bool fashion_mnist_missing() {
  return !fs::exists(xdino::testing::kFashionMnist / "train-images-idx3-ubyte.gz");
}

const std::vector<std::string> kSubsets{"--max_train_samples", "2000", "--max_val_samples", "500",
                                        "--num_workers",       "1"};

// An evaluation's command line: `head`, then `--config` for each of `configs` (later ones
// overriding), then the digest's subsets.
std::vector<std::string> eval_args(std::vector<std::string> head,
                                   const std::vector<std::string>& configs) {
  for (const auto& c : configs) head.insert(head.end(), {"--config", c});
  head.insert(head.end(), kSubsets.begin(), kSubsets.end());
  return head;
}

// `dino train` with `configs` ([train] of each, later ones overriding) on 256 images for 2
// epochs with 2 replicas, into out/train; the measured log lines and teacher hash, or nothing
// (and a failure) where the command did not exit 0.
std::optional<Json> train_digest(const std::vector<std::string>& configs, const fs::path& out) {
  std::vector<std::string> args{"train"};
  for (const auto& c : configs) args.insert(args.end(), {"--config", c});
  args.insert(args.end(),
              {"--max_samples", "256", "--epochs", "2", "--knn_every", "0", "--replicas", "2",
               "--num_workers", "1", "--output_dir", (out / "train").string()});
  if (!run_pinned(args)) return std::nullopt;
  Json measured = Json::object();
  measured["log"] = lines_of(xdino::read_file(out / "train" / "log.txt"));
  measured["teacher_fnv1a64"] = teacher_hash(out / "train" / "checkpoint.pth");
  return measured;
}

}  // namespace

TEST(MainJobDigest, TheRecipesStagesGiveTheRecordedNumbers) {
  if (fashion_mnist_missing())
    XDINO_SKIP_MISSING() << xdino::testing::kFashionMnist << " (apt-get install "
                         << "dataset-fashion-mnist)";
  const fs::path out = xdino::testing::fresh_dir("main_job_digest");
  const std::string config = xdino::testing::repo_file("configs/fashion_mnist.ini");
  const std::optional<Json> trained = train_digest({config}, out);
  ASSERT_TRUE(trained.has_value());
  Json measured = *trained;
  const std::string weights = (out / "train" / "checkpoint.pth").string();
  ASSERT_TRUE(
      run_pinned(eval_args({"knn", "--nb_knn", "10", "20", "100", "200", "--pretrained_weights",
                            weights, "--dump_features", (out / "features").string(), "--output_dir",
                            (out / "knn").string(), "--tensorboard", "false"},
                           {config})));
  ASSERT_TRUE(
      run_pinned(eval_args({"knn", "--nb_knn", "20", "--recalibrate_bn", "500", "--output_dir",
                            (out / "random").string(), "--tensorboard", "false"},
                           {config})));
  ASSERT_TRUE(run_pinned(eval_args(
      {"linear", "--pretrained_weights", weights, "--cached_features", "true", "--epochs", "3",
       "--num_labels", "10", "--output_dir", (out / "linear").string(), "--tensorboard", "false"},
      {config})));
  measured["knn"] = knn_results(out / "knn");
  measured["knn_features_fnv1a64"] = features_hash(out / "features" / "trainfeat.h5");
  // Its accuracies (the record also holds how long it took).
  measured["random_with_data_batch_norm"] =
      xdino::parse_json(xdino::read_file(out / "random" / "knn.json"),
                        "knn.json")["data_batch_norm"]["results"]
          .dump();
  measured["linear_log"] = lines_of(xdino::read_file(out / "linear" / "log.txt"));
  ASSERT_EQ(measured["log"].size(), 2u) << "two epochs, one log.txt line each";
  ASSERT_EQ(measured["linear_log"].size(), 3u) << "three probe epochs";
  fs::remove_all(out);
  expect_recorded(kLibTorch, "the main job", measured);
}

// The tuned recipe (configs/fashion_mnist_tuned.ini: DINOv2's KoLeo, Sinkhorn-Knopp and iBOT on
// the main job, tuned for this data and budget), whose digits README gives beside the main
// job's: its training at the same small size, and its teacher's k-NN. The evaluation stages
// are the main job's, guarded above.
TEST(MainJobDigest, TheTunedRecipeGivesTheRecordedNumbers) {
  if (fashion_mnist_missing())
    XDINO_SKIP_MISSING() << xdino::testing::kFashionMnist << " (apt-get install "
                         << "dataset-fashion-mnist)";
  const fs::path out = xdino::testing::fresh_dir("tuned_digest");
  const std::string config = xdino::testing::repo_file("configs/fashion_mnist.ini");
  const std::string tuned = xdino::testing::repo_file("configs/fashion_mnist_tuned.ini");
  const std::optional<Json> trained = train_digest({config, tuned}, out);
  ASSERT_TRUE(trained.has_value());
  Json measured = *trained;
  ASSERT_EQ(measured["log"].size(), 2u) << "two epochs, one log.txt line each";
  for (const char* term : {"\"train_koleo_loss\"", "\"train_ibot_loss\""})
    EXPECT_NE(measured["log"][0].get<std::string>().find(term), std::string::npos)
        << term << " in " << measured["log"][0];
  ASSERT_TRUE(run_pinned(eval_args(
      {"knn", "--nb_knn", "20", "--pretrained_weights", (out / "train" / "checkpoint.pth").string(),
       "--output_dir", (out / "knn").string(), "--tensorboard", "false"},
      {config, tuned})));
  measured["knn"] = knn_results(out / "knn");
  fs::remove_all(out);
  expect_recorded(kLibTorch + ": configs/fashion_mnist_tuned.ini", "the tuned recipe", measured);
}
