// DINOv2's additions against dinov2's own functions: tests/data/dinov2/make_goldens.py ran
// facebookresearch/dinov2's loss modules (KoLeoLoss, DINOLoss's and iBOTPatchLoss's
// Sinkhorn-Knopp and centring, iBOTPatchLoss.forward_masked), its MaskingGenerator and
// collate_data_and_cast on seeded inputs, and stored inputs and outputs (gradients included)
// in dinov2_goldens.pth. Each case feeds the same inputs to ours (ssl/koleo.h,
// ssl/sinkhorn_knopp.h, ssl/ibot_loss.h, ssl/masking.h, ssl/loss.h):
//  - KoLeo: loss, nearest neighbours and gradients of three inputs (a duplicated row, norms
//    from 1e-4 to 1e4), and its use per view in the meta-architecture;
//  - Sinkhorn-Knopp: DINO's (B = rows) and iBOT's (B = the masked patches' count);
//  - iBOT: the loss and gradient, masks_weight, and the centre's deferred EMA;
//  - masks: dinov2's recorded boxes replayed through place_block give its masks; collate's
//    indices, weights, strata and counts;
//  - the whole step's loss (spec §4) for both centerings: DINO's terms, KoLeo, iBOT, their
//    sum, and the gradient of the sum with respect to every student output.
// Tolerances: float64 where dinov2 keeps float64 (KoLeo, iBOT's loss: 1e-12 relative);
// float32 where either side computes in float32 (Sinkhorn-Knopp, the centred softmax, DINO's
// log-softmax: a few ulps, 2e-6 relative).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "ssl/ibot_loss.h"
#include "ssl/koleo.h"
#include "ssl/loss.h"
#include "ssl/masking.h"
#include "ssl/sinkhorn_knopp.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::IDict;
using xdino::local_communicator;

