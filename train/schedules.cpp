#include "train/schedules.h"

#include <cmath>

#include "core/check.h"

namespace xdino::train {

std::vector<double> linspace(double start, double stop, int64_t num) {
  XDINO_CHECK_ARG(num >= 0, "linspace needs a non-negative count, got ", num);
  std::vector<double> out(static_cast<size_t>(num));
  if (num == 0) return out;
  if (num == 1) {
    out[0] = start;
    return out;
  }
  // numpy: arange(num) * step + start, with the last entry set to `stop` exactly.
  const double step = (stop - start) / static_cast<double>(num - 1);
  for (int64_t i = 0; i < num; ++i) out[i] = static_cast<double>(i) * step + start;
  out.back() = stop;
  return out;
}

std::vector<double> cosine_schedule(double base, double final, int64_t epochs, int64_t niter,
                                    int64_t warmup_epochs, double start_warmup) {
  XDINO_CHECK_ARG(epochs >= 0 && niter >= 0 && warmup_epochs >= 0,
                  "schedule needs non-negative epochs/iterations, got epochs=", epochs,
                  " niter=", niter, " warmup_epochs=", warmup_epochs);
  XDINO_CHECK_ARG(warmup_epochs <= epochs, "warmup_epochs (", warmup_epochs,
                  ") must not exceed epochs (", epochs, ")");
  const int64_t warmup_iters = warmup_epochs * niter;
  std::vector<double> out = linspace(start_warmup, base, warmup_iters);
  const int64_t rest = epochs * niter - warmup_iters;
  const double pi = std::acos(-1.0);
  out.reserve(static_cast<size_t>(epochs * niter));
  for (int64_t i = 0; i < rest; ++i)
    out.push_back(final +
                  0.5 * (base - final) *
                      (1.0 + std::cos(pi * static_cast<double>(i) / static_cast<double>(rest))));
  return out;
}

}  // namespace xdino::train
