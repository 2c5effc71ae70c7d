// One process of a multi-process test: `dist_worker <scenario> [args]`, with the torchrun
// environment set by the test. Each scenario but `train` computes its single-process
// reference itself (every rank can afford the whole tiny batch) and exits 0 when the
// distributed result matches it, 1 with a message otherwise; `train` leaves checkpoints for
// the test to compare across world sizes.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/check.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "distributed/distributed.h"
#include "distributed/grad_sync.h"
#include "distributed/launcher_env.h"
#include "models/batch_norm.h"
#include "ssl/trainer.h"
#include "tests/support/synthetic_crops.h"

using namespace xdino;

namespace {

void expect_close(const torch::Tensor& a, const torch::Tensor& b, const std::string& what,
                  double tol = 1e-5) {
  const double diff = (a - b).abs().max().item<double>();
  XDINO_CHECK(diff <= tol, what, " differs from the single-process reference by ", diff);
}

// The whole batch, the same on every rank; rank r takes rows [r*n/W, (r+1)*n/W).
torch::Tensor global_batch(int64_t rows, std::vector<int64_t> rest) {
  torch::manual_seed(1234);
  rest.insert(rest.begin(), rows);
  return torch::randn(rest, torch::kDouble) * 2 + 0.5;
}

torch::Tensor shard(const torch::Tensor& t, int rank, int world) {
  const int64_t n = t.size(0) / world;
  return t.narrow(0, rank * n, n);
}

void collectives(Communicator& c) {
  const int r = c.rank(), w = c.world_size();
  std::vector<torch::Tensor> ts{torch::full({3}, r + 1.0), torch::full({2, 2}, 10.0 * r),
                                torch::full({5}, static_cast<int64_t>(r), torch::kLong),
                                torch::arange(6, torch::kFloat).view({2, 3}).t()};  // strided
  c.all_reduce_sum(ts);
  expect_close(ts[0], torch::full({3}, w * (w + 1) / 2.0), "all_reduce float");
  expect_close(ts[1], torch::full({2, 2}, 10.0 * w * (w - 1) / 2), "all_reduce bucket");
  XDINO_CHECK(ts[2].equal(torch::full({5}, static_cast<int64_t>(w * (w - 1) / 2), torch::kLong)),
              "all_reduce int64");
  expect_close(ts[3], torch::arange(6, torch::kFloat).view({2, 3}).t() * w, "strided tensor");
  std::vector<torch::Tensor> b{torch::full({4}, static_cast<double>(r))};
  c.broadcast(b, w - 1);
  expect_close(b[0], torch::full({4}, w - 1.0), "broadcast");
  auto g = c.all_gather(torch::full({2}, static_cast<float>(r)));
  for (int k = 0; k < w; ++k)
    expect_close(g[k], torch::full({2}, static_cast<float>(k)), "all_gather");
  auto v = c.all_gather_varying(torch::full({r + 1, 3}, static_cast<float>(r)));
  for (int k = 0; k < w; ++k) XDINO_CHECK(v[k].size(0) == k + 1, "all_gather_varying rows");
  auto a = torch::full({7}, 1.0f);
  c.all_reduce_sum_async(a)->wait();
  expect_close(a, torch::full({7}, static_cast<float>(w)), "async all_reduce");
  c.barrier();
}

void sync_batch_norm(std::shared_ptr<Communicator> c) {
  const int r = c->rank(), w = c->world_size();
  const auto x_all = global_batch(4 * w, {3, 5, 2});
  const auto dy_all = global_batch(4 * w, {3, 5, 2}).flip({0});
  // Reference: plain BatchNorm (LibTorch's) on the whole batch.
  torch::nn::BatchNorm2d ref(torch::nn::BatchNorm2dOptions(3));
  ref->to(torch::kDouble);
  auto x_ref = x_all.clone().requires_grad_();
  auto y_ref = ref(x_ref);
  y_ref.backward(dy_all);
  // Distributed: each rank normalises its shard with SyncBatchNorm.
  models::BatchNorm bn(3);
  bn->to(torch::kDouble);
  models::set_batch_norm_communicator(*bn, c);
  auto x = shard(x_all, r, w).clone().requires_grad_();
  auto y = bn(x);
  y.backward(shard(dy_all, r, w));
  expect_close(y, shard(y_ref, r, w), "SyncBatchNorm output", 1e-10);
  expect_close(x.grad(), shard(x_ref.grad(), r, w), "SyncBatchNorm input gradient", 1e-10);
  std::vector<torch::Tensor> wb{bn->weight.grad(), bn->bias.grad()};
  c->all_reduce_sum(wb);  // DDP sums (averages) parameter gradients across processes
  expect_close(wb[0], ref->weight.grad(), "SyncBatchNorm weight gradient", 1e-10);
  expect_close(wb[1], ref->bias.grad(), "SyncBatchNorm bias gradient", 1e-10);
  expect_close(bn->running_mean, ref->running_mean, "running_mean", 1e-10);
  expect_close(bn->running_var, ref->running_var, "running_var", 1e-10);
}

// A small network with BatchNorm; the distributed gradient of the mean loss must equal the
// single-process gradient on the whole batch.
struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 8));
    bn = register_module("bn", models::BatchNorm(8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 2));
    unused = register_module("unused", torch::nn::Linear(2, 2));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::gelu(bn(fc1(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr};
  models::BatchNorm bn{nullptr};
};

void gradient_sync(std::shared_ptr<Communicator> c, bool overlap) {
  const int r = c->rank(), w = c->world_size();
  const auto x_all = global_batch(6 * w, {4});
  torch::manual_seed(7 + r);  // different init per rank: the broadcast must fix it
  auto net = std::make_shared<Net>();
  net->to(torch::kDouble);
  distributed::broadcast_module(*net, *c);
  auto ref = std::make_shared<Net>();
  ref->to(torch::kDouble);
  {
    torch::NoGradGuard ng;
    auto src = net->parameters();
    auto dst = ref->parameters();
    for (size_t k = 0; k < src.size(); ++k) dst[k].copy_(src[k]);
  }
  ref->forward(x_all).pow(2).mean().backward();

  models::set_batch_norm_communicator(*net, c);
  // Tiny buckets, so several all-reduces overlap with backward.
  distributed::GradientSynchronizer sync(net->parameters(), c, /*bucket_bytes=*/256, overlap);
  XDINO_CHECK(sync.num_buckets() > 2, "expected several buckets");
  for (int step = 0; step < 2; ++step) {
    for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
    sync.begin();
    net->forward(shard(x_all, r, w)).pow(2).mean().backward();
    sync.finish();
  }
  auto got = net->parameters();
  auto want = ref->parameters();
  for (size_t k = 0; k < got.size(); ++k) {
    const auto expected = want[k].grad().defined() ? want[k].grad() : torch::zeros_like(got[k]);
    expect_close(got[k].grad(), expected, "gradient of parameter " + std::to_string(k), 1e-10);
  }
}

// Rank r of W gets rows [r*b, (r+1)*b) of the batch one process with batch W*b gets.
class ShardedCrops : public ssl::DataSource {
 public:
  ShardedCrops(int64_t batches, int64_t total_batch, int rank, int world)
      : whole_(batches, total_batch, /*local_crops=*/2, /*global_size=*/32, /*local_size=*/16),
        rows_(total_batch / world),
        rank_(rank) {}
  int64_t batches_per_epoch() const override { return whole_.batches_per_epoch(); }
  void start_epoch(int64_t epoch, int64_t first_batch) override {
    whole_.start_epoch(epoch, first_batch);
  }
  std::vector<torch::Tensor> next_batch() override {
    auto crops = whole_.next_batch();
    for (auto& c : crops) c = c.narrow(0, rank_ * rows_, rows_).contiguous();
    return crops;
  }

 private:
  testing::SyntheticCrops whole_;
  int64_t rows_;
  int rank_;
};

// `train OUT_DIR TOTAL_BATCH OPTIMIZER STEPS [ARCH]`: DINO steps of XCiT-nano (BatchNorm in the
// patch embedding and LPI), or ARCH, through the real Trainer, the total batch split across the
// processes.
// Rank 0 writes OUT_DIR/initial.pth (the student after the broadcast) and the trainer's
// checkpoint.pth; the test compares the checkpoints of different world sizes.
void dino_train(std::shared_ptr<Communicator> c, const std::string& out_dir, int64_t total_batch,
                const std::string& optimizer, int64_t steps, const std::string& arch) {
  XDINO_CHECK(total_batch % c->world_size() == 0, "total batch must split evenly");
  ssl::DinoOptions o;
  o.arch = arch;
  o.head.out_dim = 64;
  o.epochs = 1;
  o.batch_size_per_gpu = total_batch / c->world_size();
  o.local_crops_number = 2;
  o.global_crops_size = 32;
  o.local_crops_size = 16;
  o.drop_path_rate = 0.0;  // no per-process random masks
  // "sgd_lr0": SGD that never moves the weights, so that what differs between world sizes is
  // the statistics alone (SyncBatchNorm), not an optimiser's divergence between summation
  // orders, which depends on the CPU's vector width.
  o.optimizer = optimizer == "sgd_lr0" ? "sgd" : optimizer;
  // Large enough steps that a wrong gradient (e.g. summed instead of averaged) shows; no
  // clipping and no frozen last layer, which would hide the scale of the gradients.
  o.lr = optimizer == "adamw" ? 0.05 : optimizer == "sgd_lr0" ? 0.0 : 2.0;
  o.warmup_epochs = 0;
  o.clip_grad = 0.0;
  o.freeze_last_layer = 0;
  o.momentum_teacher = 0.9;  // the teacher moves visibly in 3 steps
  o.saveckp_freq = 0;
  o.device = "cpu";
  o.output_dir = out_dir;
  auto data = std::make_shared<ShardedCrops>(steps, total_batch, c->rank(), c->world_size());
  ssl::Trainer trainer(
      o, [&](const models::BackboneOptions& bo) { return models::create_backbone(o.arch, bo); },
      data, c);
  if (c->is_main()) {
    auto initial = xdino::make_dict();
    for (const auto& p : trainer.student()->named_parameters())
      initial.insert(p.key(), p.value().detach().clone());
    save_pth(std::filesystem::path(out_dir) / "initial.pth", initial);
  }
  trainer.train();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    distributed::DistConfig config = distributed::dist_config_from_env();
    if (const char* t = std::getenv("XDINO_TEST_DIST_TIMEOUT_MS"))
      config.timeout = std::chrono::milliseconds(std::atol(t));
    auto comm = distributed::connect(config);
    if (scenario == "collectives") {
      collectives(*comm);
    } else if (scenario == "syncbn") {
      sync_batch_norm(comm);
    } else if (scenario == "gradsync") {
      gradient_sync(comm, true);
      gradient_sync(comm, false);
    } else if (scenario == "train" && (argc == 6 || argc == 7)) {
      dino_train(comm, argv[2], std::atol(argv[3]), argv[4], std::atol(argv[5]),
                 argc == 7 ? argv[6] : "xcit_nano_12_p16");
    } else if (scenario == "die") {
      if (comm->rank() == 1) std::_Exit(3);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      auto t = torch::ones({4});
      comm->all_reduce_sum(t);
    } else if (scenario == "hang") {
      if (comm->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(25));
      auto t = torch::ones({4});
      comm->all_reduce_sum(t);
    } else {
      std::cerr << "unknown scenario '" << scenario << "'\n";
      return 2;
    }
    comm->finalize();
    std::cout << "rank " << comm->rank() << " OK\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
