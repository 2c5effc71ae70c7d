// Runs a program and captures what it says, for tests of the `dino` binary.
//
// Contract: run_process(argv) starts argv[0] (a path) with argv[1..], stdin from /dev/null,
// extra environment variables added to the current ones; it waits for the exit (or kills the
// process after timeout_seconds) and returns the exit code (128 + signal if killed by one),
// stdout and stderr separately.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace xdino::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
  double seconds = 0;  // wall time from start to exit
};

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {},
                          double timeout_seconds = 600);

// Path of the dino binary under test (set by CMake).
std::string dino_binary();
// Folder with the committed test fixtures (tests/data).
std::string test_data_dir();
// An empty folder <tmp>/xdino_test_<name>_<pid> (removed first if it exists).
std::string fresh_temp_dir(const std::string& name);

}  // namespace xdino::testing
