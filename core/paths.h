// What is wrong with a path the user named, in words for a one-line error.
//
// Contract: file_problem(p) returns "" when `p` is a regular file (or a link to one) and
// otherwise the reason it cannot be read as one: "not found", "is a directory, not a file", or
// "is not a regular file". It never throws (an unreadable parent reads as "not found").
// Callers put it in their own message, which names the flag the path came from:
//   XDINO_CHECK_ARG(problem.empty(), "weights file '", p, "' ", problem, " (--pretrained_weights)")
#pragma once

#include <filesystem>
#include <string>

namespace xdino {

std::string file_problem(const std::filesystem::path& path);

}  // namespace xdino
