#include "tests/support/files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>

#include "core/atomic_file.h"
#include "core/check.h"
#include "tests/support/process.h"

namespace xdino::testing {
namespace fs = std::filesystem;

namespace {

// The folders fresh_dir made in this process. A test run writes checkpoints of 100 MB and more,
// and every run has its own pid, so folders left behind add up: they filled CI's disk once
// (docs/contributing.md, "A test"). When the program exits they are removed, unless a test
// failed or XDINO_KEEP_TEST_DIRS is set: then they stay, named on stderr, to be looked at.
// Made on first use, after GoogleTest's UnitTest, so destroyed before it and able to ask it.
class ScratchFolders {
 public:
  void add(const fs::path& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(dirs_.begin(), dirs_.end(), dir) == dirs_.end()) dirs_.push_back(dir);
  }
  ~ScratchFolders() {
    if (::getpid() != owner_) return;  // a forked child that exits normally keeps its parent's
    const auto* unit = ::testing::UnitTest::GetInstance();
    const bool keep =
        std::getenv("XDINO_KEEP_TEST_DIRS") != nullptr || unit->failed_test_count() > 0;
    for (const auto& dir : dirs_) {
      std::error_code ignored;  // a folder a test removed itself is fine
      if (!keep)
        fs::remove_all(dir, ignored);
      else if (fs::exists(dir, ignored))
        std::cerr << "test files kept in " << dir.string() << "\n";
    }
  }

 private:
  const pid_t owner_ = ::getpid();
  std::mutex mutex_;
  std::vector<fs::path> dirs_;
};

ScratchFolders& scratch_folders() {
  static ScratchFolders folders;
  return folders;
}

}  // namespace

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("xdino_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  scratch_folders().add(dir);
  return dir;
}

fs::path fixture(const std::string& rel) { return fs::path(test_data_dir()) / rel; }

std::string repo_file(const std::string& rel) {
  return (fs::path(test_data_dir()) / ".." / ".." / rel).string();
}

bool python_has(const std::string& module, const std::string& python) {
  if (!fs::exists(python)) return false;
  return run_process({python, "-c", "import " + module}, {}, 60).exit_code == 0;
}

std::string python_lacks(const std::vector<std::string>& modules, const std::string& python) {
  for (const auto& m : modules)
    if (!python_has(m, python)) return python + " cannot import " + m;
  return "";
}

std::string pyenv_python() { return std::string(XDINO_PYENV_DIR) + "/bin/python"; }

namespace {

void write_be32(std::ofstream& f, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  f.write(reinterpret_cast<const char*>(b), 4);
}

}  // namespace

// IDX: images (magic 2051, n, rows, cols, bytes) and labels (2049, n), big-endian.
void write_random_idx(const fs::path& dir, int n) {
  std::mt19937 rng(3);
  std::ofstream images(dir / "train-images-idx3-ubyte", std::ios::binary);
  write_be32(images, 2051);
  write_be32(images, n);
  write_be32(images, 28);
  write_be32(images, 28);
  for (int i = 0; i < n * 28 * 28; ++i) images.put(static_cast<char>(rng() & 0xff));
  std::ofstream labels(dir / "train-labels-idx1-ubyte", std::ios::binary);
  write_be32(labels, 2049);
  write_be32(labels, n);
  for (int i = 0; i < n; ++i) labels.put(static_cast<char>(i % 10));
}

void write_ppm_folder(const fs::path& root, int per_class, int width, int height) {
  uint32_t state = 11;
  auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 24; };
  for (const char* split : {"train", "val"})
    for (int c = 0; c < 2; ++c) {
      const fs::path dir = root / split / (c ? "b" : "a");
      fs::create_directories(dir);
      for (int i = 0; i < per_class; ++i) {
        std::string name = "x";
        name += std::to_string(i);
        name += ".ppm";
        std::ofstream f(dir / name, std::ios::binary);
        f << "P6\n" << width << " " << height << "\n255\n";
        for (int p = 0; p < width * height * 3; ++p)
          f.put(static_cast<char>(next() / 2 + (p % 3 == 2 * c ? 100 : 0)));
      }
    }
}

std::string differences_from(const std::filesystem::path& ref, const std::filesystem::path& run) {
  std::string out;
  const auto is_events = [](const std::filesystem::path& name) {
    return name.string().rfind("events.out.tfevents.", 0) == 0;
  };
  bool ref_events = false, run_events = false;
  for (const auto& e : std::filesystem::directory_iterator(run))
    run_events = run_events || is_events(e.path().filename());
  for (const auto& e : std::filesystem::directory_iterator(ref)) {
    const auto name = e.path().filename();
    if (is_events(name))
      ref_events = true;
    else if (!std::filesystem::exists(run / name))
      out += name.string() + ": missing\n";
    else if (xdino::read_file(run / name) != xdino::read_file(e.path()))
      out += name.string() + ": differs from the uninterrupted run's\n";
  }
  if (ref_events && !run_events) out += "events.out.tfevents.*: missing\n";
  for (const auto& e : std::filesystem::directory_iterator(run))
    if (e.path().filename().string().find(".tmp-") != std::string::npos)
      out += e.path().filename().string() + ": temporary file left\n";
  return out;
}

std::string error_under_file_size_limit(size_t bytes, const std::function<void()>& fn) {
  rlimit old{};
  XDINO_CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit: ", std::strerror(errno));
  rlimit small = old;
  small.rlim_cur = bytes;
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  XDINO_CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit: ", std::strerror(errno));
  std::string message;
  try {
    fn();
  } catch (const xdino::Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous_handler);
  return message;
}

}  // namespace xdino::testing
