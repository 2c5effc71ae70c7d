// The main job's numerics cannot move unnoticed. `dino train` runs the recipe of
// configs/fashion_mnist.ini ([train]: XCiT-N4/4, its crops, head, schedules and data) on 256
// images for 2 epochs (16 iterations), and its digest, log.txt's epoch lines (loss, lr, wd,
// momentum, teacher temperature and entropy, the KL figures, to 17 digits) and a hash of every
// teacher tensor's bytes, must equal tests/data/main_job_digest.json's for this LibTorch.
//
// So that every machine computes the same: one thread (no split reductions) and AVX2 kernels
// everywhere (OpenBLAS's Haswell kernels, oneDNN and MKL capped at AVX2, ATen's AVX2
// dispatch). Unpinned, the CPU's own kernels round differently: an AVX-512 Zen 4 and an AVX2
// Zen 3 give the main job 78.34 and 78.35 (bench/results/main_job.md).
//
// A change that moves the digest fails here, naming the first number that moved. If it is
// meant to, re-measure the main job (README's first command), update README's digits, and
// record the new digest: XDINO_RECORD_DIGEST=1 ctest --test-dir build -R test_main_job_digest
// (once per LibTorch CI builds: Debian's 1.13 and pip's 2.15).
#include <gtest/gtest.h>
#include <torch/version.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/ivalue.h"
#include "core/json.h"
#include "core/pth.h"
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

}  // namespace

TEST(MainJobDigest, TheRecipesFirstIterationsGiveTheRecordedNumbers) {
  if (!fs::exists(xdino::testing::kFashionMnist / "train-images-idx3-ubyte.gz"))
    XDINO_SKIP_MISSING() << xdino::testing::kFashionMnist << " (apt-get install "
                         << "dataset-fashion-mnist)";
  const fs::path out = xdino::testing::fresh_dir("main_job_digest");
  const auto r = xdino::testing::run_process(
      {xdino::testing::dino_binary(), "train", "--config",
       xdino::testing::repo_file("configs/fashion_mnist.ini"), "--max_samples", "256", "--epochs",
       "2", "--knn_every", "0", "--replicas", "1", "--num_workers", "1", "--output_dir",
       out.string()},
      {{"OMP_NUM_THREADS", "1"},
       {"OPENBLAS_NUM_THREADS", "1"},
       {"OPENBLAS_CORETYPE", "Haswell"},
       {"DNNL_MAX_CPU_ISA", "AVX2"},
       {"ONEDNN_MAX_CPU_ISA", "AVX2"},
       {"ATEN_CPU_CAPABILITY", "avx2"},
       {"MKL_CBWR", "AVX2"},
       {"MKL_ENABLE_INSTRUCTIONS", "AVX2"}},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Json measured = Json::object();
  measured["log"] = lines_of(xdino::read_file(out / "log.txt"));
  measured["teacher_fnv1a64"] = teacher_hash(out / "checkpoint.pth");
  ASSERT_EQ(measured["log"].size(), 2u) << "two epochs, one log.txt line each";
  fs::remove_all(out);

  const fs::path file = fs::path(xdino::testing::test_data_dir()) / "main_job_digest.json";
  Json recorded =
      fs::exists(file) ? xdino::parse_json(xdino::read_file(file), file.string()) : Json::object();
  const char* record = std::getenv("XDINO_RECORD_DIGEST");
  if (record != nullptr && std::string(record) == "1") {
    recorded[kLibTorch] = measured;
    xdino::write_file_atomically(file, recorded.dump(2) + "\n");
    std::cout << "recorded the digest for " << kLibTorch << " in " << file << "\n";
    return;
  }
  if (!recorded.contains(kLibTorch))
    XDINO_SKIP_MISSING() << "no digest recorded for " << kLibTorch << " in " << file
                         << "; record one: XDINO_RECORD_DIGEST=1 ctest --test-dir build -R "
                            "test_main_job_digest";
  const Json& want = recorded[kLibTorch];
  const auto moved = [&](const std::string& what, const std::string& now, const std::string& was) {
    return "the main job's numbers moved (" + kLibTorch + "): " + what + " is now\n  " + now +
           "\nand was recorded as\n  " + was +
           "\nIf this change is meant to move them, re-measure the main job (README's first "
           "command), update README's digits, and re-record: XDINO_RECORD_DIGEST=1 ctest "
           "--test-dir build -R test_main_job_digest";
  };
  for (size_t e = 0; e < 2; ++e) {
    const std::string now = measured["log"][e].get<std::string>();
    const std::string was = want["log"][e].get<std::string>();
    EXPECT_EQ(now, was) << moved("log.txt line " + std::to_string(e + 1), now, was);
  }
  EXPECT_EQ(measured["teacher_fnv1a64"], want["teacher_fnv1a64"])
      << moved("the teacher's hash", measured["teacher_fnv1a64"].get<std::string>(),
               want["teacher_fnv1a64"].get<std::string>());
}
