// Reading TensorBoard event files back in the tests, with the tensorboard package's own reader
// (tests/support/tensorboard_read.py, in scripts/setup.sh --tests' environment): what the tests
// of core/tensorboard.h (tests/core) and of the commands' boards (tests/cli) share.
// reader_missing() says what is missing ("" when the reader runs); read_events() fails the
// calling test when the reader exits non-zero.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace xdino::testing {

inline std::string reader_missing() { return python_lacks({"tensorboard"}, pyenv_python()); }

// The event files in `dir` (none where it does not exist), sorted by name.
inline std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// {"scalars": [[tag, step, value], ...], "images": [[tag, step, w, h, bytes], ...]} of `files`.
inline xdino::Json read_events(const std::vector<std::filesystem::path>& files) {
  std::vector<std::string> argv{pyenv_python(), repo_file("tests/support/tensorboard_read.py")};
  for (const std::filesystem::path& f : files) argv.push_back(f.string());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return xdino::Json::parse(r.exit_code == 0 ? r.out : R"({"scalars": [], "images": []})");
}

using Point = std::pair<std::string, int64_t>;  // (tag, step)

// The scalars as (tag, step) -> value; a (tag, step) seen twice is a failure.
inline std::map<Point, double> scalars_of(const xdino::Json& events) {
  std::map<Point, double> out;
  for (const auto& s : events["scalars"]) {
    const Point p{s[0].get<std::string>(), s[1].get<int64_t>()};
    EXPECT_TRUE(out.emplace(p, s[2].get<double>()).second)
        << p.first << " at step " << p.second << " twice";
  }
  return out;
}

}  // namespace xdino::testing
