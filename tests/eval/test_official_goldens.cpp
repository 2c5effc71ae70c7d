// The retrieval and video evaluations against golden values that the official functions
// themselves computed (tests/data/eval_goldens/make_official_goldens.py ran them from checkouts
// of facebookresearch/dino and davis2017-evaluation, which are not part of this project, on
// seeded inputs stored beside the outputs in official_goldens.pth):
//  - utils.compute_map: mAP, per-query AP, mP@k and per-query P@k, with an empty query and one
//    without a junk list;
//  - eval_copy_detection.py: whitening (utils.PCA), normalisation, top-20 and eval_result's
//    per-block mAP, with and without whitening;
//  - utils.multi_scale with a stand-in model whose output depends on every interpolated pixel;
//  - restrict_neighborhood, label_propagation (with and without the window) and norm_mask;
//  - davis2017's db_eval_iou, db_eval_boundary (cv2.dilate; three tolerances) and
//    db_statistics.
// Tolerances: index outputs and AP values exactly equal (to 1e-12); float32 tensor outputs
// within a few ulps of their magnitude (the two sides sum in different orders).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "core/ivalue.h"
#include "core/pth.h"
#include "eval/retrieval/copy_detection.h"
#include "eval/retrieval/features.h"
#include "eval/retrieval/ranking.h"
#include "eval/video/davis_metrics.h"
#include "eval/video/label_propagation.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
namespace retrieval = xdino::eval::retrieval;
namespace video = xdino::eval::video;
using xdino::IDict;

namespace {

const IDict& official_goldens() {
  static const IDict g = xdino::as_dict(xdino::load_pth(fs::path(xdino::testing::test_data_dir()) /
                                                        "eval_goldens" / "official_goldens.pth"),
                                        "official_goldens.pth");
  return g;
}

IDict section(const IDict& d, const std::string& key) {
  return xdino::as_dict(xdino::get(d, key, "goldens"), key);
}
torch::Tensor tensor(const IDict& d, const std::string& key) {
  return xdino::get(d, key, "goldens").toTensor();
}
std::vector<torch::Tensor> tensors(const IDict& d, const std::string& key) {
  std::vector<torch::Tensor> out;
  for (const c10::IValue& v : xdino::get(d, key, "goldens").toListRef())
    out.push_back(v.toTensor());
  return out;
}
std::vector<std::string> strings(const IDict& d, const std::string& key) {
  std::vector<std::string> out;
  for (const c10::IValue& v : xdino::get(d, key, "goldens").toListRef())
    out.push_back(v.toStringRef());
  return out;
}
std::vector<int64_t> ints(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// NaN where the golden is NaN, else within `tol`.
void expect_near_golden(double ours, double golden, double tol, const std::string& what) {
  if (std::isnan(golden)) {
    EXPECT_TRUE(std::isnan(ours)) << what << ": " << ours << ", official NaN";
  } else {
    EXPECT_NEAR(ours, golden, tol) << what;
  }
}

// Largest |a - b| relative to the largest |b|.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max() /
          b.to(torch::kFloat64).abs().max())
      .item<double>();
}

cv::Mat frame(const torch::Tensor& stack, int64_t t) {
  const torch::Tensor f = stack[t].contiguous();
  return cv::Mat(static_cast<int>(f.size(0)), static_cast<int>(f.size(1)), CV_8UC1,
                 f.data_ptr<uint8_t>())
      .clone();
}

// The golden's Copydays layout: its blocks under the script's names, in the script's order.
retrieval::CopydaysLayout copydays_layout(const IDict& g) {
  retrieval::CopydaysLayout layout;
  for (const std::string& name : strings(g, "block_names"))
    layout.blocks.push_back({name, strings(g, name == "strong" ? "strong" : "originals")});
  return layout;
}

}  // namespace

