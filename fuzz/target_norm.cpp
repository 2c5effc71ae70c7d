// The --in_chans / --mean / --std fuzz entry point (see targets.h): the flags as `dino train`
// and the evaluations declare them (launch/train_flags.cpp), then the normalisation every data
// pipeline builds from them (augment/ops/tensor.h).
#include <cmath>
#include <string>
#include <vector>

#include "augment/ops/tensor.h"
#include "fuzz/targets.h"
#include "launch/flags.h"

namespace xdino::fuzz {

void fuzz_normalization(const uint8_t* data, size_t size) {
  int64_t in_chans = 3;
  std::vector<double> mean, std;
  launch::Flags flags("train");
  flags.add("in_chans", &in_chans, "").add("mean", &mean, "").add("std", &std, "");
  // NUL-separated arguments, as a command line gives them.
  std::vector<std::string> args;
  const std::string input(reinterpret_cast<const char*>(data), size);
  for (size_t at = 0; at <= input.size();) {
    const size_t end = std::min(input.find('\0', at), input.size());
    if (end > at) args.push_back(input.substr(at, end - at));
    at = end + 1;
  }
  flags.parse(args);
  const augment::Normalization n = augment::normalization_for(in_chans, mean, std);
  const augment::Normalizer normalize(n);
  // Every channel count it accepts normalises a float image of that many channels, and RGB
  // or grayscale an 8-bit image too, to finite values.
  augment::Image pixels(3, 2, CV_32FC(static_cast<int>(n.channels)), cv::Scalar::all(0.25));
  if (!std::isfinite(normalize(pixels).sum().item<double>()))
    invariant_broken("an accepted normalisation made a non-finite value of a float image");
  if (n.channels == 1 || n.channels == 3) {
    augment::Image rgb(3, 2, CV_8UC3, cv::Scalar(0, 128, 255));
    augment::Image scratch;
    const augment::Image& in = normalize.input(rgb, scratch);
    if (!std::isfinite(normalize(in).sum().item<double>()))
      invariant_broken("an accepted normalisation made a non-finite value of an 8-bit image");
  }
}

}  // namespace xdino::fuzz
