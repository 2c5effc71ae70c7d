// SIGTERM / SIGUSR1 turned into a polite stop request for the training loop.
//
// Contract: while a StopSignalGuard lives, SIGTERM and SIGUSR1 only set a process-wide flag
// (async-signal-safe); stop_requested() reads it. The guard restores the previous handlers
// when it ends. Guards do not nest usefully: create one per training run. The guard's constructor
// resets the flag.
#pragma once

#include <csignal>

namespace xdino::train {

class StopSignalGuard {
 public:
  StopSignalGuard();
  ~StopSignalGuard();
  StopSignalGuard(const StopSignalGuard&) = delete;
  StopSignalGuard& operator=(const StopSignalGuard&) = delete;

 private:
  struct sigaction old_term_ = {};
  struct sigaction old_usr1_ = {};
};

bool stop_requested();
int stop_signal();  // the signal that asked to stop, 0 if none

}  // namespace xdino::train
