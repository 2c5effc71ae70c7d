// The training step's numbers by name, from the device to the log: what one pass leaves for
// the step's read-back, and how the read-back lays out the flags, the center's statistics and
// the passes (ssl/dino_step.h). The step's loss and each of its terms travel as PassNumber
// entries; adding a term is one entry here (docs/contributing.md, "Adding a loss term").
//
// Contract: each layout is a set of indices into one float64 vector; kCount is its length
// (for PassNumber, the numbers of one pass; for ReadBack, where the passes begin).
#pragma once

#include <cstddef>

namespace xdino::ssl {

// One replica's pass over one micro-batch: the loss, its terms (ssl/recipe_terms.h), then 1
// where the student's and the teacher's outputs hold a non-finite value.
struct PassNumber {
  enum : size_t { kLoss, kDino, kKoleo, kIbot, kStudentNonfinite, kTeacherNonfinite, kCount };
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
  double total = 0, dino = 0, koleo = 0, ibot = 0;

  void add_pass(const double* numbers, double parts) {
    total += numbers[PassNumber::kLoss] / parts;
    dino += numbers[PassNumber::kDino] / parts;
    koleo += numbers[PassNumber::kKoleo] / parts;
    ibot += numbers[PassNumber::kIbot] / parts;
  }
};

}  // namespace xdino::ssl
