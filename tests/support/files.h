// Files for tests: scratch folders and the committed fixtures.
//
// Contract: fresh_dir(name) returns an empty folder under the system temp dir, unique to this
// process and name (removed first if it exists). Every such folder is removed when the test
// program exits, unless a test failed or XDINO_KEEP_TEST_DIRS is set (then stderr names it).
// fixture(rel) is tests/data/<rel>; repo_file(rel) is <rel> under the repository root (bench/,
// tools/, ...). python_has(module, python) tells whether `python` (default kPython) can import
// `module`; python_lacks(modules, python) is "" when it can import all of them, else "<python>
// cannot import <the first missing>" (tests that cross-check with Python skip themselves, with that
// reason, when it cannot). pyenv_python() is the virtual environment scripts/setup.sh --tests
// makes for the packages Debian lacks (timm, safetensors, tensorboard; XDINO_PYENV, default
// build/pyenv), with Debian's python3-torch visible in it.
// kFashionMnist is where Debian's dataset-fashion-mnist installs the data. write_random_idx(dir, n)
// writes an IDX training set of n random 28x28 images with labels i % 10, in Fashion-MNIST's
// layout (train-images-idx3-ubyte, train-labels-idx1-ubyte), the same bytes on every call.
// write_ppm_folder(root, per_class, width, height) writes an ImageFolder root/{train,val}/{a,b}/
// of per_class binary PPM images each (OpenCV reads them; no Python needed): random noise,
// class b bluer than class a, the same bytes on every call.
// differences_from(ref, run) compares a run folder with an uninterrupted run's: one line per
// file of `ref` that `run` lacks or holds with other bytes, and per temporary (".tmp-") file
// left in `run`; empty when they agree (the crash-consistency tests' criterion). TensorBoard
// event files are not compared (their names hold the time and pid, their events wall times;
// tests/cli/test_tensorboard.cpp checks what a resumed run's hold), only that `run` has one when
// `ref` has.
// error_under_file_size_limit(bytes, fn) runs fn with the process's file-size limit at `bytes`
// (a full disk as a write sees it: EFBIG, with SIGXFSZ ignored as `dino` ignores it) and
// returns the message of the xdino::Error fn threw, or "" if none; limit and handler are
// restored. Other exceptions propagate.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace xdino::testing {

inline constexpr char kPython[] = "/usr/bin/python3";
inline const std::filesystem::path kFashionMnist = "/usr/share/datasets/fashion-mnist";

std::filesystem::path fresh_dir(const std::string& name);
std::filesystem::path fixture(const std::string& rel);
std::string repo_file(const std::string& rel);
bool python_has(const std::string& module, const std::string& python = kPython);
std::string python_lacks(const std::vector<std::string>& modules,
                         const std::string& python = kPython);
std::string pyenv_python();
void write_random_idx(const std::filesystem::path& dir, int n);
void write_ppm_folder(const std::filesystem::path& root, int per_class, int width, int height);
std::string differences_from(const std::filesystem::path& ref, const std::filesystem::path& run);
std::string error_under_file_size_limit(size_t bytes, const std::function<void()>& fn);

}  // namespace xdino::testing
