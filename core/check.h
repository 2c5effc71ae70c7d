// Errors and the one check macro of the project.
//
// Contract:
//  - XDINO_CHECK(cond, parts...) throws xdino::Error when `cond` is false. The message is the
//    concatenation of `parts` (streamed with operator<<), followed by the failed condition and
//    the source location, all on one line. Use it for runtime failures: I/O, corrupt files,
//    shape mismatches, non-finite losses, lost peers. `main` maps Error to exit code 1.
//  - XDINO_CHECK_ARG(cond, parts...) throws xdino::UsageError: the user asked for something
//    invalid (unknown key, bad value, missing required path). `main` maps it to exit code 2.
//    Its message is the parts alone: it speaks to the user, not to a developer.
//  - XDINO_FAIL / XDINO_FAIL_ARG throw unconditionally.
// Messages name the problem and, where one exists, the fix. They never contain a newline, nor
// any other control character: one_line() writes those as \xNN, so that a name read from a file
// (a tensor name, a path) cannot move the cursor or recolour a terminal.
//  - quote(s): 's' in single quotes with control characters, DEL, backslash and the quote
//    written as escapes (\n, \t, \xNN, \\, \'): how messages name a value read from a file.
//  - first_line(message): up to its first line break: how another library's error (c10d's
//    with its backtrace, an HTTP answer) becomes the cause within one of ours.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace xdino {

// A runtime failure (exit code 1).
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A usage or configuration error (exit code 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

std::string quote(std::string_view s);
std::string first_line(std::string_view message);

namespace detail {

template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

// The message with each line break replaced by a space (a user's value may hold one), and any
// other control character as \xNN.
std::string one_line(std::string message);

std::string located(const std::string& message, const char* condition, const char* file, int line);

}  // namespace detail
}  // namespace xdino

// `, ##__VA_ARGS__` (GCC/Clang) lets a check carry no message; every check should carry one.
#define XDINO_THROW_(Type, cond_text, ...)                                                       \
  throw Type(::xdino::detail::located(::xdino::detail::concat(__VA_ARGS__), cond_text, __FILE__, \
                                      __LINE__))

#define XDINO_CHECK(cond, ...)                                       \
  do {                                                               \
    if (!(cond)) XDINO_THROW_(::xdino::Error, #cond, ##__VA_ARGS__); \
  } while (0)

// Usage errors are the user's to fix: the message alone, no source location.
#define XDINO_USAGE_ERROR_(...) \
  ::xdino::UsageError(::xdino::detail::one_line(::xdino::detail::concat(__VA_ARGS__)))

#define XDINO_CHECK_ARG(cond, ...)                      \
  do {                                                  \
    if (!(cond)) throw XDINO_USAGE_ERROR_(__VA_ARGS__); \
  } while (0)

#define XDINO_FAIL(...) XDINO_THROW_(::xdino::Error, nullptr, ##__VA_ARGS__)
#define XDINO_FAIL_ARG(...) throw XDINO_USAGE_ERROR_(__VA_ARGS__)
