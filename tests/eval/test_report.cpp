// `dino report`: Table 3 from fake run folders, against a hand-written expected table; the
// CSV / JSON outputs parse with Python's csv and json modules; LaTeX is well-formed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"
#include "eval/report.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using xdino::testing::fresh_dir;
using namespace xdino::eval;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// Two runs: A has both results side by side; B has them in knn/ and linear/ subfolders, the
// model only in config.ini, random weights, a cached-features linear probe and 384 pixels.
fs::path make_runs() {
  const fs::path root = fresh_dir("report");
  write(root / "a/knn.json", R"J({"arch": "xcit_small_12_p16", "patch_size": 16,
    "image_size": 224, "weights": "pretrained",
    "results": [{"k": 10, "top1": 75.5, "top5": 90.0}, {"k": 20, "top1": 76.04, "top5": 91.2}],
    "reported": {"k": 20, "top1": 76.04, "top5": 91.2}})J");
  write(root / "a/linear.json", R"J({"protocol": "official (eval_linear.py)",
    "arch": "xcit_small_12_p16", "patch_size": 16, "image_size": 224, "weights": "pretrained",
    "best": {"epoch": 97, "acc1": 77.849, "acc5": 93.5}})J");
  write(root / "b/knn/config.ini",
        "# Effective configuration\n[knn]\narch = vit_small\npatch_size = 8\n"
        "image_size = 384\npretrained_weights = \n");
  write(root / "b/knn/knn.json", R"J({"reported": {"k": 20, "top1": 9.96, "top5": 50.0}})J");
  write(root / "b/linear/linear.json",
        R"J({"protocol": "cached-features (fast, not the official protocol)",
    "arch": "vit_small", "best": {"epoch": 3, "acc1": 12.0, "acc5": null}})J");
  return root;
}

ModelFacts fake_facts(const std::string& arch, int64_t patch, int64_t size) {
  if (arch == "xcit_small_12_p16" && size == 224) return {25.868e6, 4.87e9};
  if (arch == "vit_small" && patch == 8 && size == 384) return {21.67e6, 72.3e9};
  ADD_FAILURE() << "unexpected model " << arch << " " << patch << " " << size;
  return {};
}

std::string python_output(const std::string& code, const std::string& arg) {
  const auto r = xdino::testing::run_process({"/usr/bin/python3", "-c", code, arg});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

}  // namespace

TEST(Report, MarkdownTableOfTwoRuns) {
  const fs::path root = make_runs();
  ReportOptions o;
  o.runs = {(root / "a").string(), (root / "b").string()};
  o.output = (root / "out/table.md").string();
  const std::string text = write_report(o, fake_facts);
  const std::string expected =
      "| SSL Method | Model | #params | FLOPs | Linear | k-NN |\n"
      "|---|---|--:|--:|--:|--:|\n"
      "| DINO | XCiT-S12/16 | 26M | 4.9B | 77.8 | 76.0 |\n"
      "| Random init | ViT-S/8↑384 | 22M | 72.3B | 12.0* | 10.0 |\n"
      "\n"
      "* linear probe trained on cached features without augmentation (fast mode), not the "
      "official protocol\n";
  EXPECT_EQ(text, expected);
  EXPECT_EQ(xdino::read_file(o.output), expected);
  fs::remove_all(root);
}

TEST(Report, PublishedRowsAreMarked) {
  const fs::path root = make_runs();
  ReportOptions o;
  o.runs = {(root / "a").string()};
  o.output = (root / "t.md").string();
  o.with_published = true;
  const std::string text = write_report(o, fake_facts);
  EXPECT_NE(text.find("| SSL Method | Model | #params | FLOPs | Linear | k-NN | Source |"),
            std::string::npos);
  EXPECT_NE(text.find("| DINO | XCiT-S12/16 | 26M | 4.9B | 77.8 | 76.0 | ours |"),
            std::string::npos);
  EXPECT_NE(text.find("| MoBY | Swin-T | 29M | 4.5B | 75.0 | – | published |"), std::string::npos);
  EXPECT_NE(text.find("| DINO | XCiT-M24/8↑384 | 84M | 188.0B | 80.9 | – | published |"),
            std::string::npos);
  EXPECT_EQ(published_rows().size(), 11u);
  fs::remove_all(root);
}

