// The training step's numbers by name, from the device to the log: what one pass leaves for
// the step's read-back, and how the read-back lays out the flags, the center's statistics and
// the passes (ssl/dino_step.h). The step's loss and each of its terms travel as PassNumber
// entries, one per term of kLossTerms (ssl/recipe.h), in its order.
//
// Contract: each layout is a set of indices into one float64 vector; kCount is its length
// (for PassNumber, the numbers of one pass; for ReadBack, where the passes begin).
#pragma once

#include <array>
#include <cstddef>

#include "ssl/recipe.h"

namespace xdino::ssl {

// One replica's pass over one micro-batch: the loss, DINO's term, the recipe's terms from
// kTerms on (kTermCount of them, ssl/recipe_terms.h), then 1 where the student's and the
// teacher's outputs hold a non-finite value.
struct PassNumber {
  enum : size_t {
    kLoss,
    kDino,
    kTerms,
    kStudentNonfinite = kTerms + kTermCount,
    kTeacherNonfinite,
    kCount
  };
};

// The step's one copy to the host: the flags summed over every process (a non-finite loss, a
// stop signal, a timed save due on rank 0), the center's statistics, then every pass's
// PassNumber::kCount numbers, micro-batch by micro-batch (replicas inside).
struct ReadBack {
  enum : size_t { kNonfinite, kStop, kSaveDue, kTeacherEntropy, kKlUniform, kCount };
  static constexpr size_t kFlags = kTeacherEntropy;  // the first kFlags entries
};

// The step's loss and its terms, from its passes' numbers: each pass is one of `parts` equal
// shares of the step (a replica's micro-batch), so the step's value is their mean.
struct StepLosses {
  double total = 0, dino = 0;
  std::array<double, kTermCount> terms{};  // at kLossTerms' indices

  void add_pass(const double* numbers, double parts) {
    total += numbers[PassNumber::kLoss] / parts;
    dino += numbers[PassNumber::kDino] / parts;
    for (size_t i = 0; i < kTermCount; ++i) terms[i] += numbers[PassNumber::kTerms + i] / parts;
  }
};

}  // namespace xdino::ssl
