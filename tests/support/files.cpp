#include "tests/support/files.h"

#include <unistd.h>

#include "tests/support/process.h"

namespace xdino::testing {
namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("xdino_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

fs::path fixture(const std::string& rel) { return fs::path(test_data_dir()) / rel; }

bool python_has(const std::string& module) {
  if (!fs::exists("/usr/bin/python3")) return false;
  return run_process({"/usr/bin/python3", "-c", "import " + module}, {}, 60).exit_code == 0;
}

}  // namespace xdino::testing
