// `dino copy_detection` and `dino retrieval` end to end on small sets in the real layouts
// (tests/data/retrieval/make_sets.py builds them from python3-skimage's photos), against
// tests/support/retrieval_reference.py: Python recomputing every number from the feature files
// our run dumped, by the official scripts' definitions (whitening, top-20, eval_result,
// compute_map with junk). The gnd pickle is written by our pickler and read by Python's; a
// gnd pickle Python wrote (protocols 2 and 4) is read by ours. Bad inputs: one line each.
// Skipped (failing in CI, tests/support/require.h) without Python torch/h5py/PIL or skimage.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/json.h"
#include "core/python_format.h"
#include "eval/retrieval/image_retrieval.h"
#include "eval/retrieval/ranking.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/retrieval_fixture.h"

namespace fs = std::filesystem;
using xdino::Json;
using xdino::testing::ground_from_json;
using xdino::testing::kPython;
using xdino::testing::last_line;
using xdino::testing::python_lacks;
using xdino::testing::repo_file;
using xdino::testing::run_process;
namespace retrieval = xdino::eval::retrieval;

namespace {

// What the Python references import.
const std::vector<std::string> kRetrievalModules = {"torch", "h5py", "PIL", "skimage"};

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return xdino::parse_json(s.str(), path.string());
}

Json run_reference(const std::string& which, const fs::path& features, const fs::path& data) {
  const auto r = run_process(
      {kPython, repo_file("tests/support/retrieval_reference.py"), which, features, data});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return xdino::parse_json(r.out, "retrieval_reference.py");
}

class RetrievalEval : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = xdino::testing::fresh_dir("retrieval_eval");
    if (!python_lacks(kRetrievalModules).empty()) return;
    for (const char* set : {"copydays", "revisited"}) {
      const auto r = run_process(
          {kPython, repo_file("tests/data/retrieval/make_sets.py"), set, (dir_ / set).string()});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    write_revisited_ground(dir_ / "revisited" / "roxford5k" / "gnd_roxford5k.pkl",
                           ground_from_json(dir_ / "revisited" / "ground.json"));
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path RetrievalEval::dir_;

}  // namespace

