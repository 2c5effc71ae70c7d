// Progress reporting for long loops (epochs, feature extraction, k-NN chunks).
//
// Contract:
//  - Progress(label, total) then step(n, status) per unit of work; finish() prints the final
//    line (the destructor does it too if you forget).
//  - On a terminal: one line redrawn in place at most ~10 times a second, with count, percent,
//    rate, ETA and the caller's status text. Not on a terminal (CI logs, files): one plain line
//    every `interval_seconds` (default 10, or XDINO_PROGRESS_INTERVAL) and at the end.
//  - Prints only where log::enabled(kInfo) (rank 0). Not thread-safe: call from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace xdino {

class Progress {
 public:
  Progress(std::string label, int64_t total, int64_t start = 0, double interval_seconds = -1);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void step(int64_t n = 1, const std::string& status = "");
  void finish(const std::string& status = "");

  int64_t done() const { return done_; }
  // Items per second since construction (excluding `start`).
  double rate() const;

 private:
  using Clock = std::chrono::steady_clock;
  void print(bool final_line);

  std::string label_;
  std::string status_;
  int64_t total_;
  int64_t start_;
  int64_t done_;
  bool tty_;
  bool finished_ = false;
  double interval_;
  Clock::time_point begin_;
  Clock::time_point last_print_;
};

// "1h02m", "3m05s", "12s": a compact duration for logs.
std::string format_duration(double seconds);

}  // namespace xdino