TEST(Report, CsvAndJsonParseInPython) {
  if (!fs::exists("/usr/bin/python3")) XDINO_SKIP_MISSING() << "no /usr/bin/python3";
  const fs::path root = make_runs();
  ReportOptions o;
  o.runs = {(root / "a").string(), (root / "b").string()};
  o.with_published = true;
  o.output = (root / "t.csv").string();
  write_report(o, fake_facts);
  EXPECT_EQ(python_output("import csv,sys; r=list(csv.reader(open(sys.argv[1], encoding='utf-8')));"
                          "print(len(r), r[0][5], r[1][1], r[2][4], r[3][6])",
                          o.output),
            "14 k-NN XCiT-S12/16 12.0* published\n");
  o.output = (root / "t.json").string();
  write_report(o, fake_facts);
  EXPECT_EQ(
      python_output("import json,sys; d=json.load(open(sys.argv[1])); r=d['rows'];"
                    "print(len(r), r[0]['params'], r[0]['knn'], r[0]['knn_k'], r[1]['ssl_method'],"
                    " r[1]['linear_protocol'], r[2]['source'], r[2]['knn'], r[0]['cells'][3])",
                    o.output),
      "13 25868000 76.04 20 Random init cached-features published None 4.9B\n");
  fs::remove_all(root);
}

TEST(Report, LatexIsWellFormed) {
  const fs::path root = make_runs();
  ReportOptions o;
  o.runs = {(root / "a").string(), (root / "b").string()};
  o.output = (root / "t.tex").string();
  const std::string text = write_report(o, fake_facts);
  EXPECT_NE(text.find("\\begin{tabular}{llrrrr}"), std::string::npos);
  EXPECT_NE(text.find("SSL Method & Model & \\#params & FLOPs & Linear & $k$-NN \\\\"),
            std::string::npos);
  EXPECT_NE(text.find("Random init & ViT-S/8$\\uparrow$384 & 22M & 72.3B & 12.0* & 10.0 \\\\"),
            std::string::npos);
  EXPECT_NE(text.find("\\end{tabular}"), std::string::npos);
  // Every table row has six cells.
  std::istringstream in(text);
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.size() < 3 || line.compare(line.size() - 3, 3, " \\\\") != 0) continue;
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), '&'), 5) << line;
  }
  EXPECT_EQ(rows, 3);
  fs::remove_all(root);
}

TEST(Report, Errors) {
  const fs::path root = make_runs();
  ReportOptions o;
  o.runs = {(root / "a").string()};
  o.output = (root / "t.txt").string();
  EXPECT_THROW(write_report(o, fake_facts), xdino::UsageError);  // unknown extension
  o.output = (root / "t.md").string();
  o.runs = {(root / "missing").string()};
  EXPECT_THROW(write_report(o, fake_facts), xdino::UsageError);
  fs::create_directories(root / "empty");
  o.runs = {(root / "empty").string()};
  EXPECT_THROW(write_report(o, fake_facts), xdino::UsageError);
  write(root / "broken/knn.json", "{\"reported\": ");
  o.runs = {(root / "broken").string()};
  EXPECT_THROW(write_report(o, fake_facts), xdino::Error);
  fs::remove_all(root);
}

TEST(Report, ModelNames) {
  EXPECT_EQ(display_model_name("xcit_medium_24_p8", 16, 224), "XCiT-M24/8");
  EXPECT_EQ(display_model_name("xcit_medium_24_p8", 16, 384), "XCiT-M24/8↑384");
  EXPECT_EQ(display_model_name("xcit_nano_12_p16", 16, 224), "XCiT-N12/16");
  EXPECT_EQ(display_model_name("vit_base", 8, 224), "ViT-B/8");
  EXPECT_EQ(display_model_name("pixels", 16, 28), "Pixels↑28");
}

TEST(Report, RegistryFactsAtTheEvaluationResolution) {
  // eval.md section 4/6: XCiT-S12/16 26M, 4.9B at 224; M24/8 at 384 188.0B; ViT-S/16 22M 4.6B.
  const ModelFacts s12 = registry_facts("xcit_small_12_p16", 16, 224);
  EXPECT_NEAR(s12.params, 25.868e6, 0.01e6);
  EXPECT_NEAR(s12.flops, 4.87e9, 0.01e9);
  const ModelFacts vit = registry_facts("vit_small", 16, 224);
  EXPECT_NEAR(vit.params / 1e6, 21.7, 0.1);
  EXPECT_NEAR(vit.flops, 4.61e9, 0.01e9);
  // ViT keeps the 224 position grid (checkpoints hold it); FLOPs follow the resolution.
  EXPECT_DOUBLE_EQ(registry_facts("vit_small", 16, 384).params, vit.params);
  EXPECT_GT(registry_facts("vit_small", 16, 384).flops, 2.9 * vit.flops);
  EXPECT_EQ(registry_facts("pixels", 16, 28).params, 0.0);
  const fs::path root = make_runs();
  ReportOptions o;
  o.runs = {(root / "a").string()};
  o.output = (root / "t.md").string();
  EXPECT_NE(write_report(o).find("| DINO | XCiT-S12/16 | 26M | 4.9B | 77.8 | 76.0 |"),
            std::string::npos);
  fs::remove_all(root);
}

