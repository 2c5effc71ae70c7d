// The evaluation subcommands of the dino binary: exit codes and one-line messages.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::fresh_temp_dir;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// Exit code `code` with exactly one line on stderr that mentions `needle`.
void expect_one_line_failure(const std::vector<std::string>& args, int code,
                             const std::string& needle) {
  std::vector<std::string> argv{dino_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

}  // namespace

TEST(EvalCli, ReportMissingRunFolderExitsTwo) {
  expect_one_line_failure({"report", "--runs", "/no/such/run", "--output", "/tmp/r.md"}, 2,
                          "/no/such/run");
}

TEST(EvalCli, ReportUnknownFormatExitsTwo) {
  expect_one_line_failure({"report", "--runs", "/tmp", "--output", "table.pdf"}, 2, "table.pdf");
}

TEST(EvalCli, ReportCorruptResultExitsOne) {
  const fs::path dir = fresh_temp_dir("report_corrupt");
  std::ofstream(dir / "knn.json") << "{\"reported\": [";
  expect_one_line_failure({"report", "--runs", dir.string(), "--output", (dir / "t.md").string()},
                          1, "knn.json");
  fs::remove_all(dir);
}
