// Per-iteration schedules for any training loop (a learning rate, a weight decay, an EMA
// momentum), exactly as the official code's utils.cosine_scheduler builds them with numpy in
// float64. Which schedules a run uses, and who applies them, is the loop's business (DINO's:
// docs/dino.md, "Schedules and optimiser").
//
// Contract:
//  - cosine_schedule(...) has epochs * niter entries: a linear warmup over warmup_epochs*niter
//    iterations from start_warmup to base (both ends included, numpy.linspace), then
//    final + (base - final)/2 * (1 + cos(pi * i / L)), i = 0..L-1, L = remaining iterations
//    (so the last value stays slightly above `final`).
//  - Arguments out of range (negative counts, warmup longer than training) throw UsageError.
#pragma once

#include <cstdint>
#include <vector>

namespace xdino::train {

std::vector<double> linspace(double start, double stop, int64_t num);

std::vector<double> cosine_schedule(double base, double final, int64_t epochs, int64_t niter,
                                    int64_t warmup_epochs = 0, double start_warmup = 0.0);

}  // namespace xdino::train
