// A DINO-trained teacher beats random weights on copy detection, through the real binaries:
// `dino train` of ViT-Ti/16 for 3 epochs on 1000 photo crops (64-px global, 32-px local crops;
// other crops than the test set's), then `dino copy_detection` of the trained teacher and of
// random weights on the hard Copydays-like set with 96 originals
// (tests/data/retrieval/make_sets.py copydays --hard --originals 96).
// Why this model and this metric (docs/evaluation.md, "Trained against random weights"):
//  - ViT, because it has no BatchNorm: an XCiT teacher beats random weights by a wide margin
//    even at --lr 0, from the running statistics its train-mode forwards collect, which would
//    make the test pass with a broken optimiser. The test checks the checkpoint holds no
//    running statistics, so the margin can only come from learned weights: without
//    BatchNorm, random weights already are the reference with the data's BatchNorm statistics
//    (docs/evaluation.md, "The random-weights reference").
//  - The mean mAP of the crops/30..80 blocks, because it is what two minutes of learning move:
//    random weights 21.8-22.5 (3 seeds, and an lr-0 run), trained 27.3-29.8 (5 runs, 2
//    recipes); strong edits and whole-set mAP do not move at this budget.
// Skipped (failing in CI, tests/support/require.h) without Python numpy/PIL/skimage.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/ivalue.h"
#include "core/json.h"
#include "core/pth.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace cli = xdino::testing::cli;
namespace fs = std::filesystem;
using xdino::testing::dino_binary;
using xdino::testing::kPython;
using xdino::testing::repo_file;
using xdino::testing::run_process;

namespace {

// Trained minus random, crops/30..80 mean mAP, in points: measured 7.2 and 7.7 for this
// recipe; the random-weight spread over seeds is 0.7.
constexpr double kMarginPoints = 4.0;

double crops_map(const fs::path& out) {
  std::ifstream in(out / "copy_detection.json");
  std::stringstream text;
  text << in.rdbuf();
  const xdino::Json j = xdino::parse_json(text.str(), (out / "copy_detection.json").string());
  double sum = 0;
  for (const int p : {30, 40, 50, 60, 70, 80})
    sum += j["blocks"]["crops/" + std::to_string(p)].get<double>();
  return sum / 6;
}

}  // namespace

TEST(TrainedVsRandom, DinoTrainedViTFindsCroppedCopiesBetterThanRandomWeights) {
  for (const char* m : {"numpy", "PIL", "skimage"}) {
    if (!xdino::testing::python_has(m)) XDINO_SKIP_MISSING() << kPython << " cannot import " << m;
  }
  const fs::path dir = xdino::testing::fresh_dir("trained_vs_random");
  auto r = run_process({kPython, repo_file("tests/data/retrieval/make_sets.py"), "photos",
                        (dir / "photos").string(), "1000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_process({kPython, repo_file("tests/data/retrieval/make_sets.py"), "copydays",
                   (dir / "copydays").string(), "--hard", "--originals", "96"});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::vector<std::string> model = {"--arch", "vit_tiny", "--patch_size",
                                          "16",     "--seed",   "0"};
  const std::vector<std::string> train = cli::concat(
      {{dino_binary(), "train", "--data_path", (dir / "photos").string(), "--output_dir",
        (dir / "train").string(), "--num_workers", "1", "--device", "cpu"},
       model,
       cli::multi_crop(64, 32, 2),
       {"--blur_sigma", "0.05", "0.6"},
       cli::dino_head(256, 256, 64),
       {"--batch_size_per_gpu", "32", "--freeze_last_layer", "0", "--drop_path_rate", "0"},
       cli::epochs(3, 1),
       {"--lr", "0.008", "--momentum_teacher", "0.95", "--teacher_temp", "0.02",
        "--warmup_teacher_temp", "0.02", "--weight_decay_end", "0.04"}});
  r = run_process(train);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // No BatchNorm statistics in the teacher: nothing but its weights can differ from random.
  const xdino::IDict ckpt =
      xdino::as_dict(xdino::load_pth(dir / "train" / "checkpoint.pth"), "checkpoint");
  const xdino::IDict teacher = xdino::as_dict(xdino::get(ckpt, "teacher", "checkpoint"), "teacher");
  ASSERT_GT(teacher.size(), 0u);
  for (const auto& item : teacher)
    EXPECT_EQ(item.key().toStringRef().find("running_"), std::string::npos) << item.key();

  double map[2];
  for (const bool trained : {false, true}) {
    const fs::path out = dir / (trained ? "trained" : "random");
    std::vector<std::string> eval = {
        dino_binary(),        "copy_detection",
        "--data_path",        (dir / "copydays").string(),
        "--distractors_path", (dir / "copydays" / "distractors").string(),
        "--imsize",           "64",
        "--num_workers",      "1",
        "--output_dir",       out.string()};
    eval.insert(eval.end(), model.begin(), model.end());
    if (trained) {
      eval.push_back("--pretrained_weights");
      eval.push_back((dir / "train" / "checkpoint.pth").string());
    }
    r = run_process(eval);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    map[trained] = crops_map(out);
  }
  std::cout << "crops/30..80 mean mAP: random " << map[0] << ", trained " << map[1] << "\n";
  EXPECT_GE(map[1] - map[0], kMarginPoints) << "random " << map[0] << ", trained " << map[1];
  fs::remove_all(dir);
}
