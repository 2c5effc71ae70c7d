// Helpers of the .pth tests: a canonical text description of loaded values, identical to what
// tests/data/pickle/pth_tool.py prints for the same Python objects, and access to that script.
//
// Contract:
//  - describe(value) returns one line per value, "<path> <kind> <details>": dicts and objects
//    (GenericDicts whose first key is "__class__") list their entries, tensors print dtype,
//    sizes, strides, offset, requires_grad, a storage number (shared storages share it) and
//    every element (%.17g for floating types). Strings print raw bytes, escaped.
//  - python_torch_available() is true when /usr/bin/python3 has torch and numpy installed.
//  - run_pth_tool(args) runs pth_tool.py with /usr/bin/python3; throws on a non-zero exit with
//    the script's stderr in the message.
//  - fresh_dir(name) (tests/support/files.h) makes an empty folder under the system temp
//    folder, unique per process.
//  - save_pth_zip64(path, value) writes what save_pth writes, with ZIP64 records on every entry.
//  - error_of(fn) runs fn and returns the message of the xdino::Error it throws, or a message
//    saying none was thrown (which no expectation on a real message matches).
//  - expected_descriptions() reads tests/data/pickle/expected.txt: file name -> lines.
//  - literal_bytes("...") is a string literal's bytes, embedded NULs included, without the
//    terminating one.
#pragma once

#include <ATen/core/ivalue.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/check.h"
#include "tests/support/files.h"

namespace xdino::testing {

template <size_t N>
std::string literal_bytes(const char (&s)[N]) {
  return std::string(s, N - 1);
}

std::vector<std::string> describe(const c10::IValue& value);
std::vector<std::string> split_lines(const std::string& text);

bool python_torch_available();
std::string run_pth_tool(const std::vector<std::string>& args);
std::string pickle_data_dir();
std::map<std::string, std::vector<std::string>> expected_descriptions();

// An empty dict with keys and values of any type, as load_pth makes them.
c10::impl::GenericDict any_dict();

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no xdino::Error was thrown)";
}
void save_pth_zip64(const std::filesystem::path& path, const c10::IValue& value);

}  // namespace xdino::testing
