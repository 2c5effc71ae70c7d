// The dino binary: exit codes and one-line messages for good and bad invocations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/process.h"

using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

size_t count_lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

}  // namespace

TEST(Cli, HelpListsEverySubcommand) {
  const auto r = run_process({dino_binary(), "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* sub : {"train", "knn", "linear", "features", "visualize", "report", "info"})
    EXPECT_NE(r.out.find(std::string("  ") + sub), std::string::npos) << sub;
}

TEST(Cli, NoArgumentsIsAUsageError) {
  const auto r = run_process({dino_binary()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("usage: dino"), std::string::npos);
}

TEST(Cli, SubcommandHelpListsFlagsWithDefaults) {
  const auto r = run_process({dino_binary(), "train", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--lr FLOAT"), std::string::npos);
  EXPECT_NE(r.out.find("[default: 0.0005]"), std::string::npos);
  EXPECT_NE(r.out.find("--out_dim INT"), std::string::npos);
  EXPECT_NE(r.out.find("[default: 65536]"), std::string::npos);
}

TEST(Cli, UnknownFlagExitsTwoNamingIt) {
  const auto r = run_process({dino_binary(), "train", "--bogus", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bogus"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
}

TEST(Cli, BadValueExitsTwoNamingFlagAndType) {
  const auto r = run_process({dino_binary(), "train", "--epochs", "ten"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--epochs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("INT"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
}

TEST(Cli, UnknownSubcommandExitsTwo) {
  const auto r = run_process({dino_binary(), "trian"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("trian"), std::string::npos);
}

TEST(Cli, MissingConfigExitsTwo) {
  const auto r = run_process({dino_binary(), "train", "--config", "/no/such/file.ini"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/no/such/file.ini"), std::string::npos) << r.err;
}
