// The moment an evaluation has checked everything it was given and starts to write: the
// command writes its config.ini then (launch/session.h), so that a command refused for a bad
// flag, path or file leaves no folder and overwrites no earlier result (docs/usage.md,
// "Outputs").
//
// Contract: every run_* of eval/ that takes a ChecksPassed calls it once, on every process,
// after its last check of options, data and weights and before its first write into its output
// folder; an empty one is not called.
#pragma once

#include <functional>

namespace xdino::eval {

using ChecksPassed = std::function<void()>;

inline void notify(const ChecksPassed& checks_passed) {
  if (checks_passed) checks_passed();
}

}  // namespace xdino::eval
