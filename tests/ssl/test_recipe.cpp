// DINOv2's options in our trainer (ssl/recipe.h), beside their goldens (test_dinov2_goldens):
//  - the masks our generator draws keep dinov2's rules (counts, strata, one stream per
//    micro-batch);
//  - Sinkhorn-Knopp over two replicas equals it over the whole batch (its sums run across
//    processes as dinov2's do);
//  - a run with KoLeo, Sinkhorn-Knopp and iBOT logs each term, saves what it adds (mask token,
//    iBOT centre, args), and refuses a resume with another recipe in one line;
//  - a run without them saves the official layout, as before;
//  - the refusals: iBOT on a ResNet, an unknown centering, ratios out of range.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/ivalue.h"
#include "core/json.h"
#include "core/pth.h"
#include "distributed/replicas.h"
#include "ssl/masking.h"
#include "ssl/recipe.h"
#include "ssl/sinkhorn_knopp.h"
#include "ssl/trainer.h"
#include "tests/support/train_fixture.h"

namespace fs = std::filesystem;
using xdino::testing::TempDir;
using xdino::testing::tiny_options;
using xdino::testing::tiny_trainer;

namespace xdino::ssl {
namespace {

TEST(Recipe, MasksKeepDinov2sRules) {
  // 7x7 (the main job's grid) and 14x14 (224 px at patch 16), dinov2's defaults.
  for (const int64_t side : {7, 14}) {
    BlockMaskOptions o;
    o.height = o.width = side;
    o.max_num_patches = max_num_patches_for(side * 16, 16);
    const BlockMaskGenerator generator(o);
    const int64_t images = 16, n = side * side;
    const auto masked = static_cast<int64_t>(images * 0.5);
    const torch::Tensor strata = torch::linspace(0.1, 0.5, masked + 1, torch::kFloat);
    int64_t short_rows = 0, rows_masked = 0;
    double share = 0;
    for (int64_t it = 0; it < 100; ++it) {
      MaskRandom random(0, it, 0, 0);
      const BatchMasks m = draw_batch_masks(images, generator, 0.1, 0.5, 0.5, random);
      ASSERT_EQ(m.masks.sizes(), (std::vector<int64_t>{images, n}));
      std::vector<int64_t> counts;
      for (int64_t r = 0; r < images; ++r) counts.push_back(m.masks[r].sum().item<int64_t>());
      std::sort(counts.begin(), counts.end());
      // At most `masked` rows have patches; the k-th largest at most its stratum's top.
      for (int64_t k = 0; k < images - masked; ++k) EXPECT_EQ(counts[static_cast<size_t>(k)], 0);
      for (int64_t k = 0; k < masked; ++k) {
        const int64_t c = counts[static_cast<size_t>(images - masked + k)];
        EXPECT_LE(c, static_cast<int64_t>(n * strata[k + 1].item<float>())) << side << " " << k;
        short_rows += c < static_cast<int64_t>(n * strata[k].item<float>()) ? 1 : 0;
        rows_masked += c > 0 ? 1 : 0;
      }
      EXPECT_EQ(m.count(), m.masks.sum().item<int64_t>());
      EXPECT_NEAR(m.weights.sum().item<float>(),
                  static_cast<float>(
                      std::count_if(counts.begin(), counts.end(), [](int64_t c) { return c > 0; })),
                  1e-4);
      share += static_cast<double>(m.count()) / static_cast<double>(n * masked);
    }
    // Blocks fill their targets but for a few rows a block could not be placed (dinov2: 211
    // of 3000 at 14x14, 3 patches short at most): the strata's mean, 0.3, minus a little.
    EXPECT_GT(share / 100, 0.27) << side;
    EXPECT_LT(share / 100, 0.31) << side;
    EXPECT_LT(short_rows, 100 * masked / 5) << side;
    EXPECT_GT(rows_masked, 100 * masked * 9 / 10) << side;
  }
}

TEST(Recipe, EachMicroBatchHasItsOwnStreamAndAResumeDrawsItAgain) {
  BlockMaskOptions o;
  o.height = o.width = 7;
  o.max_num_patches = 21;
  const BlockMaskGenerator g(o);
  const auto draw = [&](int64_t seed, int64_t it, int64_t micro, int64_t rank) {
    MaskRandom random(seed, it, micro, rank);
    return draw_batch_masks(8, g, 0.1, 0.5, 0.5, random).masks;
  };
  EXPECT_TRUE(torch::equal(draw(0, 5, 1, 2), draw(0, 5, 1, 2)));
  for (const auto& other : {draw(1, 5, 1, 2), draw(0, 6, 1, 2), draw(0, 5, 0, 2), draw(0, 5, 1, 3)})
    EXPECT_FALSE(torch::equal(draw(0, 5, 1, 2), other));
}

TEST(Recipe, SinkhornKnoppOverTwoReplicasIsTheWholeBatchs) {
  // DINO's (2B rows) and iBOT's (replicas with different counts of masked patches).
  torch::manual_seed(3);
  const torch::Tensor logits = torch::randn({12, 16}) * 0.5;
  for (const int64_t first : {6, 4}) {
    const torch::Tensor whole = sinkhorn_knopp(logits, 0.05, 12, 3, *xdino::local_communicator());
    xdino::distributed::ReplicaGroup group(2, xdino::local_communicator());
    auto comm = group.communicator();
    std::vector<torch::Tensor> parts(2);
    group.run(
        [&](int r) {
          const torch::Tensor mine =
              r == 0 ? logits.narrow(0, 0, first) : logits.narrow(0, first, 12 - first);
          parts[static_cast<size_t>(r)] = sinkhorn_knopp(mine, 0.05, 12, 3, *comm);
        },
        /*samples=*/2);
    EXPECT_LT((torch::cat(parts) - whole).abs().max().item<float>(), 1e-6) << first;
  }
}

DinoOptions xcit_recipe_options(const fs::path& dir) {
  DinoOptions o = tiny_options(dir);
  o.arch = "xcit_nano_4_p4";
  o.head.out_dim = 64;
  o.global_crops_size = 28;
  o.local_crops_size = 12;
  o.batch_size_per_gpu = 4;
  o.recipe.koleo_loss_weight = 0.1;
  o.recipe.centering = "sinkhorn_knopp";
  o.recipe.ibot_loss_weight = 1.0;
  return o;
}

double field(const std::string& line, const std::string& key) {
  const Json j = parse_json(line, "log.txt");
  EXPECT_TRUE(j.contains(key)) << key << " in " << line;
  return j.value(key, 0.0);
}

TEST(Recipe, ARunLogsEachTermAndSavesWhatItAdds) {
  TempDir dir;
  DinoOptions o = xcit_recipe_options(dir.path());
  o.recipe.ibot_separate_head = true;
  o.recipe.ibot_out_dim = 48;
  ASSERT_EQ(tiny_trainer(o)->train(), TrainOutcome::kCompleted);
  std::istringstream log(read_file(dir.path() / "log.txt"));
  int lines = 0;
  for (std::string line; std::getline(log, line); ++lines) {
    const double dino = field(line, "train_dino_loss"), koleo = field(line, "train_koleo_loss"),
                 ibot = field(line, "train_ibot_loss"), total = field(line, "train_loss");
    // The step's sum is a float32 tensor; its terms are logged as doubles.
    EXPECT_NEAR(dino + koleo + ibot, total, 1e-6 * std::abs(total)) << line;
    EXPECT_GT(ibot, 0) << line;
    // KL(teacher || student) is the DINO term's.
    EXPECT_NEAR(field(line, "train_kl_teacher_student"),
                dino - field(line, "train_teacher_entropy"), 1e-9)
        << line;
  }
  EXPECT_EQ(lines, 2);
  const IDict ckpt = as_dict(load_pth(dir.path() / "checkpoint.pth"), "checkpoint");
  const IDict student = as_dict(get(ckpt, "student", "ckpt"), "student");
  const IDict teacher = as_dict(get(ckpt, "teacher", "ckpt"), "teacher");
  for (const IDict* net : {&student, &teacher}) {
    const torch::Tensor token = get(*net, "module.backbone.mask_token", "net").toTensor();
    EXPECT_EQ(token.sizes(), (std::vector<int64_t>{1, 128}));
    EXPECT_TRUE(find(*net, "module.ibot_head.last_layer.weight_v") != nullptr);
    EXPECT_EQ(get(*net, "module.ibot_head.last_layer.weight_v", "net").toTensor().size(0), 48);
  }
  // The student's mask token learned (it starts at zeros).
  EXPECT_GT(get(student, "module.backbone.mask_token", "s").toTensor().abs().max().item<float>(),
            0.0f);
  // Sinkhorn-Knopp leaves the centres alone.
  EXPECT_EQ(get(as_dict(get(ckpt, "dino_loss", "c"), "d"), "center", "c")
                .toTensor()
                .abs()
                .max()
                .item<float>(),
            0.0f);
  const IDict args = as_dict(get(ckpt, "args", "ckpt"), "args");
  EXPECT_EQ(as_double(get(args, "koleo_loss_weight", "args"), "k"), 0.1);
  EXPECT_EQ(get(args, "centering", "args").toStringRef(), "sinkhorn_knopp");
  EXPECT_EQ(as_int(get(args, "ibot_out_dim", "args"), "o"), 48);
  EXPECT_TRUE(find(args, "mask_sample_probability") == nullptr) << "defaults stay out";
}

TEST(Recipe, TheRunningCentreOfIbotIsSavedAndResumed) {
  TempDir dir;
  DinoOptions o = xcit_recipe_options(dir.path());
  o.recipe.centering = "centering";
  o.recipe.koleo_loss_weight = 0;
  o.epochs = 1;
  ASSERT_EQ(tiny_trainer(o)->train(), TrainOutcome::kCompleted);
  const IDict ckpt = as_dict(load_pth(dir.path() / "checkpoint.pth"), "checkpoint");
  const torch::Tensor center =
      get(as_dict(get(ckpt, "ibot_patch_loss", "c"), "i"), "center", "c").toTensor();
  EXPECT_EQ(center.sizes(), (std::vector<int64_t>{1, 64}));
  EXPECT_GT(center.abs().max().item<float>(), 0.0f);
}

TEST(Recipe, AResumeWithAnotherRecipeIsRefusedInOneLine) {
  TempDir dir;
  DinoOptions o = xcit_recipe_options(dir.path());
  o.epochs = 1;
  ASSERT_EQ(tiny_trainer(o)->train(), TrainOutcome::kCompleted);
  o.epochs = 2;
  o.recipe.ibot_loss_weight = 0.5;
  try {
    tiny_trainer(o)->train();
    ADD_FAILURE() << "a resume with another --ibot_loss_weight went on";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--ibot_loss_weight 1.0"), std::string::npos) << what;
    EXPECT_NE(what.find("0.5"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  // Nor may a DINO run continue a recipe's checkpoint as if it were its own.
  o.recipe = RecipeOptions{};
  EXPECT_THROW(tiny_trainer(o)->train(), UsageError);
}

TEST(Recipe, WithoutTheOptionsTheCheckpointIsDINOs) {
  TempDir dir;
  DinoOptions o = tiny_options(dir.path());
  o.epochs = 1;
  ASSERT_EQ(tiny_trainer(o)->train(), TrainOutcome::kCompleted);
  const IDict ckpt = as_dict(load_pth(dir.path() / "checkpoint.pth"), "checkpoint");
  EXPECT_TRUE(find(ckpt, "ibot_patch_loss") == nullptr);
  for (const auto& item : as_dict(get(ckpt, "student", "c"), "s"))
    EXPECT_EQ(item.key().toStringRef().find("mask_token"), std::string::npos);
  const IDict args = as_dict(get(ckpt, "args", "c"), "args");
  for (const char* key : {"koleo_loss_weight", "centering", "ibot_loss_weight"})
    EXPECT_TRUE(find(args, key) == nullptr) << key;
  const std::string line = read_file(dir.path() / "log.txt");
  EXPECT_EQ(line.find("train_dino_loss"), std::string::npos) << line;
}

TEST(Recipe, IbotStartsFromADinoCheckpointWithAFreshMaskToken) {
  // --pretrained_weights of a DINO run: every backbone tensor must fit, as always; the mask
  // token, which a DINO checkpoint has not, starts at zeros.
  TempDir dino_run, ibot_run;
  DinoOptions o = xcit_recipe_options(dino_run.path());
  o.recipe = RecipeOptions{};
  o.epochs = 1;
  ASSERT_EQ(tiny_trainer(o)->train(), TrainOutcome::kCompleted);
  DinoOptions w = xcit_recipe_options(ibot_run.path());
  w.pretrained_weights = (dino_run.path() / "checkpoint.pth").string();
  auto trainer = tiny_trainer(w);
  const auto student = trainer->student()->backbone->named_parameters();
  EXPECT_EQ(student["mask_token"].abs().max().item<float>(), 0.0f);
  const IDict ckpt = as_dict(load_pth(dino_run.path() / "checkpoint.pth"), "checkpoint");
  const torch::Tensor stored =
      get(as_dict(get(ckpt, "teacher", "c"), "t"), "module.backbone.cls_token", "t").toTensor();
  EXPECT_TRUE(torch::equal(student["cls_token"], stored));
}

TEST(Recipe, RefusalsNameTheFlagAndTheFix) {
  const auto refusal = [](DinoOptions o) -> std::string {
    try {
      tiny_trainer(o);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  TempDir dir;
  DinoOptions o = xcit_recipe_options(dir.path());
  o.arch = "resnet18";
  EXPECT_NE(refusal(o).find("resnet18 has none"), std::string::npos) << refusal(o);
  o = xcit_recipe_options(dir.path());
  o.recipe.centering = "sinkhorn";
  EXPECT_NE(refusal(o).find("--centering must be centering or sinkhorn_knopp"), std::string::npos);
  o = xcit_recipe_options(dir.path());
  o.recipe.mask_ratio_min_max = {0.5, 0.1};
  EXPECT_NE(refusal(o).find("--mask_ratio_min_max"), std::string::npos);
  o.recipe.ibot_loss_weight = 0;  // a reversed range is refused with iBOT off too
  EXPECT_NE(refusal(o).find("--mask_ratio_min_max"), std::string::npos) << refusal(o);
  o = xcit_recipe_options(dir.path());
  o.recipe.ibot_out_dim = 32;
  EXPECT_NE(refusal(o).find("--ibot_separate_head"), std::string::npos);
  o = xcit_recipe_options(dir.path());
  o.head.use_bn = true;
  EXPECT_NE(refusal(o).find("--use_bn_in_head"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() / "checkpoint.pth"));
}

TEST(Recipe, TheRecipeHasOneName) {
  RecipeOptions r;
  EXPECT_EQ(describe_recipe(r), "DINO");
  r.koleo_loss_weight = 0.1;
  r.centering = "sinkhorn_knopp";
  r.ibot_loss_weight = 1;
  EXPECT_EQ(describe_recipe(r), "DINO + KoLeo 0.1 + Sinkhorn-Knopp + iBOT 1.0");
  r.ibot_separate_head = true;
  EXPECT_EQ(describe_recipe(r), "DINO + KoLeo 0.1 + Sinkhorn-Knopp + iBOT 1.0 (separate head)");
}

}  // namespace
}  // namespace xdino::ssl
