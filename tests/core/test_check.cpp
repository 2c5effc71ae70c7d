// The check macro: type of the exception, the message carries the values and the condition.
#include <gtest/gtest.h>

#include "core/check.h"

namespace {

void check_positive(int v) { XDINO_CHECK(v > 0, "value must be positive, got ", v); }
void check_arg(int v) { XDINO_CHECK_ARG(v != 3, "bad --n ", v); }

}  // namespace

TEST(Check, PassingCheckDoesNotThrow) { EXPECT_NO_THROW(check_positive(1)); }

TEST(Check, FailingCheckNamesValueAndCondition) {
  try {
    check_positive(-7);
    FAIL() << "expected a throw";
  } catch (const xdino::UsageError&) {
    FAIL() << "a runtime check must not be a usage error";
  } catch (const xdino::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("value must be positive, got -7"), std::string::npos) << what;
    EXPECT_NE(what.find("check 'v > 0' failed at tests/core/test_check.cpp:"), std::string::npos)
        << what;
  }
}

TEST(Check, ArgCheckThrowsUsageError) {
  EXPECT_THROW(check_arg(3), xdino::UsageError);
  EXPECT_NO_THROW(check_arg(4));
}

TEST(Check, MessagesStayOnOneLine) {
  try {
    XDINO_FAIL("first\nsecond");
    FAIL() << "XDINO_FAIL must throw";
  } catch (const xdino::Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find("first"), std::string::npos) << what;
    EXPECT_NE(what.find("second"), std::string::npos) << what;
  }
}

// A user's value may hold a line break (found by fuzz_flags); the usage error stays one line.
TEST(Check, UsageMessagesStayOnOneLine) {
  const std::string value = "two\nlines\r";
  try {
    XDINO_CHECK_ARG(value.empty(), "bad value '", value, "'");
    FAIL() << "XDINO_CHECK_ARG must throw";
  } catch (const xdino::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "bad value 'two lines '");
  }
  try {
    XDINO_FAIL_ARG("a\nb");
    FAIL() << "XDINO_FAIL_ARG must throw";
  } catch (const xdino::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "a b");
  }
}

// A name read from a file may hold terminal escapes: no message passes a control character on.
TEST(Check, ControlCharactersAreWrittenAsEscapes) {
  const std::string name = "a\x1b[31mred\x07\x7f";
  try {
    XDINO_CHECK_ARG(name.empty(), "tensor ", name);
    FAIL() << "XDINO_CHECK_ARG must throw";
  } catch (const xdino::UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "tensor a\\x1b[31mred\\x07\\x7f");
  }
  try {
    XDINO_FAIL("tensor ", name);
    FAIL() << "XDINO_FAIL must throw";
  } catch (const xdino::Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("tensor a\\x1b[31mred\\x07\\x7f [", 0), 0u) << e.what();
  }
}

TEST(Check, QuoteWritesAValueAsPythonWould) {
  EXPECT_EQ(xdino::quote("blocks.0.w"), "'blocks.0.w'");
  EXPECT_EQ(xdino::quote("it's\\"), "'it\\'s\\\\'");
  EXPECT_EQ(xdino::quote(std::string("a\nb\tc\x1b\0d", 8)), "'a\\nb\\tc\\x1b\\x00d'");
  EXPECT_EQ(xdino::quote("résumé"), "'résumé'");  // UTF-8 passes as it is
}