TEST(Report, SmallImageModelsShowFlopsInMillions) {
  ReportRow r;
  r.method = "DINO";
  r.model = "XCiT-N12/8↑32";
  r.params = 3.05e6;
  r.flops = 46.13e6;  // 0.0B would hide it
  r.knn = 80.0;
  const std::string md = render_report({r}, ReportFormat::kMarkdown);
  EXPECT_NE(md.find("| DINO | XCiT-N12/8↑32 | 3M | 46.1M | – | 80.0 |"), std::string::npos) << md;
  r.flops = 0.1e9;
  EXPECT_NE(render_report({r}, ReportFormat::kMarkdown).find("| 0.1B |"), std::string::npos);
}

// The transfer table: a run folder with copy detection, retrieval on both datasets (one
// folder each) and DAVIS results; another with k-NN only has no transfer row.
TEST(Report, TransferTableInTheDinoPaperLayout) {
  const fs::path root = fresh_dir("report_transfer");
  const std::string model =
      R"("arch": "xcit_small_12_p16", "patch_size": 16, "weights": "pretrained")";
  write(root / "t/copy_detection.json",
        "{" + model + R"(, "image_size": 320, "strong_mAP": 85.26, "mAP": 90.0})");
  write(root / "t/roxford5k/retrieval.json",
        "{" + model +
            R"(, "image_size": 224, "dataset": "roxford5k", "mAP_M": 37.21, "mAP_H": 13.04})");
  write(root / "t/rparis6k/retrieval.json",
        "{" + model +
            R"(, "image_size": 224, "dataset": "rparis6k", "mAP_M": 63.15, "mAP_H": 34.46})");
  write(root / "t/davis/video_segmentation.json",
        "{" + model +
            R"(, "image_size": 224, "J&F-Mean": 0.6154, "J-Mean": 0.5981, "F-Mean": 0.6329})");
  write(root / "k/knn.json",
        "{" + model + R"(, "image_size": 224, "reported": {"k": 20, "top1": 76.04}})");
  ReportOptions o;
  o.runs = {(root / "t").string(), (root / "k").string()};
  o.output = "-";
  ::testing::internal::CaptureStdout();
  const std::string text = write_report(o, fake_facts);
  ::testing::internal::GetCapturedStdout();
  const std::string expected_tail =
      "| SSL Method | Model | Copydays (strong mAP) | ROx M | ROx H | RPar M | RPar H | DAVIS "
      "(J&F)m "
      "| Jm | Fm |\n"
      "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n"
      "| DINO | XCiT-S12/16 | 85.3 | 37.2 | 13.0 | 63.1 | 34.5 | 61.5 | 59.8 | 63.3 |\n";
  ASSERT_GE(text.size(), expected_tail.size()) << text;
  EXPECT_EQ(text.substr(text.size() - expected_tail.size()), expected_tail) << text;
  // The first table keeps both runs; the transfer-only run has no accuracy there.
  EXPECT_NE(text.find("| DINO | XCiT-S12/16 | 26M | 4.9B | – | – |"), std::string::npos) << text;
  // Two retrieval results for one dataset are refused.
  write(root / "t/again/retrieval.json",
        "{" + model + R"(, "dataset": "rparis6k", "mAP_M": 1, "mAP_H": 1})");
  EXPECT_THROW(read_run((root / "t").string(), fake_facts), xdino::UsageError);
  fs::remove_all(root);
}

