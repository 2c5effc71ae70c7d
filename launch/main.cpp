// `dino`: parses the subcommand, runs it, and turns every failure into one line + exit code
// (2: usage or configuration, 1: runtime).
#include <c10/util/Exception.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "core/check.h"
#include "launch/command.h"

namespace {

// Idle OpenMP threads spin by default; on small machines that costs milliseconds per
// parallel region. libgomp reads OMP_WAIT_POLICY once, when it is loaded (before main), so
// the only way to set it for ourselves is to re-execute with it in the environment.
void ensure_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run with the spinning default
}

std::string error_line(const char* what) {
  std::string s = xdino::first_line(what);
  // LibTorch's allocators say how much they were asked for, not what to do about it.
  if ((s.find("can't allocate memory") != std::string::npos ||
       s.find("out of memory") != std::string::npos) &&
      s.find("lower --") == std::string::npos)
    s += " (out of memory: lower --batch_size_per_gpu, the crop or image sizes, or --in_chans)";
  return xdino::detail::one_line(s);  // no control character of a file's names reaches the terminal
}

}  // namespace

int main(int argc, char** argv) {
  ensure_passive_openmp(argv);
  // Past a file-size limit (ulimit -f) the kernel's default is to kill us with SIGXFSZ and no
  // word. Ignored, the write fails with EFBIG instead, and the writer reports it in one line
  // with the previous file intact, as for a full disk (ENOSPC).
  signal(SIGXFSZ, SIG_IGN);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    xdino::launch::print_usage(argc < 2 ? std::cerr : std::cout);
    return argc < 2 ? 2 : 0;
  }
  const std::string sub = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  const std::string who = sub[0] == '-' ? "dino" : "dino " + sub;
  try {
    return xdino::launch::run_command(sub, args);
  } catch (const xdino::UsageError& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << who << ": error: " << error_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << who << ": error: " << error_line(e.what()) << "\n";
    return 1;
  }
}
