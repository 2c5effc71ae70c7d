// Data-parallel replicas inside one process (distributed/replicas.h): the collectives against
// sums done by hand, a failing replica, the drop-path rows, and the DINO trainer with two
// replicas against the same run with one (same function, same random numbers).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "distributed/replicas.h"
#include "models/layers.h"
#include "ssl/trainer.h"
#include "tests/support/train_fixture.h"

using xdino::distributed::current_replica;
using xdino::distributed::replica_rows;
using xdino::distributed::ReplicaGroup;
namespace fs = std::filesystem;

TEST(Replicas, CollectivesSumInIndexOrderAndAgree) {
  ReplicaGroup group(3, xdino::local_communicator());
  auto comm = group.communicator();
  EXPECT_EQ(comm->world_size(), 3);
  // fp32: (1e8 + 1) - 1e8 is 0 in index order, 1 in another; every replica gets the same.
  const std::vector<float> values{1e8f, 1.0f, -1e8f};
  std::vector<torch::Tensor> sums(3), broadcasts(3);
  std::vector<std::vector<torch::Tensor>> gathered(3), varying(3);
  std::vector<int> ranks(3, -1);
  std::vector<bool> owners(3);
  group.run(
      [&](int r) {
        const auto u = static_cast<size_t>(r);
        ranks[u] = comm->rank();
        owners[u] = comm->owns_module_state();
        auto t = torch::full({2}, values[u]);
        comm->all_reduce_sum(t);
        sums[u] = t;
        std::vector<torch::Tensor> b{torch::full({3}, static_cast<float>(10 * r))};
        comm->broadcast(b, /*root=*/2);
        broadcasts[u] = b[0];
        gathered[u] = comm->all_gather(torch::full({2}, static_cast<float>(r)));
        varying[u] = comm->all_gather_varying(torch::arange(r + 1).to(torch::kFloat));
        comm->barrier();
      },
      /*samples=*/1);
  const float in_order = (values[0] + values[1]) + values[2];
  ASSERT_EQ(in_order, 0.0f);
  for (int r = 0; r < 3; ++r) {
    const auto u = static_cast<size_t>(r);
    EXPECT_EQ(ranks[u], r);
    EXPECT_EQ(owners[u], r == 0);
    EXPECT_TRUE(torch::equal(sums[u], torch::full({2}, in_order))) << sums[u];
    EXPECT_TRUE(torch::equal(broadcasts[u], torch::full({3}, 20.0f)));
    ASSERT_EQ(gathered[u].size(), 3u);
    ASSERT_EQ(varying[u].size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(torch::equal(gathered[u][static_cast<size_t>(k)],
                               torch::full({2}, static_cast<float>(k))));
      EXPECT_TRUE(
          torch::equal(varying[u][static_cast<size_t>(k)], torch::arange(k + 1).to(torch::kFloat)));
    }
  }
  EXPECT_EQ(current_replica(), nullptr);
}

namespace {

// Process 1 of 2, the other process holding `other` (its replicas' sum) for every all-reduce,
// and the value 7 for a broadcast from process 0.
class OtherProcess : public xdino::Communicator {
 public:
  explicit OtherProcess(torch::Tensor other) : other_(std::move(other)) {}
  int rank() const override { return 1; }
  int world_size() const override { return 2; }
  using Communicator::all_reduce_sum;
  void all_reduce_sum(std::vector<torch::Tensor>& ts) override {
    ++calls;
    for (auto& t : ts) t.add_(other_);
  }
  void broadcast(std::vector<torch::Tensor>& ts, int root) override {
    ++calls;
    if (root == 0)
      for (auto& t : ts) t.fill_(7);
  }
  std::vector<torch::Tensor> all_gather(const torch::Tensor& t) override {
    ++calls;
    return {torch::full_like(t, -1), t};
  }
  std::vector<torch::Tensor> all_gather_varying(const torch::Tensor& t) override { return {t, t}; }
  void barrier() override { ++calls; }
  std::atomic<int> calls{0};

 private:
  torch::Tensor other_;
};

}  // namespace

