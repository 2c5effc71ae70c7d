// Class attention's core as one op (kernels/class_attention.h), against a float64 truth written
// another way and ClassAttention's op path, on the ISA this CPU runs (kernels/cpu/isa.h;
// .ci/run's AVX2 phase runs this test again with ATEN_CPU_CAPABILITY=avx2): head widths that
// fill whole vectors and ones that leave tails (d = 5, 12), one token and many, forward and
// backward in float32 and float64, central differences in float64, one thread against two,
// the inputs it refuses, and ClassAttention and its block on kOps, kAuto and the naive block.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "kernels/class_attention.h"
#include "kernels/cpu/isa.h"
#include "models/xcit_layers.h"
#include "tests/support/grad_check.h"
#include "tests/support/kernel_error.h"
#include "tests/support/module_testing.h"
#include "tests/support/naive_xcit.h"

namespace xdino::models {
namespace {

using torch::Tensor;
using xdino::testing::expect_close;
using xdino::testing::normalised_mse;
using xdino::testing::prepared;
namespace naive = xdino::testing::naive;

// The formula in float64 ATen ops, another order than both paths: broadcast products summed
// over d, exp over its sum (no max shift), a broadcast weighted sum over the tokens.
Tensor class_attention_truth(const Tensor& q, const Tensor& kv, int64_t heads) {
  const int64_t B = kv.size(0), T = kv.size(1), C = q.size(1), d = C / heads;
  const Tensor q4 = q.to(torch::kDouble).view({B, 1, heads, d});
  const Tensor parts = kv.to(torch::kDouble).view({B, T, 2, heads, d});
  const Tensor k = parts.select(2, 0), v = parts.select(2, 1);                    // (B, T, h, d)
  const Tensor e = ((q4 * k).sum(-1) / std::sqrt(static_cast<double>(d))).exp();  // (B, T, h)
  const Tensor attn = e / e.sum(1, true);
  return (attn.unsqueeze(-1) * v).sum(1).reshape({B, C});
}

struct ClsCase {
  std::string name;
  int64_t batch, tokens, heads, head_dim;
};

const std::vector<ClsCase> kClsCases = {
    {"main job, global crop (XCiT-N4/4: 49 patches + CLS)", 3, 50, 4, 32},
    {"main job, local crop", 4, 10, 4, 32},
    {"XCiT-S12/16 at 224 px", 2, 197, 8, 48},
    {"one token", 2, 1, 3, 8},
    {"tails: d = 12", 2, 7, 2, 12},
    {"odd: d = 5", 3, 6, 3, 5},
};

class KernelClassAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cpu_isa() == kernels::Isa::kNone)
      GTEST_SKIP() << "this CPU (or ATEN_CPU_CAPABILITY=default) runs no AVX2: class attention "
                      "takes its op path, which the other XCiT tests cover";
    std::printf("class attention kernel: %s\n", kernels::isa_name(kernels::cpu_isa()));
  }
};