// Random weights say what their BatchNorms hold (docs/evaluation.md, "The random-weights
// reference"): a knn.json of `dino knn --recalibrate_bn` gives two rows, the second with the
// data's BatchNorm statistics; a model without BatchNorm gives one row that says so.
TEST(Report, RandomInitRowsSayWhatTheirBatchNormStatisticsAre) {
  const fs::path root = fresh_dir("report_batch_norm");
  write(root / "bn/knn.json", R"J({"arch": "xcit_small_12_p16", "patch_size": 16,
    "image_size": 224, "weights": "random",
    "reported": {"k": 20, "top1": 30.04, "top5": 60.0}, "batch_norm": "initial",
    "data_batch_norm": {"images": 6000, "reported": {"k": 20, "top1": 41.96, "top5": 70.0}}})J");
  write(root / "vit/knn.json", R"J({"arch": "vit_small", "patch_size": 8, "image_size": 384,
    "weights": "random", "reported": {"k": 20, "top1": 9.96, "top5": 50.0},
    "batch_norm": "none"})J");
  ReportOptions o;
  o.runs = {(root / "bn").string(), (root / "vit").string()};
  o.output = (root / "t.md").string();
  const std::string text = write_report(o, fake_facts);
  const std::string expected =
      "| SSL Method | Model | #params | FLOPs | Linear | k-NN |\n"
      "|---|---|--:|--:|--:|--:|\n"
      "| Random init, initial BatchNorm statistics | XCiT-S12/16 | 26M | 4.9B | – | 30.0 |\n"
      "| Random init, BatchNorm statistics of the data | XCiT-S12/16 | 26M | 4.9B | – | 42.0 |\n"
      "| Random init (no BatchNorm) | ViT-S/8↑384 | 22M | 72.3B | – | 10.0 |\n"
      "\n"
      "Random init, initial BatchNorm statistics: the initial weights, BatchNorm running means 0 "
      "and variances 1 as initialised.\n"
      "\n"
      "Random init, BatchNorm statistics of the data: the same weights, BatchNorm running "
      "statistics averaged over 6000 train images (as torch.optim.swa_utils.update_bn). A DINO "
      "teacher gathers such statistics in its forward passes without learning anything: DINO's "
      "margin over this row is what it learned (docs/evaluation.md, \"The random-weights "
      "reference\").\n"
      "\n"
      "Random init (no BatchNorm): the model has no BatchNorm, so random init is also the "
      "reference with the data's statistics (measured once).\n";
  EXPECT_EQ(text, expected);
  EXPECT_EQ(read_run((root / "bn").string(), fake_facts).size(), 2u);
  EXPECT_EQ(read_run((root / "vit").string(), fake_facts).size(), 1u);
  o.output = (root / "t.json").string();
  const xdino::Json j = xdino::parse_json(write_report(o, fake_facts), "t.json");
  EXPECT_EQ(j["rows"][1]["batch_norm"], "data");
  EXPECT_EQ(j["rows"][1]["batch_norm_images"], 6000);
  EXPECT_EQ(j["rows"][1]["knn"], 41.96);
  EXPECT_EQ(j["rows"][1]["run"], (root / "bn").string());
  EXPECT_EQ(j["rows"][2]["batch_norm"], "none");
  o.output = (root / "t.csv").string();
  EXPECT_NE(
      write_report(o, fake_facts)
          .find("\"Random init, BatchNorm statistics of the data\",XCiT-S12/16,26M,4.9B,–,42.0"),
      std::string::npos);
  fs::remove_all(root);
}

// A DINO row names the training run's recipe when DINOv2's options were on (ssl/recipe.h): the
// report reads them from the config.ini `dino train` wrote beside the weights.
TEST(Report, TheDinoRowNamesTheTrainingRecipe) {
  const fs::path root = fresh_dir("report_recipe");
  write(root / "train/config.ini",
        "[train]\narch = xcit_small_12_p16\nkoleo_loss_weight = 0.1\ncentering = sinkhorn_knopp\n"
        "ibot_loss_weight = 1.0\nibot_separate_head = false\n");
  write(root / "train/checkpoint.pth", "");
  write(root / "knn/config.ini", "[knn]\narch = xcit_small_12_p16\npretrained_weights = " +
                                     (root / "train/checkpoint.pth").string() + "\n");
  write(root / "knn/knn.json", R"J({"reported": {"k": 20, "top1": 70.0, "top5": 90.0}})J");
  // The same with a training run of DINO alone (no such keys): "DINO".
  write(root / "plain/config.ini", "[train]\narch = xcit_small_12_p16\n");
  write(root / "plain/checkpoint.pth", "");
  write(root / "knn2/config.ini", "[knn]\narch = xcit_small_12_p16\npretrained_weights = " +
                                      (root / "plain/checkpoint.pth").string() + "\n");
  write(root / "knn2/knn.json", R"J({"reported": {"k": 20, "top1": 60.0, "top5": 90.0}})J");
  ReportOptions o;
  o.runs = {(root / "knn").string(), (root / "knn2").string()};
  o.output = "-";
  const std::string text = write_report(o, fake_facts);
  EXPECT_NE(text.find("| DINO + KoLeo 0.1 + Sinkhorn-Knopp + iBOT 1.0 | XCiT-S12/16 |"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("| DINO | XCiT-S12/16 |"), std::string::npos) << text;
  fs::remove_all(root);
}
