#include "ssl/teacher.h"

#include "core/check.h"
#include "kernels/cpu/fused_cpu.h"

namespace xdino::ssl {

using kernels::fused_cpu_applies;
using kernels::fused_ema;
using train::UpdatePath;

namespace {

void copy_named(const torch::OrderedDict<std::string, torch::Tensor>& from,
                torch::OrderedDict<std::string, torch::Tensor>& to, const char* what) {
  XDINO_CHECK(from.size() == to.size(), "teacher has ", to.size(), " ", what, ", the student ",
              from.size(), ": build both from the same architecture");
  for (const auto& item : from) {
    torch::Tensor* dst = to.find(item.key());
    XDINO_CHECK(dst != nullptr, "teacher has no ", what, " '", item.key(), "' the student has");
    XDINO_CHECK(dst->sizes() == item.value().sizes(), "teacher ", what, " '", item.key(),
                "' has shape ", dst->sizes(), ", the student's ", item.value().sizes());
    dst->copy_(item.value());
  }
}

}  // namespace

void init_teacher(const torch::nn::Module& student, torch::nn::Module& teacher) {
  torch::NoGradGuard no_grad;
  auto params = teacher.named_parameters();
  copy_named(student.named_parameters(), params, "parameters");
  auto buffers = teacher.named_buffers();
  copy_named(student.named_buffers(), buffers, "buffers");
  for (auto& p : teacher.parameters()) p.set_requires_grad(false);
}

void ema_update(const torch::nn::Module& student, torch::nn::Module& teacher, double momentum,
                UpdatePath path) {
  torch::NoGradGuard no_grad;
  const auto s = student.parameters();
  auto t = teacher.parameters();
  XDINO_CHECK(s.size() == t.size(), "EMA needs the same parameters in student (", s.size(),
              ") and teacher (", t.size(), ")");
  for (size_t i = 0; i < s.size(); ++i)
    XDINO_CHECK(s[i].sizes() == t[i].sizes(), "EMA: teacher parameter ", i, " has shape ",
                t[i].sizes(), ", the student's ", s[i].sizes());
  if (path == UpdatePath::kAuto)
    path = fused_cpu_applies(s) && fused_cpu_applies(t) ? UpdatePath::kFusedCpu
                                                        : UpdatePath::kMultiTensor;
  switch (path) {
    case UpdatePath::kFusedCpu:
      for (size_t i = 0; i < s.size(); ++i)
        XDINO_CHECK(fused_ema(t[i], s[i], momentum),
                    "the fused CPU EMA takes contiguous float32 CPU tensors only");
      return;
    case UpdatePath::kMultiTensor: {
      at::_foreach_mul_(t, momentum);
      at::_foreach_add_(t, at::_foreach_mul(s, 1.0 - momentum));
      return;
    }
    default:
      // Official order of operations: (1 - m) * theta_s is rounded before the addition.
      for (size_t i = 0; i < s.size(); ++i) t[i].mul_(momentum).add_(s[i] * (1.0 - momentum));
  }
}

}  // namespace xdino::ssl
