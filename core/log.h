// Process-aware logging.
//
// Contract:
//  - info()/debug() print on rank 0 only (the ranks run the same program, so rank 0's lines
//    speak for all); warn()/error() print on every rank, prefixed with the rank when the world
//    has more than one process.
//  - info/debug go to stdout, warn/error to stderr; each call prints exactly one line, whole,
//    even when several threads log at once.
//  - The level comes from set_level() or, if never called, from XDINO_LOG_LEVEL
//    (debug|info|warn|error), default info.
#pragma once

#include <string>

#include "core/check.h"

namespace xdino::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_rank(int rank, int world_size);
int rank();
int world_size();
void set_level(Level level);
Level level();

// Whether this process prints messages of `level` (rank and level filters applied).
bool enabled(Level level);
void write(Level level, const std::string& line);

template <typename... Parts>
void debug(const Parts&... parts) {
  if (enabled(Level::kDebug)) write(Level::kDebug, detail::concat(parts...));
}
template <typename... Parts>
void info(const Parts&... parts) {
  if (enabled(Level::kInfo)) write(Level::kInfo, detail::concat(parts...));
}
template <typename... Parts>
void warn(const Parts&... parts) {
  if (enabled(Level::kWarn)) write(Level::kWarn, detail::concat(parts...));
}
template <typename... Parts>
void error(const Parts&... parts) {
  if (enabled(Level::kError)) write(Level::kError, detail::concat(parts...));
}

}  // namespace xdino::log
