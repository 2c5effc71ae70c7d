// Runs a program and captures what it says, for tests of the `dino` binary.
//
// Contract: run_process(argv) starts argv[0] (a path) with argv[1..], stdin from /dev/null,
// extra environment variables added to the current ones; it waits for the exit (or kills the
// process after timeout_seconds) and returns the exit code (128 + signal if killed by one),
// stdout and stderr separately.
// start_process(argv, out_path, err_path, env) starts it the same way without waiting, its
// stdout and stderr going to the two files, and returns its pid; wait_process(pid, timeout)
// waits for it (killing it after timeout_seconds: then timed_out) and returns the exit code,
// timed_out and seconds of a ProcessResult (out and err stay empty).
// wait_until_listening(pid, port, timeout) polls /proc/net/tcp and tcp6 (so without connecting
// to, and disturbing, the server) until some socket listens on the TCP port; false when the
// process pid exits first or timeout_seconds pass.
// count_lines(text) counts its newlines, count_of(text, what) the (possibly overlapping)
// occurrences of `what`, last_line(text) is its last non-empty line without the newline.
#pragma once

#include <cstddef>
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

int start_process(const std::vector<std::string>& argv, const std::string& out_path,
                  const std::string& err_path, const std::map<std::string, std::string>& env = {});
ProcessResult wait_process(int pid, double timeout_seconds);
bool wait_until_listening(int pid, int port, double timeout_seconds);

size_t count_lines(const std::string& text);
size_t count_of(const std::string& text, const std::string& what);
std::string last_line(const std::string& text);

// Path of the dino binary under test (set by CMake).
std::string dino_binary();
// Folder with the committed test fixtures (tests/data).
std::string test_data_dir();

}  // namespace xdino::testing
