// How Python prints a float, for every text that Python tools read back or that users compare
// with the official scripts' output: flag defaults in --help and the saved config, log.txt
// lines (json.dumps), k-NN result lines.
//
// Contract:
//  - python_repr(v) is repr(v): the shortest digits that parse back to v, positional when the
//    decimal exponent is in [-4, 16) (always with a fractional digit: "3.0"), else
//    d.ddde[+-]XX ("1e-06", "1e+16"); non-finite values are "nan", "inf", "-inf".
//  - python_json_number(v) is what json.dumps writes for v: python_repr for finite values,
//    "NaN", "Infinity", "-Infinity" otherwise (not RFC 8259, but what Python writes and reads).
#pragma once

#include <string>

namespace xdino {

std::string python_repr(double v);
std::string python_json_number(double v);

}  // namespace xdino
