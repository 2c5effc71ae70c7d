// The evaluation subcommands of the dino binary: exit codes and one-line messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/json.h"
#include "eval/features_io.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::count_lines;
using xdino::testing::dino_binary;
using xdino::testing::fresh_dir;
using xdino::testing::run_process;

namespace {

// Exit code `code` with exactly one line on stderr that mentions `needle`.
void expect_one_line_failure(const std::vector<std::string>& args, int code,
                             const std::string& needle) {
  std::vector<std::string> argv{dino_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

// A tiny ImageFolder of binary PPM files (no image library needed): 2 classes by colour.
fs::path make_ppm_folder(const std::string& name, int train_per_class, int val_per_class) {
  const fs::path root = fresh_dir(name);
  uint32_t state = 12345;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 24; };
  for (const auto& [split, count] : {std::pair{"train", train_per_class}, {"val", val_per_class}})
    for (int c = 0; c < 2; ++c) {
      const fs::path dir = root / split / (c ? "b" : "a");
      fs::create_directories(dir);
      for (int i = 0; i < count; ++i) {
        std::ofstream f(dir / ("x" + std::to_string(i) + ".ppm"), std::ios::binary);
        f << "P6\n36 30\n255\n";
        for (int p = 0; p < 36 * 30; ++p)
          for (int ch = 0; ch < 3; ++ch)
            f.put(static_cast<char>(next() / 2 + (ch == 2 * c ? 120 : 0)));
      }
    }
  return root;
}

xdino::Json results_of(const fs::path& knn_json) {
  std::ifstream in(knn_json);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return xdino::parse_json(text, knn_json.string()).at("results");
}

// `knn` of a random xcit_nano_12_p16 at 32 px on the ImageFolder `root`, one loader worker, with
// --nb_knn `nb_knn` and --batch_size_per_gpu `batch`: what the two-process tests run both ways.
std::vector<std::string> nano_knn_args(const fs::path& root, const std::vector<std::string>& nb_knn,
                                       int batch) {
  std::vector<std::string> args{"knn", "--arch",      "xcit_nano_12_p16", "--image_size",
                                "32",  "--data_path", root.string(),      "--nb_knn"};
  args.insert(args.end(), nb_knn.begin(), nb_knn.end());
  args.insert(args.end(), {"--num_workers", "1", "--batch_size_per_gpu", std::to_string(batch)});
  return args;
}

// `dino <common>` as one process and under `dino launch --nproc 2`, writing to root/one and
// root/two, the features dumped to root/one_dump and root/two_dump; both must succeed.
void run_on_one_and_two_processes(const std::vector<std::string>& common, const fs::path& root) {
  for (const std::string name : {"one", "two"}) {
    std::vector<std::string> argv{dino_binary()};
    if (name == "two") argv.insert(argv.end(), {"launch", "--nproc", "2", "--"});
    argv.insert(argv.end(), common.begin(), common.end());
    argv.insert(argv.end(), {"--output_dir", (root / name).string(), "--dump_features",
                             (root / (name + "_dump")).string()});
    const auto r = run_process(argv, {}, 300);
    ASSERT_EQ(r.exit_code, 0) << name << " process(es): " << r.err;
  }
}

}  // namespace

TEST(EvalCli, FeaturesWritesTheSplit) {
  const fs::path root = make_ppm_folder("features_cli", 2, 3);
  const auto r = run_process({dino_binary(), "features", "--arch", "xcit_nano_12_p16",
                              "--image_size", "32", "--data_path", root.string(), "--split", "val",
                              "--num_workers", "1", "--output", (root / "out/val.h5").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("RANDOMLY INITIALISED"), std::string::npos) << r.err;
  const auto f = xdino::eval::read_features(root / "out/val.h5");
  EXPECT_EQ(f.features.sizes(), (std::vector<int64_t>{6, 128}));
  EXPECT_EQ(f.attributes.arch, "xcit_nano_12_p16");
  EXPECT_EQ(f.attributes.split, "val");
  // Its own record beside the file: a folder's config.ini may be another command's.
  EXPECT_TRUE(fs::exists(root / "out/val.config.ini"));
  EXPECT_FALSE(fs::exists(root / "out/config.ini"));
  fs::remove_all(root);
}

TEST(EvalCli, ResultFilesRecordTheModelsPatchSizeNotTheFlagsDefault) {
  // --patch_size is a ViT flag (default 16); XCiT names carry their own.
  const fs::path root = make_ppm_folder("knn_patch", 3, 2);
  const auto r = run_process({dino_binary(), "knn", "--arch", "xcit_nano_4_p4", "--image_size",
                              "32", "--data_path", root.string(), "--nb_knn", "1", "--num_workers",
                              "1", "--output_dir", (root / "out").string(), "--dump_features",
                              (root / "dump").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(root / "out/knn.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(xdino::parse_json(text, "knn.json").at("patch_size").get<int64_t>(), 4);
  EXPECT_EQ(xdino::eval::read_features(root / "dump/trainfeat.h5").attributes.patch_size, 4);
  fs::remove_all(root);
}

TEST(EvalCli, KnnOnTwoProcessesEqualsOneProcess) {
  // 9 train images on 2 processes: the DistributedSampler pads one duplicate.
  const fs::path root = make_ppm_folder("knn_dist", 5, 3);
  fs::remove(root / "train/b/x4.ppm");
  run_on_one_and_two_processes(nano_knn_args(root, {"1", "3", "5"}, 2), root);
  if (HasFatalFailure()) return;
  EXPECT_EQ(results_of(root / "two/knn.json"), results_of(root / "one/knn.json"));
  const auto a = xdino::eval::read_features(root / "one_dump/trainfeat.h5");
  const auto b = xdino::eval::read_features(root / "two_dump/trainfeat.h5");
  ASSERT_EQ(b.features.size(0), 9);  // the padding duplicate collapsed
  EXPECT_TRUE(torch::allclose(a.features, b.features, 1e-5, 1e-6));
  EXPECT_EQ(a.paths, b.paths);
  fs::remove_all(root);
}

// --recalibrate_bn on two processes: the BatchNorms take their statistics over both
// processes' batches (SyncBatchNorm, eval/batch_norm_stats.h), so one batch of 8 images on one
// process and 4 + 4 on two give the same statistics, the same features and the same k-NN.
TEST(EvalCli, KnnRecalibrateBnOnTwoProcessesEqualsOneProcess) {
  const fs::path root = make_ppm_folder("knn_dist_bn", 4, 10);
  std::vector<std::string> common = nano_knn_args(root, {"1", "3"}, 8);
  common.insert(common.end(), {"--recalibrate_bn", "8"});
  run_on_one_and_two_processes(common, root);
  if (HasFatalFailure()) return;
  for (const char* file : {"trainfeat_data_bn.h5", "testfeat_data_bn.h5"}) {
    const auto x = xdino::eval::read_features(root / "one_dump" / file);
    const auto y = xdino::eval::read_features(root / "two_dump" / file);
    EXPECT_TRUE(torch::allclose(x.features, y.features, 1e-5, 1e-6)) << file;
    EXPECT_EQ(x.paths, y.paths) << file;
  }
  // The reference's features are not the random-init ones.
  EXPECT_FALSE(torch::allclose(
      xdino::eval::read_features(root / "one_dump/testfeat.h5").features,
      xdino::eval::read_features(root / "one_dump/testfeat_data_bn.h5").features, 1e-3, 1e-4));
  const auto bn_of = [](const fs::path& file) {
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return xdino::parse_json(text, file.string()).at("data_batch_norm");
  };
  const xdino::Json a = bn_of(root / "one/knn.json"), b = bn_of(root / "two/knn.json");
  EXPECT_EQ(a.at("images"), 8);
  EXPECT_EQ(b.at("images"), 8);
  EXPECT_EQ(a.at("results"), b.at("results"));
  fs::remove_all(root);
}

TEST(EvalCli, MissingInputsExitTwoWithOneLine) {
  const fs::path root = make_ppm_folder("missing_cli", 1, 1);
  expect_one_line_failure({"knn", "--arch", "xcit_nano_12_p16", "--data_path", "/no/such/data",
                           "--output_dir", (root / "o").string()},
                          2, "/no/such/data");
  expect_one_line_failure(
      {"knn", "--arch", "xcit_nano_12_p16", "--data_path", root.string(), "--pretrained_weights",
       "/no/such/weights.pth", "--output_dir", (root / "o").string()},
      2, "/no/such/weights.pth");
  expect_one_line_failure({"knn", "--load_features", (root / "nothing").string(), "--output_dir",
                           (root / "o").string()},
                          2, "nothing");
  expect_one_line_failure({"features", "--arch", "xcit_nano_12_p16", "--data_path", root.string(),
                           "--split", "test", "--output", (root / "f.h5").string()},
                          2, "--split");
  expect_one_line_failure({"knn", "--arch", "no_such_arch", "--data_path", root.string(),
                           "--output_dir", (root / "o").string()},
                          2, "no_such_arch");
  fs::remove_all(root);
}

TEST(EvalCli, ReportMissingRunFolderExitsTwo) {
  expect_one_line_failure({"report", "--runs", "/no/such/run", "--output", "/tmp/r.md"}, 2,
                          "/no/such/run");
}

TEST(EvalCli, ReportUnknownFormatExitsTwo) {
  expect_one_line_failure({"report", "--runs", "/tmp", "--output", "table.pdf"}, 2, "table.pdf");
}

TEST(EvalCli, ReportCorruptResultExitsOne) {
  const fs::path dir = fresh_dir("report_corrupt");
  std::ofstream(dir / "knn.json") << "{\"reported\": [";
  expect_one_line_failure({"report", "--runs", dir.string(), "--output", (dir / "t.md").string()},
                          1, "knn.json");
  fs::remove_all(dir);
}
