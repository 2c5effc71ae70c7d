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
//  - numpy_around(v, decimals) is np.around: v * 10^decimals rounded half to even (rint), then
//    divided back (78.125 -> 78.12, where C's round gives 78.13).
//  - numpy_str(values) is str() of a 1-D float64 numpy array under numpy's default print
//    options ("[100.    85.71  71.43]"; "[1.e+02 5.e-02]" when the values span more than
//    1000x or pass 1e8): unique digits, at most 8 after the point, one width for all. Arrays
//    short enough for one line (numpy wraps at 75 characters; we never do).
#pragma once

#include <string>
#include <vector>

namespace xdino {

std::string python_repr(double v);
std::string python_json_number(double v);
double numpy_around(double v, int decimals);
std::string numpy_str(const std::vector<double>& values);

}  // namespace xdino