TEST_F(RetrievalEval, CopyDetectionMatchesThePythonReference) {
  const std::string missing = python_lacks(kRetrievalModules);
  if (!missing.empty()) XDINO_SKIP_MISSING() << missing;
  const fs::path data = dir_ / "copydays", out = dir_ / "copy_out";
  const auto r = run_process({xdino::testing::dino_binary(),
                              "copy_detection",
                              "--use_cuda",
                              "false",
                              "--data_path",
                              data.string(),
                              "--whitening_path",
                              (data / "whitening").string(),
                              "--distractors_path",
                              (data / "distractors").string(),
                              "--arch",
                              "vit_tiny",
                              "--patch_size",
                              "16",
                              "--imsize",
                              "64",
                              "--output_dir",
                              out.string(),
                              "--num_workers",
                              "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("eval on strong mAP="), std::string::npos) << r.out;
  const Json ours = read_json(out / "copy_detection.json");
  EXPECT_EQ(ours["num_queries"], 12 * 19 + 24);  // 19 blocks of 12 (originals too), 24 strong
  EXPECT_EQ(ours["num_database"], 12 + 10);
  EXPECT_EQ(ours["num_whitening"], 24);
  const Json ref = run_reference("copydays", out / "copy_detection_features", data);
  ASSERT_EQ(ref["blocks"].size(), 20u);
  for (const auto& [block, value] : ref["blocks"].items())
    EXPECT_NEAR(ours["blocks"][block].get<double>(), 100.0 * value.get<double>(), 1e-9) << block;
  EXPECT_NEAR(ours["strong_mAP"].get<double>(), 100.0 * ref["strong"].get<double>(), 1e-9);
  EXPECT_NEAR(ours["mAP"].get<double>(), 100.0 * ref["all"].get<double>(), 1e-9);
  // Not a trivially perfect set: the strong edits and large crops are hard for random weights.
  EXPECT_LT(ours["strong_mAP"].get<double>(), 99.0);
}

TEST_F(RetrievalEval, RetrievalMatchesThePythonReference) {
  const std::string missing = python_lacks(kRetrievalModules);
  if (!missing.empty()) XDINO_SKIP_MISSING() << missing;
  for (const char* multiscale : {"false", "true"}) {
    const fs::path out = dir_ / (std::string("retrieval_out_") + multiscale);
    const auto r = run_process({xdino::testing::dino_binary(),
                                "retrieval",
                                "--use_cuda",
                                multiscale,
                                "--data_path",
                                (dir_ / "revisited").string(),
                                "--dataset",
                                "roxford5k",
                                "--multiscale",
                                multiscale,
                                "--arch",
                                "vit_tiny",
                                "--patch_size",
                                "16",
                                "--imsize",
                                "96",
                                "--output_dir",
                                out.string(),
                                "--num_workers",
                                "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(">> roxford5k: mAP M: "), std::string::npos) << r.out;
    const Json ours = read_json(out / "retrieval.json");
    // Python's pickle reads the gnd file our pickler wrote.
    const Json ref = run_reference("revisited", out / "retrieval_features",
                                   dir_ / "revisited" / "roxford5k" / "gnd_roxford5k.pkl");
    EXPECT_EQ(ref["imlist"], ours["num_database"]);
    EXPECT_EQ(ref["qimlist"], ours["num_queries"]);
    EXPECT_NEAR(ours["mAP_M"].get<double>(), 100.0 * ref["mapM"].get<double>(), 1e-9);
    EXPECT_NEAR(ours["mAP_H"].get<double>(), 100.0 * ref["mapH"].get<double>(), 1e-9);
    const char* ks[] = {"1", "5", "10"};
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(ours["mP@k_M"][ks[k]].get<double>(), 100.0 * ref["mprM"][k].get<double>(), 1e-9);
      EXPECT_NEAR(ours["mP@k_H"][ks[k]].get<double>(), 100.0 * ref["mprH"][k].get<double>(), 1e-9);
    }
    // The two lines eval_image_retrieval.py prints, made by numpy from the reference's scores.
    std::vector<std::string> argv{kPython, "-c",
                                  "import numpy as np, sys\n"
                                  "a = [float(x) for x in sys.argv[1:]]\n"
                                  "r = lambda v: np.around(np.array(v) * 100, decimals=2)\n"
                                  "print('>> roxford5k: mAP M: {}, H: {}'.format("
                                  "np.around(a[0] * 100, decimals=2), "
                                  "np.around(a[1] * 100, decimals=2)))\n"
                                  "print('>> roxford5k: mP@k{} M: {}, H: {}'.format("
                                  "np.array([1, 5, 10]), r(a[2:5]), r(a[5:8])))\n"};
    for (const char* key : {"mapM", "mapH"})
      argv.push_back(xdino::python_repr(ref[key].get<double>()));
    for (const char* key : {"mprM", "mprH"})
      for (int k = 0; k < 3; ++k) argv.push_back(xdino::python_repr(ref[key][k].get<double>()));
    const auto lines = run_process(argv);
    ASSERT_EQ(lines.exit_code, 0) << lines.err;
    size_t at = 0;
    for (size_t end; (end = lines.out.find('\n', at)) != std::string::npos; at = end + 1)
      EXPECT_NE(r.out.find(lines.out.substr(at, end - at)), std::string::npos)
          << "the script prints '" << lines.out.substr(at, end - at) << "'; we print:\n"
          << r.out;
    EXPECT_LT(ours["mAP_H"].get<double>(), 99.0) << multiscale;
  }
}

TEST_F(RetrievalEval, ReadsTheGroundTruthPythonPickled) {
  const std::string missing = python_lacks(kRetrievalModules);
  if (!missing.empty()) XDINO_SKIP_MISSING() << missing;
  const retrieval::RevisitedGround expected = ground_from_json(dir_ / "revisited" / "ground.json");
  for (const char* protocol : {"2", "4"}) {
    const fs::path pkl = dir_ / (std::string("python_") + protocol + ".pkl");
    const auto r =
        run_process({kPython, "-c",
                     "import json, pickle, sys; g = json.load(open(sys.argv[1])); "
                     "pickle.dump(g, open(sys.argv[2], 'wb'), protocol=int(sys.argv[3]))",
                     (dir_ / "revisited" / "ground.json").string(), pkl.string(), protocol});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const retrieval::RevisitedGround g = retrieval::read_revisited_ground(pkl);
    EXPECT_EQ(g.imlist, expected.imlist);
    EXPECT_EQ(g.qimlist, expected.qimlist);
    ASSERT_EQ(g.gnd.size(), expected.gnd.size());
    for (size_t q = 0; q < g.gnd.size(); ++q) {
      EXPECT_EQ(g.gnd[q].easy, expected.gnd[q].easy);
      EXPECT_EQ(g.gnd[q].hard, expected.gnd[q].hard);
      EXPECT_EQ(g.gnd[q].junk, expected.gnd[q].junk);
      EXPECT_EQ(g.gnd[q].bbx, expected.gnd[q].bbx);
    }
  }
}

TEST_F(RetrievalEval, BadInputsGetOneLine) {
  const std::string missing = python_lacks(kRetrievalModules);
  if (!missing.empty()) XDINO_SKIP_MISSING() << missing;
  // A gnd whose indices point past the image list.
  retrieval::RevisitedGround g = ground_from_json(dir_ / "revisited" / "ground.json");
  g.gnd[1].hard.push_back(static_cast<int64_t>(g.imlist.size()) + 3);
  const fs::path bad = dir_ / "bad_gnd";
  fs::create_directories(bad / "roxford5k");
  fs::create_directory_symlink(fs::absolute(dir_ / "revisited" / "roxford5k" / "jpg"),
                               bad / "roxford5k" / "jpg");
  write_revisited_ground(bad / "roxford5k" / "gnd_roxford5k.pkl", g);
  auto r = run_process({xdino::testing::dino_binary(), "retrieval", "--data_path", bad.string(),
                        "--arch", "vit_tiny", "--output_dir", (dir_ / "bad_out").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(last_line(r.err).find("gnd[1] 'hard' holds index " +
                                  std::to_string(g.imlist.size() + 3) + ", outside the " +
                                  std::to_string(g.imlist.size()) + " images of imlist"),
            std::string::npos)
      << r.err;

  // A Copydays root with a block missing.
  const fs::path partial = dir_ / "partial_copydays";
  fs::create_directories(partial);
  fs::create_directory_symlink(fs::absolute(dir_ / "copydays" / "original"), partial / "original");
  r = run_process({xdino::testing::dino_binary(), "copy_detection", "--data_path", partial.string(),
                   "--arch", "vit_tiny", "--output_dir", (dir_ / "bad_out").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(last_line(r.err).find("Copydays block 'strong' is missing"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "bad_out" / "copy_detection.json"));
}

TEST(RetrievalRanking, JunkIsSkippedAndPrecisionCapsAtTheLastPositive) {
  // Database of 6, one query ranking [3, 0, 5, 1, 4, 2]: ok {0, 2}, junk {3}.
  // Positions of ok: 1 and 5; junk at 0 lowers both by one -> 0 and 4.
  // AP = (1 + 1)/2 * 1/2 + (1/4 + 2/5)/2 * 1/2 = 0.5 + 0.1625 = 0.6625.
  const torch::Tensor ranks = torch::tensor({3, 0, 5, 1, 4, 2}, torch::kInt64).view({6, 1});
  const auto m = retrieval::compute_map(ranks, {{{0, 2}, {3}}}, {1, 5, 10});
  EXPECT_NEAR(m.map, 0.6625, 1e-12);
  // 1-based lowered positions 1 and 5: P@1 = 1, P@5 = 2/5, P@10 capped at 5 -> 2/5.
  EXPECT_NEAR(m.mean_precision[0], 1.0, 1e-12);
  EXPECT_NEAR(m.mean_precision[1], 0.4, 1e-12);
  EXPECT_NEAR(m.mean_precision[2], 0.4, 1e-12);
  // A query without positives is left out of the means.
  const torch::Tensor two = torch::cat({ranks, ranks}, 1);
  const auto e = retrieval::compute_map(two, {{{0, 2}, {3}}, {{}, {1}}}, {1});
  EXPECT_EQ(e.empty, 1);
  EXPECT_NEAR(e.map, 0.6625, 1e-12);
  EXPECT_TRUE(std::isnan(e.aps[1]));
}