TEST(Replicas, ProcessesAndReplicasCombine) {
  // 2 processes x 2 replicas: replica r of process 1 is rank 2 + r of 4; each collective
  // reaches the other process once per process (from replica 0), not once per replica.
  auto outer = std::make_shared<OtherProcess>(torch::full({2}, 100.0f));
  ReplicaGroup group(2, outer);
  auto comm = group.communicator();
  EXPECT_EQ(comm->world_size(), 4);
  std::vector<int> ranks(2);
  std::vector<torch::Tensor> sums(2), broadcasts(2);
  std::vector<std::vector<torch::Tensor>> gathered(2);
  group.run(
      [&](int r) {
        const auto u = static_cast<size_t>(r);
        ranks[u] = comm->rank();
        auto t = torch::full({2}, static_cast<float>(r + 1));
        comm->all_reduce_sum(t);
        sums[u] = t;
        std::vector<torch::Tensor> b{torch::zeros({1})};
        comm->broadcast(b, /*root=*/1);  // rank 1: replica 1 of process 0
        broadcasts[u] = b[0];
        gathered[u] = comm->all_gather(torch::full({1}, static_cast<float>(r)));
      },
      1);
  EXPECT_EQ(outer->calls.load(), 3);
  for (size_t u = 0; u < 2; ++u) {
    EXPECT_EQ(ranks[u], 2 + static_cast<int>(u));
    EXPECT_TRUE(torch::equal(sums[u], torch::full({2}, 103.0f)));
    EXPECT_TRUE(torch::equal(broadcasts[u], torch::full({1}, 7.0f)));
    ASSERT_EQ(gathered[u].size(), 4u);  // process 0's two replicas, then ours
    EXPECT_TRUE(torch::equal(gathered[u][0], torch::full({1}, -1.0f)));
    EXPECT_TRUE(torch::equal(gathered[u][3], torch::full({1}, 1.0f)));
  }
}

TEST(Replicas, AFailingReplicaReleasesTheOthersAndTheGroupGoesOn) {
  ReplicaGroup group(3, xdino::local_communicator());
  auto comm = group.communicator();
  std::atomic<int> finished{0};
  try {
    group.run(
        [&](int r) {
          if (r == 1) XDINO_FAIL("replica one gives up");
          auto t = torch::ones({1});
          comm->all_reduce_sum(t);  // would wait forever for replica 1
          ++finished;
        },
        1);
    FAIL() << "run() must rethrow the failure";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("replica one gives up"), std::string::npos) << e.what();
  }
  EXPECT_EQ(finished.load(), 0);
  // The next run starts clean.
  std::vector<float> got(3);
  group.run(
      [&](int r) {
        auto t = torch::ones({1});
        comm->all_reduce_sum(t);
        got[static_cast<size_t>(r)] = t.item<float>();
      },
      1);
  EXPECT_EQ(got, std::vector<float>(3, 3.0f));
}

TEST(Replicas, CollectivesOutsideRunAreRefused) {
  ReplicaGroup group(2, xdino::local_communicator());
  auto t = torch::ones({1});
  EXPECT_THROW(group.communicator()->all_reduce_sum(t), xdino::Error);
}

TEST(Replicas, EachReplicaKeepsItsRowsOfEveryBlock) {
  // Two blocks (e.g. two crops) of 2 replicas x 2 samples.
  const auto full = torch::arange(8).view({8, 1});
  EXPECT_TRUE(torch::equal(replica_rows(full), full));  // outside run()
  ReplicaGroup group(2, xdino::local_communicator());
  std::vector<torch::Tensor> rows(2);
  group.run([&](int r) { rows[static_cast<size_t>(r)] = replica_rows(full); }, /*samples=*/2);
  EXPECT_TRUE(torch::equal(rows[0].flatten(), torch::tensor({0, 1, 4, 5}, torch::kLong)));
  EXPECT_TRUE(torch::equal(rows[1].flatten(), torch::tensor({2, 3, 6, 7}, torch::kLong)));
}

