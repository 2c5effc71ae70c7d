// JSON values and text: nlohmann::ordered_json (objects keep insertion order, like Python's
// dict, so files list keys in the order the official scripts write them), written in the
// layout of Python's json module because Python tools read what we write (log.txt lines,
// knn.json, linear.json, the JSON report).
//
// Contract:
//  - python_dumps(j) is json.dumps(j): one line, ", " and ": " separators, non-ASCII escaped
//    as \uXXXX; python_dumps(j, n) is json.dumps(j, indent=n). Integers print as integers,
//    floats as Python's repr (core/python_format.h: "3.0", "1e-06"), and a NaN or infinite
//    float as NaN / Infinity / -Infinity -- what json.dumps writes and json.loads reads back
//    (not RFC 8259; results that may be NaN are stored as null by their writers instead).
//  - parse_json(text, what) reads RFC 8259 JSON (no NaN, no leading zeros, no lone
//    surrogates); a syntax error throws xdino::Error naming `what` (e.g. the file) and the
//    byte. So does a text nesting arrays/objects deeper than kMaxJsonNesting (checked before
//    parsing: nlohmann's parser and destructor recurse per level). Access errors (a missing
//    key, a wrong type) are nlohmann's exceptions (std::exception); callers that read user
//    files name the file around them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace xdino {

using Json = nlohmann::ordered_json;

// Our files nest 3 levels. nlohmann's parser and destructor and our python_dumps recurse once
// per level: nlohmann copes with ~3*10^5 (10^6 crashed it), but python_dumps of 10^4 levels
// overflowed the stack under AddressSanitizer (fuzz_json with -max_len 1 MB; its frames are
// larger there, as they are on a thread with a small stack). 1000 levels keep every reader and
// writer far from the stack's end.
constexpr int kMaxJsonNesting = 1000;

std::string python_dumps(const Json& j, int indent = -1);
Json parse_json(std::string_view text, const std::string& what);

}  // namespace xdino