TEST_F(KernelClassAttention, MatchesTheTruthForwardAndBackward) {
  for (const ClsCase& c : kClsCases) {
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      SCOPED_TRACE(c.name + ", " + c10::toString(dtype));
      torch::manual_seed(7);
      const auto on = torch::TensorOptions().dtype(dtype);
      const int64_t C = c.heads * c.head_dim;
      const Tensor q0 = torch::randn({c.batch, C}, on) * 2;  // logits of a few units
      const Tensor kv0 = torch::randn({c.batch, c.tokens, 2 * C}, on);
      const Tensor dout = torch::randn({c.batch, C}, on);
      ASSERT_TRUE(kernels::class_attention_applies(q0, kv0, c.heads));
      auto run = [&](bool kernel) {
        const auto to = kernel ? dtype : torch::kDouble;
        const Tensor q = q0.to(to).clone().requires_grad_(true);
        const Tensor kv = kv0.to(to).clone().requires_grad_(true);
        const Tensor out = kernel ? kernels::class_attention(q, kv, c.heads)
                                  : class_attention_truth(q, kv, c.heads);
        (out * dout.to(out.scalar_type())).sum().backward();
        return std::vector<Tensor>{out, q.grad(), kv.grad()};
      };
      const auto got = run(true), want = run(false);
      EXPECT_EQ(got[0].scalar_type(), dtype);
      // Bounds: float32 rounding of sums over T and d (~1e-7 relative, squared); float64's.
      const double bound = dtype == torch::kFloat ? 1e-11 : 1e-26;
      const char* names[] = {"out", "dq", "dkv"};
      for (size_t i = 0; i < got.size(); ++i) {
        // One token: the weight is 1 whatever the logit, so dq is 0, exactly in the kernel
        // (a_t (dattn_t - a_t dattn_t) with a_t = 1) and to rounding in the truth.
        if (c.tokens == 1 && i == 1)
          EXPECT_EQ(got[i].abs().max().item<double>(), 0.0) << names[i];
        else
          EXPECT_LE(normalised_mse(got[i], want[i]), bound) << names[i];
      }
    }
  }
}

// A wrong arithmetic fails the bounds above: the softmax's backward without its row term.
TEST_F(KernelClassAttention, TheBoundsSeeAMissingTerm) {
  torch::manual_seed(8);
  const int64_t B = 2, T = 9, h = 2, d = 32, C = h * d;
  const Tensor q = torch::randn({B, C}).requires_grad_(true);
  const Tensor kv = torch::randn({B, T, 2 * C}).requires_grad_(true);
  const Tensor dout = torch::randn({B, C});
  (kernels::class_attention(q, kv, h) * dout).sum().backward();
  const Tensor q2 = q.detach().clone().requires_grad_(true);
  const Tensor kv2 = kv.detach().clone().requires_grad_(true);
  const Tensor parts = kv2.view({B, T, 2, h, d});
  const Tensor e = ((q2.view({B, 1, h, d}) * parts.select(2, 0)).sum(-1) / std::sqrt(32.0)).exp();
  const Tensor attn = e / e.sum(1, true).detach();  // drops the normaliser's gradient
  ((attn.unsqueeze(-1) * parts.select(2, 1)).sum(1).reshape({B, C}) * dout).sum().backward();
  EXPECT_GT(normalised_mse(q.grad(), q2.grad()), 1e-6);
  EXPECT_GT(normalised_mse(kv.grad(), kv2.grad()), 1e-6);
}

TEST_F(KernelClassAttention, GradientMatchesFiniteDifferencesInFloat64) {
  torch::manual_seed(10);
  const auto on = torch::TensorOptions().dtype(torch::kDouble);
  const Tensor q = torch::randn({2, 36}, on).requires_grad_(true);
  const Tensor kv = torch::randn({2, 5, 72}, on).requires_grad_(true);
  const Tensor w = torch::randn({2, 36}, on);
  xdino::testing::GradCheckOptions o;
  o.entries_per_tensor = 60;
  o.tolerance = 1e-7;
  xdino::testing::expect_gradients_match(
      [&] { return (kernels::class_attention(q, kv, 3) * w).sum(); }, {{"q", q}, {"kv", kv}}, o);
}

// Each (image, head) item is one task's alone, so the thread count changes no bit.
TEST_F(KernelClassAttention, OneThreadAndTwoGiveTheSameBits) {
  torch::manual_seed(11);
  const Tensor q0 = torch::randn({64, 128}), kv0 = torch::randn({64, 50, 256});
  const Tensor dout = torch::randn({64, 128});
  const int previous = at::get_num_threads();
  auto run = [&](int threads) {
    at::set_num_threads(threads);
    const Tensor q = q0.clone().requires_grad_(true), kv = kv0.clone().requires_grad_(true);
    const Tensor out = kernels::class_attention(q, kv, 4);
    (out * dout).sum().backward();
    return std::vector<Tensor>{out, q.grad(), kv.grad()};
  };
  const auto one = run(1), two = run(2);
  at::set_num_threads(previous);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
}

