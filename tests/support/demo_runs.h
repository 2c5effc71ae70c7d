// What the demo tests (tests/cli/test_demo*.cpp) read from the main job's configs and run
// folders.
//
// Contract: config(name) is configs/<name> in this repository. reported_top1(file) is a
// knn.json's reported top-1, checked (EXPECT) to be a percentage; throws xdino::Error where the
// file is missing or is not such JSON. kReferenceRows are the report's rows that every
// Fashion-MNIST report carries beside its DINO row: raw pixels and random weights with either
// BatchNorm statistics (docs/evaluation.md, "The random-weights reference").
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/atomic_file.h"
#include "core/json.h"
#include "tests/support/files.h"

namespace xdino::testing {

inline std::filesystem::path config(const std::string& name) {
  return repo_file("configs/" + name);
}

inline double reported_top1(const std::filesystem::path& file) {
  const auto j = xdino::parse_json(xdino::read_file(file), file.string());
  const double top1 = j.at("reported").at("top1").get<double>();
  EXPECT_GE(top1, 0.0) << file;
  EXPECT_LE(top1, 100.0) << file;
  return top1;
}

inline constexpr const char* kReferenceRows[] = {
    "| None | Pixels", "| Random init, initial BatchNorm statistics | XCiT-N4/4",
    "| Random init, BatchNorm statistics of the data | XCiT-N4/4"};

}  // namespace xdino::testing