TEST(OfficialGoldens, ComputeMapIsUtilsComputeMap) {
  const IDict g = section(official_goldens(), "compute_map");
  const std::vector<torch::Tensor> ok = tensors(g, "ok"), junk = tensors(g, "junk");
  std::vector<retrieval::QueryGround> ground;
  for (size_t q = 0; q < ok.size(); ++q) ground.push_back({ints(ok[q]), ints(junk[q])});
  const retrieval::MapResult r =
      retrieval::compute_map(tensor(g, "ranks"), ground, ints(tensor(g, "kappas")));
  expect_near_golden(r.map, xdino::as_double(xdino::get(g, "map", "goldens"), "map"), 1e-12, "mAP");
  const torch::Tensor aps = tensor(g, "aps"), pr = tensor(g, "pr"), prs = tensor(g, "prs");
  ASSERT_EQ(r.aps.size(), static_cast<size_t>(aps.size(0)));
  EXPECT_EQ(r.empty, 1);  // query 2 has no positive
  for (int64_t q = 0; q < aps.size(0); ++q) {
    expect_near_golden(r.aps[q], aps[q].item<double>(), 1e-12, "AP of query " + std::to_string(q));
    for (int64_t k = 0; k < prs.size(1); ++k)
      expect_near_golden(r.precision[q][k], prs[q][k].item<double>(), 1e-12,
                         "P@k of query " + std::to_string(q) + ", kappa " + std::to_string(k));
  }
  for (int64_t k = 0; k < pr.size(0); ++k)
    expect_near_golden(r.mean_precision[k], pr[k].item<double>(), 1e-12,
                       "mP@k " + std::to_string(k));
}

TEST(OfficialGoldens, CopyDetectionIsTheScriptsSearchAndEvalResult) {
  const IDict g = section(official_goldens(), "copydays");
  const std::vector<std::string> names = strings(g, "block_names");
  ASSERT_EQ(names, retrieval::CopydaysLayout::block_names());
  const retrieval::CopydaysLayout layout = copydays_layout(g);
  const torch::Tensor queries = tensor(g, "queries"), database = tensor(g, "database");
  for (const char* mode : {"plain", "whitened"}) {
    SCOPED_TRACE(mode);
    const IDict expected = section(g, mode);
    const torch::Tensor whitening =
        std::string(mode) == "whitened" ? tensor(g, "whitening") : torch::Tensor();
    const torch::Tensor ids = retrieval::search_copies(queries, database, whitening, 20);
    EXPECT_TRUE(torch::equal(ids, tensor(expected, "ids")));
    const retrieval::CopyDetectionScores s = retrieval::evaluate_copy_detection(layout, ids);
    const torch::Tensor block_map = tensor(expected, "block_map");
    ASSERT_EQ(s.block_map.size(), static_cast<size_t>(block_map.size(0)));
    double strong = -1;
    for (size_t b = 0; b < s.block_map.size(); ++b) {
      EXPECT_NEAR(s.block_map[b], block_map[b].item<double>(), 1e-12) << names[b];
      if (names[b] == "strong") strong = block_map[b].item<double>();
    }
    EXPECT_NEAR(s.strong_map, strong, 1e-12);
    EXPECT_NEAR(s.overall_map, tensor(expected, "aps").mean().item<double>(), 1e-12);
  }
  // Not a degenerate case: whitening changed the ranking, and some queries miss.
  EXPECT_FALSE(
      torch::equal(tensor(section(g, "plain"), "ids"), tensor(section(g, "whitened"), "ids")));
  EXPECT_LT(tensor(section(g, "whitened"), "aps").min().item<double>(), 0.5);
}

// The same search with every tensor on a card (`dino copy_detection --use_cuda`): the
// whitening is learned on the CPU and applied on the card. The ids may differ from the
// golden's only where two cosines tie within float32's rounding, so the per-block mAP is
// compared, within 1e-6.
TEST(OfficialGoldens, CopyDetectionSearchOnCudaGivesTheGoldenScores) {
  XDINO_SKIP_WITHOUT_CUDA();
  const IDict g = section(official_goldens(), "copydays");
  const torch::Tensor queries = tensor(g, "queries").cuda(),
                      database = tensor(g, "database").cuda();
  const retrieval::CopydaysLayout layout = copydays_layout(g);
  const IDict expected = section(g, "whitened");
  const torch::Tensor ids =
      retrieval::search_copies(queries, database, tensor(g, "whitening").cuda(), 20);
  EXPECT_TRUE(ids.is_cuda());
  const retrieval::CopyDetectionScores s = retrieval::evaluate_copy_detection(layout, ids);
  const torch::Tensor block_map = tensor(expected, "block_map");
  ASSERT_EQ(s.block_map.size(), static_cast<size_t>(block_map.size(0)));
  for (size_t b = 0; b < s.block_map.size(); ++b)
    EXPECT_NEAR(s.block_map[b], block_map[b].item<double>(), 1e-6) << b;
}