namespace xdino::ssl {
namespace {

const IDict& goldens() {
  static const IDict g =
      as_dict(load_pth(fs::path(testing::test_data_dir()) / "dinov2" / "dinov2_goldens.pth"),
              "dinov2_goldens.pth");
  return g;
}
IDict section(const IDict& d, const std::string& key) {
  return as_dict(get(d, key, "goldens"), key);
}
torch::Tensor tensor(const IDict& d, const std::string& key) {
  return get(d, key, "goldens").toTensor();
}
double number(const IDict& d, const std::string& key) {
  return as_double(get(d, key, "goldens"), key);
}
int64_t whole(const IDict& d, const std::string& key) {
  return as_int(get(d, key, "goldens"), key);
}
std::vector<IDict> cases(const IDict& d, const std::string& key) {
  std::vector<IDict> out;
  for (const c10::IValue& v : get(d, key, "goldens").toListRef()) out.push_back(as_dict(v, key));
  return out;
}
IDict collate_case(const std::string& name) {
  for (const IDict& c : cases(section(goldens(), "collate"), "cases"))
    if (get(c, "name", "case").toStringRef() == name) return c;
  throw xdino::Error("no collate case " + name + " in dinov2_goldens.pth");
}

// Largest |a - b| over the largest |b|; shapes must agree.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  if (a.sizes() != b.sizes()) return 1e300;
  if (b.numel() == 0) return 0;
  const torch::Tensor x = a.to(torch::kDouble), y = b.to(torch::kDouble);
  const double scale = std::max(y.abs().max().item<double>(), 1e-300);
  return (x - y).abs().max().item<double>() / scale;
}

double scalar(const torch::Tensor& t) { return t.to(torch::kDouble).item<double>(); }

TEST(Dinov2Goldens, KoLeoMatchesDinov2OnEveryCase) {
  for (const IDict& c : cases(section(goldens(), "koleo"), "cases")) {
    const std::string name = get(c, "name", "case").toStringRef();
    const torch::Tensor x = tensor(c, "x").clone().requires_grad_(true);
    const torch::Tensor loss = koleo_loss(x);
    loss.backward();
    EXPECT_EQ(loss.scalar_type(), torch::kDouble) << name;
    EXPECT_NEAR(scalar(loss), number(c, "loss"), 1e-12 * std::abs(number(c, "loss"))) << name;
    EXPECT_LT(relative_error(x.grad(), tensor(c, "grad")), 1e-10) << name;
  }
  // Its use in the meta-architecture: per view chunk of b rows, summed, times the weight.
  const IDict ssl = section(section(goldens(), "koleo"), "ssl");
  const torch::Tensor cls = tensor(ssl, "cls").clone().requires_grad_(true);
  const int64_t b = whole(ssl, "b");
  const torch::Tensor loss =
      (koleo_loss(cls.narrow(0, 0, b)) + koleo_loss(cls.narrow(0, b, b))) * number(ssl, "weight");
  loss.backward();
  EXPECT_NEAR(scalar(loss), number(ssl, "loss"), 1e-12 * std::abs(number(ssl, "loss")));
  EXPECT_LT(relative_error(cls.grad(), tensor(ssl, "grad")), 1e-10);
}

TEST(Dinov2Goldens, KoLeoOfADuplicatedRowIsLargeAndFinite) {
  // dinov2's eps: d = 1e-8 sqrt(D) between the twins, so -log(d) ~ 17 each.
  for (const IDict& c : cases(section(goldens(), "koleo"), "cases")) {
    if (get(c, "name", "case").toStringRef() != "duplicate") continue;
    const torch::Tensor x = tensor(c, "x").clone().requires_grad_(true);
    const torch::Tensor loss = koleo_loss(x);
    loss.backward();
    EXPECT_GT(scalar(loss), 5.0);
    EXPECT_TRUE(x.grad().isfinite().all().item<bool>());
  }
}

TEST(Dinov2Goldens, SinkhornKnoppOfDinoAndOfIbotMatchDinov2) {
  auto comm = local_communicator();
  for (const IDict& c : cases(section(goldens(), "dino"), "sk")) {
    const torch::Tensor logits = tensor(c, "logits");
    const torch::Tensor q =
        sinkhorn_knopp(logits, number(c, "teacher_temp"), static_cast<double>(logits.size(0)),
                       whole(c, "n_iterations"), *comm);
    EXPECT_EQ(q.scalar_type(), torch::kFloat);
    EXPECT_LT(relative_error(q, tensor(c, "out")), 2e-6)
        << "DINO, temp " << number(c, "teacher_temp");
    EXPECT_LT((q.sum(1) - 1).abs().max().item<float>(), 2e-6);
  }
  for (const IDict& c : cases(section(goldens(), "ibot"), "sk")) {
    const double masked = scalar(tensor(c, "n_masked_patches_in"));
    const torch::Tensor q =
        sinkhorn_knopp(tensor(c, "logits"), number(c, "teacher_temp"), masked, 3, *comm);
    EXPECT_LT(relative_error(q, tensor(c, "out")), 2e-6)
        << "iBOT, temp " << number(c, "teacher_temp");
  }
}

TEST(Dinov2Goldens, IbotLossAndWeightsMatchDinov2) {
  const IDict fm = section(section(goldens(), "ibot"), "forward_masked");
  const torch::Tensor masks = tensor(fm, "masks");
  const BatchMasks ours = batch_masks(masks);
  EXPECT_TRUE(torch::equal(ours.weights, tensor(fm, "masks_weight"))) << "masks_weight, float32";
  IbotLossOptions o;
  o.out_dim = tensor(fm, "student").size(1);
  iBOTPatchLoss loss_module(o, local_communicator());
  const torch::Tensor student = tensor(fm, "student").clone().requires_grad_(true);
  const torch::Tensor loss =
      loss_module->forward_masked(student, tensor(fm, "teacher"), ours.weights, masks.size(0));
  loss.backward();
  EXPECT_NEAR(scalar(loss), number(fm, "loss"), 1e-12 * std::abs(number(fm, "loss")));
  EXPECT_LT(relative_error(student.grad(), tensor(fm, "grad")), 1e-10);
}

TEST(Dinov2Goldens, IbotCentreIsDinov2sDeferredAverage) {
  const IDict c = section(section(goldens(), "ibot"), "center");
  const double temp = number(c, "teacher_temp");
  IbotLossOptions o;
  o.out_dim = tensor(c, "logits1").size(1);
  o.center_momentum = number(c, "center_momentum");
  iBOTPatchLoss loss(o, local_communicator());
  const auto flat = [](const torch::Tensor& t) { return t.reshape({1, -1}); };
  EXPECT_LT((loss->center - flat(tensor(c, "center1"))).abs().max().item<double>(), 1e-30);
  for (int step : {1, 2}) {
    const torch::Tensor logits = tensor(c, "logits" + std::to_string(step));
    IbotCenterSums sums;
    const torch::Tensor p = loss->targets_micro(logits, temp, logits.size(0), sums);
    EXPECT_LT(relative_error(p, tensor(c, "probs" + std::to_string(step))), 2e-6) << step;
    loss->update_center(sums);  // what the next step uses
    EXPECT_LT(relative_error(loss->center, flat(tensor(c, "center" + std::to_string(step + 1)))),
              2e-6)
        << step;
  }
}

TEST(Dinov2Goldens, RecordedBoxesReplayIntoDinov2sMasks) {
  for (const IDict& c : cases(section(goldens(), "masking"), "cases")) {
    const int64_t h_grid = whole(c, "H"), w_grid = whole(c, "W"), requested = whole(c, "requested");
    const double max_patches = number(c, "max_num_patches");
    EXPECT_EQ(max_num_patches_for(whole(c, "crop_size"), whole(c, "patch_size")), max_patches);
    torch::Tensor mask = torch::zeros({h_grid, w_grid}, torch::kBool);
    const torch::Tensor blocks = tensor(c, "blocks");
    int64_t done = 0;
    for (int64_t i = 0; i < blocks.size(0); ++i) {
      const auto row = blocks[i];
      const double m = row[0].item<double>();
      const int64_t delta = row[1].item<int64_t>();
      EXPECT_EQ(m, std::min(static_cast<double>(requested - done), max_patches));
      if (delta == 0) break;
      const int64_t added = BlockMaskGenerator::place_block(
          mask.data_ptr<bool>(), w_grid, row[2].item<int64_t>(), row[3].item<int64_t>(),
          row[4].item<int64_t>(), row[5].item<int64_t>(), m);
      EXPECT_EQ(added, delta) << "seed " << whole(c, "seed") << " block " << i;
      done += added;
    }
    EXPECT_TRUE(torch::equal(mask, tensor(c, "mask"))) << "seed " << whole(c, "seed");
    EXPECT_EQ(done, whole(c, "count"));
  }
}

TEST(Dinov2Goldens, CollateIndicesWeightsAndStrataAreDinov2s) {
  for (const IDict& c : cases(section(goldens(), "collate"), "cases")) {
    const std::string name = get(c, "name", "case").toStringRef();
    const BatchMasks ours = batch_masks(tensor(c, "collated_masks"));
    EXPECT_TRUE(torch::equal(ours.indices, tensor(c, "mask_indices_list"))) << name;
    EXPECT_TRUE(torch::equal(ours.weights, tensor(c, "masks_weight"))) << name;
    EXPECT_EQ(ours.count(), scalar(tensor(c, "n_masked_patches"))) << name;
    const int64_t images = whole(c, "B_g");
    const double probability = number(c, "mask_probability");
    const auto masked = static_cast<int64_t>(static_cast<double>(images) * probability);
    EXPECT_EQ(masked, whole(c, "n_samples_masked")) << name;
    const torch::Tensor strata = torch::linspace(
        number(c, "mask_ratio_min"), number(c, "mask_ratio_max"), masked + 1, torch::kFloat);
    EXPECT_TRUE(torch::equal(strata, tensor(c, "probs"))) << name;
  }
}

// Spec §4 for one step of b = 3 images, 2 local crops: our DINOLoss (v1's mean over the 2L + 2
// pairs, in either centering) + 0.1 KoLeo per view + iBOT at the masks of collate case "loss".
void expect_total_matches(const std::string& variant) {
  const IDict tot = section(goldens(), "total");
  const IDict want = section(tot, variant);
  const bool sinkhorn = variant == "sinkhorn_knopp";
  const int64_t b = whole(tot, "b"), locals = whole(tot, "n_local_crops"), K = whole(tot, "K");
  const double temp = number(tot, "teacher_temp");
  const IDict masks_case = collate_case(get(tot, "masks_case", "total").toStringRef());
  const BatchMasks masks = batch_masks(tensor(masks_case, "collated_masks"));

  DINOLossOptions lo;
  lo.out_dim = K;
  lo.ncrops = 2 + locals;
  lo.epochs = 1;
  lo.warmup_teacher_temp = lo.teacher_temp = temp;
  lo.centering = sinkhorn ? Centering::kSinkhornKnopp : Centering::kCentering;
  DINOLoss dino(lo, local_communicator());
  IbotLossOptions io;
  io.out_dim = K;
  io.centering = lo.centering;
  iBOTPatchLoss ibot(io, local_communicator());
  if (!sinkhorn) {  // a previous step sets both centres
    const torch::Tensor unused = torch::zeros({lo.ncrops * b, K});
    dino->forward(unused, tensor(tot, "teacher_cls_prev"), 0);
    IbotCenterSums sums;
    const torch::Tensor prev = tensor(tot, "teacher_patch_prev");
    ibot->targets_micro(prev, temp, prev.size(0), sums);
    ibot->update_center(sums);
  }
  EXPECT_LT(relative_error(dino->center, tensor(want, "dino_center")), 2e-6) << variant;
  EXPECT_LT(relative_error(ibot->center, tensor(want, "ibot_center").reshape({1, K})), 2e-6)
      << variant;

  const torch::Tensor s_global = tensor(tot, "student_global").clone().requires_grad_(true);
  const torch::Tensor s_local = tensor(tot, "student_local").clone().requires_grad_(true);
  const torch::Tensor s_cls = tensor(tot, "student_cls").clone().requires_grad_(true);
  const torch::Tensor s_patch = tensor(tot, "student_patch").clone().requires_grad_(true);
  const torch::Tensor teacher_patch =
      tensor(tot, "teacher_patch").flatten(0, 1).index_select(0, masks.indices);

  const torch::Tensor dino_term =
      dino->forward(torch::cat({s_global, s_local}), tensor(tot, "teacher_cls"), 0);
  const torch::Tensor koleo =
      (koleo_loss(s_cls.narrow(0, 0, b)) + koleo_loss(s_cls.narrow(0, b, b))) * 0.1;
  IbotCenterSums sums;
  const torch::Tensor targets =
      ibot->targets_micro(teacher_patch, temp, static_cast<double>(masks.count()), sums);
  EXPECT_LT(relative_error(targets, tensor(want, "ibot_targets")), 2e-6) << variant;
  const torch::Tensor ibot_term = ibot->forward_masked(
      s_patch.flatten(0, 1).index_select(0, masks.indices), targets, masks.weights, 2 * b);
  const torch::Tensor total = dino_term + koleo + ibot_term;
  total.backward();

  const double dino_want = number(want, "local") + number(want, "global");
  EXPECT_NEAR(scalar(dino_term), dino_want, 2e-6 * std::abs(dino_want)) << variant;
  EXPECT_NEAR(scalar(koleo), number(want, "koleo"), 1e-12 * std::abs(number(want, "koleo")));
  EXPECT_NEAR(scalar(ibot_term), number(want, "ibot"), 2e-6 * std::abs(number(want, "ibot")));
  EXPECT_NEAR(scalar(total), number(want, "total"), 2e-6 * std::abs(number(want, "total")));
  EXPECT_LT(relative_error(s_global.grad(), tensor(want, "grad_global")), 2e-5) << variant;
  EXPECT_LT(relative_error(s_local.grad(), tensor(want, "grad_local")), 2e-5) << variant;
  EXPECT_LT(relative_error(s_cls.grad(), tensor(want, "grad_cls")), 1e-10) << variant;
  EXPECT_LT(relative_error(s_patch.grad(), tensor(want, "grad_patch")), 2e-5) << variant;
  // An unmasked patch gets no gradient at all.
  const torch::Tensor unmasked = ~tensor(masks_case, "collated_masks");
  EXPECT_EQ(s_patch.grad().index({unmasked}).abs().max().item<double>(), 0.0);
}

TEST(Dinov2Goldens, TheStepsLossWithTheRunningCentreIsDinov2s) {
  expect_total_matches("centering");
}

TEST(Dinov2Goldens, TheStepsLossWithSinkhornKnoppIsDinov2s) {
  expect_total_matches("sinkhorn_knopp");
}

}  // namespace
}  // namespace xdino::ssl
