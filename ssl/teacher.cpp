#include "ssl/teacher.h"

#include "core/check.h"
#include "kernels/cpu/fused_cpu.h"
#include "models/weights.h"

namespace xdino::ssl {

using kernels::fused_cpu_applies;
using kernels::fused_ema;
using train::UpdatePath;

void init_teacher(const torch::nn::Module& student, torch::nn::Module& teacher) {
  // Every parameter and buffer by name, strictly (models/weights.h): the same architecture.
  models::load_state_dict(teacher, models::state_dict(student), /*strict=*/true, "the student");
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