TEST_F(KernelClassAttention, RefusesWhatItDoesNotTakeAndComputesOnlyAskedGradients) {
  const Tensor q = torch::randn({2, 24}), kv = torch::randn({2, 5, 48});
  EXPECT_TRUE(kernels::class_attention_applies(q, kv, 2));
  EXPECT_FALSE(kernels::class_attention_applies(q, kv.transpose(0, 1), 2));        // strided
  EXPECT_FALSE(kernels::class_attention_applies(q.to(torch::kBFloat16), kv, 2));   // autocast
  EXPECT_FALSE(kernels::class_attention_applies(q, kv.to(torch::kDouble), 2));     // mixed
  EXPECT_FALSE(kernels::class_attention_applies(q, kv, 5));                        // 24 % 5
  EXPECT_FALSE(kernels::class_attention_applies(q, torch::randn({2, 5, 24}), 2));  // not 2C
  EXPECT_FALSE(kernels::class_attention_applies(q, torch::randn({3, 5, 48}), 2));  // batch
  EXPECT_FALSE(kernels::class_attention_applies(q, torch::randn({2, 0, 48}), 2));  // no token
  EXPECT_FALSE(kernels::class_attention_applies(q.view({2, 1, 24}), kv, 2));       // not (B, C)
  try {
    (void)kernels::class_attention(q.to(torch::kBFloat16), kv, 2);
    ADD_FAILURE() << "a bfloat16 query was taken";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU class attention"), std::string::npos) << e.what();
  }
  // Gradient only for what asked for one; no graph without requires_grad.
  const Tensor kq = kv.clone().requires_grad_(true);
  kernels::class_attention(q, kq, 2).sum().backward();
  EXPECT_TRUE(kq.grad().defined());
  EXPECT_FALSE(kernels::class_attention(q, kv, 2).requires_grad());
}

// ClassAttention on kAuto (the kernel on the CPU) against kOps, forward and backward, and its
// block against the naive float64 block; asked for its weights, kAuto takes the op path.
TEST_F(KernelClassAttention, ClassAttentionModulesOnEachPathAgree) {
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    ClassAttention ops = prepared(ClassAttention(64, 4, LayerKernels::kOps), dtype, 5);
    ClassAttention kernel = prepared(ClassAttention(64, 4, LayerKernels::kAuto), dtype, 5);
    const Tensor u0 = torch::randn({3, 50, 64}).to(dtype), dy = torch::randn({3, 1, 64}).to(dtype);
    auto run = [&](ClassAttention& m) {
      m->zero_grad();
      const Tensor u = u0.clone().requires_grad_(true);
      (m(u) * dy).sum().backward();
      return std::vector<Tensor>{m(u0), u.grad(), m->qkv->weight.grad(), m->qkv->bias.grad()};
    };
    const auto a = run(ops), b = run(kernel);
    const double bound = dtype == torch::kFloat ? 1e-10 : 1e-24;
    const char* names[] = {"y", "du", "qkv.weight grad", "qkv.bias grad"};
    for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(normalised_mse(b[i], a[i]), bound) << names[i];
    Tensor weights;
    expect_close(kernel(u0, &weights), a[0], dtype == torch::kFloat ? 1e-5 : 1e-12,
                 "kAuto asked for its weights");
    EXPECT_EQ(weights.sizes(), (std::vector<int64_t>{3, 4, 50}));
  }
  torch::NoGradGuard no_grad;
  ClassAttentionBlock block =
      prepared(ClassAttentionBlock(ClassAttentionBlockOptions(32, 4).kernels(LayerKernels::kAuto)),
               torch::kDouble, 3);
  const Tensor x = torch::randn({2, 10, 32}, torch::kDouble);
  expect_close(block(x), naive::class_attention_block(x, naive::params_of(*block), "", 4, false),
               1e-10, "kAuto class attention block against the naive block");
}

}  // namespace
}  // namespace xdino::models
