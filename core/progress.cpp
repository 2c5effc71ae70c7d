#include "core/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/log.h"

namespace xdino {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(s / 3600),
                  static_cast<long>(s % 3600 / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(s / 60),
                  static_cast<long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lds", static_cast<long>(s));
  return buf;
}

Progress::Progress(std::string label, int64_t total, int64_t start, double interval_seconds)
    : label_(std::move(label)),
      total_(total),
      start_(start),
      done_(start),
      tty_(isatty(fileno(stdout)) != 0),
      interval_(interval_seconds),
      begin_(Clock::now()),
      last_print_(begin_) {
  if (interval_ < 0) {
    const char* env = std::getenv("XDINO_PROGRESS_INTERVAL");
    interval_ = env != nullptr ? std::atof(env) : (tty_ ? 0.1 : 10.0);
  }
}

Progress::~Progress() {
  if (!finished_) finish(status_);
}

double Progress::rate() const {
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin_).count();
  return elapsed > 0 ? static_cast<double>(done_ - start_) / elapsed : 0.0;
}

void Progress::step(int64_t n, const std::string& status) {
  done_ += n;
  if (!status.empty()) status_ = status;
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_print_).count() >= interval_) {
    last_print_ = now;
    print(false);
  }
}

void Progress::finish(const std::string& status) {
  if (finished_) return;
  finished_ = true;
  if (!status.empty()) status_ = status;
  print(true);
}

void Progress::print(bool final_line) {
  if (!log::enabled(log::Level::kInfo)) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - begin_).count();
  const double r = rate();
  char head[160];
  if (total_ > 0) {
    const double eta = r > 0 ? static_cast<double>(total_ - done_) / r : NAN;
    std::snprintf(head, sizeof head, "%s %ld/%ld (%3.0f%%) %.3g it/s, %s %s", label_.c_str(),
                  static_cast<long>(done_), static_cast<long>(total_),
                  100.0 * static_cast<double>(done_) / static_cast<double>(total_), r,
                  final_line ? "took" : "eta", format_duration(final_line ? elapsed : eta).c_str());
  } else {
    std::snprintf(head, sizeof head, "%s %ld %.3g it/s, %s", label_.c_str(),
                  static_cast<long>(done_), r, format_duration(elapsed).c_str());
  }
  std::string line = head;
  if (!status_.empty()) line += "  " + status_;
  if (tty_) {
    std::printf("\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
    std::fflush(stdout);
  } else {
    log::info(line);
  }
}

}  // namespace xdino