TEST(Replicas, DropPathMasksAreTheUnsplitBatchs) {
  // Two crops of 4 images, split over 2 replicas of 2 images: each replica's masks are its rows
  // of the masks the whole batch draws, and the generator ends where the whole batch's does.
  const int64_t images = 4, crops = 2;
  const auto x = torch::zeros({crops * images, 3, 5});
  torch::manual_seed(11);
  const auto whole = xdino::models::drop_path_factor(x, 0.5, true);
  const auto next_whole = torch::rand({4});
  ASSERT_GT(whole.eq(0).sum().item<int64_t>(), 0);  // some paths are dropped
  ASSERT_GT(whole.ne(0).sum().item<int64_t>(), 0);

  torch::manual_seed(11);
  ReplicaGroup group(2, xdino::local_communicator());
  std::vector<torch::Tensor> masks(2);
  group.run(
      [&](int r) {
        const auto share = torch::zeros({crops * images / 2, 3, 5});
        masks[static_cast<size_t>(r)] = xdino::models::drop_path_factor(share, 0.5, true);
      },
      images / 2);
  const auto w = whole.view({crops, 2, images / 2});
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(
        torch::equal(masks[static_cast<size_t>(r)].view({crops, images / 2}), w.select(1, r)))
        << "replica " << r;
  EXPECT_TRUE(torch::equal(torch::rand({4}), next_whole));
}

namespace {

xdino::IDict load(const fs::path& p) { return xdino::load_pth(p).toGenericDict(); }

// max |a - b| over every tensor of two state dicts of the same keys.
double max_state_difference(const c10::IValue& a, const c10::IValue& b, std::string& worst) {
  double most = 0;
  for (const auto& e : a.toGenericDict()) {
    const auto ta = e.value().toTensor(), tb = b.toGenericDict().at(e.key()).toTensor();
    if (!ta.is_floating_point()) {
      EXPECT_TRUE(torch::equal(ta, tb)) << e.key().toStringRef();
      continue;
    }
    const double d = (ta - tb).abs().max().item<double>();
    if (d > most) {
      most = d;
      worst = e.key().toStringRef();
    }
  }
  return most;
}

}  // namespace

// The main job's backbone (BatchNorm in the stem and every LPI, drop path in every block):
// two epochs with one replica and with two, from the same seed and batches. The split batch
// computes the same function in another summation order, so the results agree to rounding:
// 1.3e-7 at most here, and the bound is 2e-6. Replicas with their own BatchNorm statistics
// move the weights by 0.2, with their own drop-path numbers by 0.04.
void expect_replicas_train_as_one(const xdino::ssl::RecipeOptions& recipe, int replicas = 2) {
  xdino::testing::TempDir one, two;
  auto opt = xdino::testing::tiny_options(one.path());
  opt.arch = "xcit_nano_4_p4";
  opt.head.out_dim = 64;
  opt.global_crops_size = 28;
  opt.local_crops_size = 12;
  opt.batch_size_per_gpu = 4;
  // SGD: AdamW would divide the pure-rounding gradient of a shift-invariant parameter (the
  // key bias of an attention) by its own magnitude and turn rounding into whole steps.
  opt.optimizer = "sgd";
  opt.lr = 2.0;
  opt.recipe = recipe;
  ASSERT_EQ(xdino::testing::tiny_trainer(opt)->train(), xdino::ssl::TrainOutcome::kCompleted);
  opt.output_dir = two.path().string();
  opt.replicas = replicas;
  ASSERT_EQ(xdino::testing::tiny_trainer(opt)->train(), xdino::ssl::TrainOutcome::kCompleted);

  const auto a = load(one.path() / "checkpoint.pth"), b = load(two.path() / "checkpoint.pth");
  std::vector<std::string> parts{"student", "teacher", "dino_loss"};
  if (recipe.ibot()) parts.push_back("ibot_patch_loss");
  for (const std::string& part : parts) {
    std::string worst;
    const double d = max_state_difference(a.at(part), b.at(part), worst);
    EXPECT_LT(d, 2e-6) << part << ": " << worst;
  }
  // The step's numbers: loss and statistics of the whole batch.
  const auto log_a = xdino::read_file(one.path() / "log.txt");
  const auto log_b = xdino::read_file(two.path() / "log.txt");
  const auto field = [](const std::string& log, const std::string& key) {
    const auto at = log.rfind("\"" + key + "\": ");
    return std::stod(log.substr(at + key.size() + 4));
  };
  for (const char* key : {"train_loss", "train_teacher_entropy", "train_kl_uniform"})
    EXPECT_NEAR(field(log_a, key), field(log_b, key), 1e-5) << key;
  if (recipe.koleo()) {
    EXPECT_NEAR(field(log_a, "train_koleo_loss"), field(log_b, "train_koleo_loss"), 1e-5);
  }
}

