// Wall-clock seconds of the training step's phases (ssl/dino_step.h measures them, the
// Scheduler's epoch_time_line reports them). CPU-accurate; CUDA work is asynchronous and lands
// in whichever phase synchronises. grad_wait is the part of backward spent waiting for the
// gradient all-reduce after autograd is done: the communication that the bucketed overlap did
// not hide (0 in a single process). After each epoch rank 0 logs one line of them: the epoch's
// steps, wall time, images/s and the share of it the loop waited for the data loader
// (docs/dino.md, "Where the time goes").
#pragma once

#include <chrono>
#include <cstdint>

namespace xdino::ssl {

struct StepTimes {
  double data = 0, forward = 0, backward = 0, optimizer = 0, ema = 0, grad_wait = 0;
  double checkpoint = 0;  // timed mid-epoch checkpoints (options.saveckp_minutes)
  int64_t steps = 0;

  // Phase by phase, what was spent between `earlier` and this.
  StepTimes since(const StepTimes& earlier) const {
    StepTimes d;
    d.data = data - earlier.data;
    d.forward = forward - earlier.forward;
    d.backward = backward - earlier.backward;
    d.optimizer = optimizer - earlier.optimizer;
    d.ema = ema - earlier.ema;
    d.grad_wait = grad_wait - earlier.grad_wait;
    d.checkpoint = checkpoint - earlier.checkpoint;
    d.steps = steps - earlier.steps;
    return d;
  }
};

// Seconds from `t` to now; `t` becomes now: one phase ends where the next begins.
inline double seconds_since(std::chrono::steady_clock::time_point& t) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

}  // namespace xdino::ssl