TEST(OfficialGoldens, MultiScaleIsUtilsMultiScale) {
  const IDict g = section(official_goldens(), "multi_scale");
  // The stand-in model of make_official_goldens.py (probe_model).
  const retrieval::FeatureFunction probe = [](const torch::Tensor& x) {
    const int64_t h = x.size(2), w = x.size(3);
    const torch::Tensor ys = torch::linspace(-1, 1, h).view({1, 1, h, 1});
    const torch::Tensor xs = torch::linspace(-1, 1, w).view({1, 1, 1, w});
    return torch::cat(
        {x.mean({2, 3}), (x * ys).mean({2, 3}), (x * xs).mean({2, 3}), (x * x).mean({2, 3})}, 1);
  };
  const torch::Tensor ours = retrieval::multi_scale_feature(probe, tensor(g, "images"));
  const torch::Tensor official = tensor(g, "features");
  ASSERT_EQ(ours.sizes(), official.sizes());
  EXPECT_LT(relative_error(ours, official), 1e-6);
}

TEST(OfficialGoldens, LabelPropagationIsTheScripts) {
  for (const c10::IValue& item :
       xdino::get(official_goldens(), "propagation", "goldens").toListRef()) {
    const IDict c = xdino::as_dict(item, "propagation case");
    const int64_t radius = xdino::as_int(xdino::get(c, "radius", "goldens"), "radius");
    SCOPED_TRACE("radius " + std::to_string(radius));
    const torch::Tensor segs = tensor(c, "segs");
    const int64_t h = segs.size(2), w = segs.size(3);
    torch::Tensor mask;
    if (radius > 0) {
      mask = video::neighbourhood_mask(h, w, radius);
      EXPECT_TRUE(torch::equal(mask, tensor(c, "neighbourhood")));
    }
    const torch::Tensor ours =
        video::propagate(tensor(c, "target"), tensor(c, "sources"), segs, mask,
                         xdino::as_int(xdino::get(c, "topk", "goldens"), "topk"));
    const torch::Tensor official = tensor(c, "result");
    ASSERT_EQ(ours.sizes(), official.sizes());
    EXPECT_LT(relative_error(ours, official), 1e-5);
  }
  const IDict n = section(official_goldens(), "norm_mask");
  EXPECT_LT(relative_error(video::norm_mask(tensor(n, "input").clone()), tensor(n, "output")),
            1e-6);
}

TEST(OfficialGoldens, JAndFAreTheDavis2017Toolkits) {
  const IDict g = section(official_goldens(), "davis");
  const torch::Tensor gt = tensor(g, "gt"), pred = tensor(g, "pred"), void_ = tensor(g, "void");
  const torch::Tensor j = tensor(g, "j"), f = tensor(g, "f"), f_no_void = tensor(g, "f_no_void");
  const torch::Tensor f_wide = tensor(g, "f_wide"), f_pixels = tensor(g, "f_pixels");
  for (int64_t t = 0; t < gt.size(0); ++t) {
    const cv::Mat a = frame(gt, t), b = frame(pred, t), v = frame(void_, t);
    const std::string at = "frame " + std::to_string(t);
    EXPECT_NEAR(video::region_similarity(a, b, v), j[t].item<double>(), 1e-12) << at;
    EXPECT_NEAR(video::boundary_measure(a, b, v), f[t].item<double>(), 1e-12) << at;
    EXPECT_NEAR(video::boundary_measure(a, b, cv::Mat()), f_no_void[t].item<double>(), 1e-12) << at;
    EXPECT_NEAR(video::boundary_measure(a, b, v, 0.015), f_wide[t].item<double>(), 1e-12) << at;
    EXPECT_NEAR(video::boundary_measure(a, b, v, 3.0), f_pixels[t].item<double>(), 1e-12) << at;
  }
  for (const auto& [values, key] :
       {std::pair{tensor(g, "per_frame"), "statistics"}, std::pair{j, "statistics_j"}}) {
    const torch::Tensor v = values.contiguous();
    const video::Statistics s =
        video::statistics({v.data_ptr<double>(), v.data_ptr<double>() + v.numel()});
    const torch::Tensor expected = tensor(g, key);
    EXPECT_NEAR(s.mean, expected[0].item<double>(), 1e-12) << key;
    EXPECT_NEAR(s.recall, expected[1].item<double>(), 1e-12) << key;
    EXPECT_NEAR(s.decay, expected[2].item<double>(), 1e-12) << key;
  }
}