TEST(Replicas, TwoReplicasTrainAsOne) { expect_replicas_train_as_one({}); }

// KoLeo is one process's function, as dinov2's is one GPU's (ssl/recipe_terms.h): each
// replica gathers the others' class tokens, so 2 and 4 replicas (here 2 and 1 images of each
// view) train as 1. Per replica it was another objective on every core count, and with one
// row per replica it threw at the first step.
TEST(Replicas, ReplicasTrainAsOneWithKoleo) {
  xdino::ssl::RecipeOptions recipe;
  recipe.koleo_loss_weight = 0.1;
  for (int replicas : {2, 4}) {
    SCOPED_TRACE(std::to_string(replicas) + " replicas");
    expect_replicas_train_as_one(recipe, replicas);
  }
}

TEST(Replicas, KoleoNeedsTwoImagesPerProcess) {
  xdino::testing::TempDir dir;
  auto opt = xdino::testing::tiny_options(dir.path());
  opt.arch = "xcit_nano_4_p4";
  opt.batch_size_per_gpu = 1;
  opt.recipe.koleo_loss_weight = 0.1;
  try {
    xdino::testing::tiny_trainer(opt);
    ADD_FAILURE() << "accepted KoLeo on one image per process";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--batch_size_per_gpu is 1"), std::string::npos)
        << e.what();
  }
}

TEST(Replicas, TwoReplicasTrainAsOneWithIbotAndSinkhornKnopp) {
  // DINOv2's iBOT with both centerings: the masks are drawn for the process's batch and
  // split; Sinkhorn-Knopp's and the iBOT centre's sums run over the replicas; each replica's
  // loss counts its own rows (KoLeo: ReplicasTrainAsOneWithKoleo).
  for (const char* centering : {"centering", "sinkhorn_knopp"}) {
    xdino::ssl::RecipeOptions recipe;
    recipe.ibot_loss_weight = 1.0;
    recipe.centering = centering;
    SCOPED_TRACE(centering);
    expect_replicas_train_as_one(recipe);
  }
}

TEST(Replicas, TrainerRefusesABatchThatDoesNotSplit) {
  xdino::testing::TempDir dir;
  auto opt = xdino::testing::tiny_options(dir.path());
  opt.arch = "xcit_nano_4_p4";
  opt.batch_size_per_gpu = 3;
  opt.replicas = 2;
  EXPECT_THROW(xdino::testing::tiny_trainer(opt), xdino::UsageError);
}

// Whatever a replica's thread throws (LibTorch's c10::Error, std::bad_alloc) comes out of run()
// on the caller's thread, as it was thrown, and the group stays usable.
TEST(Replicas, AnyExceptionOnAReplicaThreadReachesTheCaller) {
  ReplicaGroup group(2, xdino::local_communicator());
  try {
    group.run([](int r) { TORCH_CHECK(r != 1, "replica one's LibTorch error"); }, 1);
    FAIL() << "run() must rethrow c10::Error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("replica one's LibTorch error"), std::string::npos);
  }
  EXPECT_THROW(group.run(
                   [](int r) {
                     if (r == 1) throw std::bad_alloc();
                   },
                   1),
               std::bad_alloc);
  std::atomic<int> ran{0};
  group.run([&](int) { ++ran; }, 1);
  EXPECT_EQ(ran.load(), 2);
}
