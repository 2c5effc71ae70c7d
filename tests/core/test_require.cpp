// XDINO_SKIP_MISSING: a skip without XDINO_REQUIRE_ALL, a failure naming what is missing with it.
// The truth is gtest's own record of the test part, read back through a spy reporter.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/support/require.h"

namespace {

void missing_thing() { XDINO_SKIP_MISSING() << "no frobnicator (scripts/setup.sh --tests)"; }

class RequireEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* v = std::getenv("XDINO_REQUIRE_ALL");
    had_ = v != nullptr;
    if (had_) old_ = v;
  }
  void TearDown() override {
    if (had_)
      setenv("XDINO_REQUIRE_ALL", old_.c_str(), 1);
    else
      unsetenv("XDINO_REQUIRE_ALL");
  }
  bool had_ = false;
  std::string old_;
};

}  // namespace

TEST_F(RequireEnv, SetMakesTheSkipAFailureNamingWhatIsMissing) {
  setenv("XDINO_REQUIRE_ALL", "1", 1);
  EXPECT_FATAL_FAILURE(missing_thing(), "no frobnicator");
}

TEST_F(RequireEnv, ZeroOrEmptyOrUnsetMeansNotRequired) {
  unsetenv("XDINO_REQUIRE_ALL");
  EXPECT_FALSE(xdino::testing::require_all_dependencies());
  setenv("XDINO_REQUIRE_ALL", "0", 1);
  EXPECT_FALSE(xdino::testing::require_all_dependencies());
  setenv("XDINO_REQUIRE_ALL", "", 1);
  EXPECT_FALSE(xdino::testing::require_all_dependencies());
  setenv("XDINO_REQUIRE_ALL", "1", 1);
  EXPECT_TRUE(xdino::testing::require_all_dependencies());
  EXPECT_EQ(xdino::testing::missing_dependency_result(), ::testing::TestPartResult::kFatalFailure);
  unsetenv("XDINO_REQUIRE_ALL");
  EXPECT_EQ(xdino::testing::missing_dependency_result(), ::testing::TestPartResult::kSkip);
}
