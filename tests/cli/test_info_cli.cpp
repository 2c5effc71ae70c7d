// `dino info`: the parameter counts and FLOPs (fvcore convention) of the registered
// backbones, printed by the binary.
#include <gtest/gtest.h>

#include "tests/support/process.h"

using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

std::string info(const std::vector<std::string>& args, int expected_exit = 0) {
  std::vector<std::string> argv = {dino_binary(), "info"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, expected_exit) << r.err;
  return expected_exit == 0 ? r.out : r.err;
}

void expect_line(const std::string& out, const std::string& line) {
  EXPECT_NE(out.find(line + "\n"), std::string::npos) << "missing '" << line << "' in:\n" << out;
}

}  // namespace

TEST(InfoCli, XcitSmall12P16At224) {
  const std::string out = info({"--arch", "xcit_small_12_p16", "--image_size", "224"});
  expect_line(out, "arch: xcit_small_12_p16");
  expect_line(out, "parameters: 25868304 (25.868M)");
  EXPECT_NE(out.find("GFLOPs: 4.87 ("), std::string::npos) << out;
  expect_line(out, "embed dim: 384");
  expect_line(out, "heads: 8");
  expect_line(out, "token grid: 14 x 14 (196 patch tokens)");
}

TEST(InfoCli, XcitMedium24P8At384) {
  const std::string out = info({"--arch", "xcit_medium_24_p8", "--image_size", "384"});
  EXPECT_NE(out.find("GFLOPs: 187.88 ("), std::string::npos) << out;  // paper: 188.0
  expect_line(out, "parameters: 83810624 (83.811M)");
  expect_line(out, "token grid: 48 x 48 (2304 patch tokens)");
}

TEST(InfoCli, RectangularSizeAndViT) {
  const std::string out =
      info({"--arch", "vit_small", "--patch_size", "8", "--image_size", "480", "640"});
  expect_line(out, "image size: 480 x 640");
  expect_line(out, "token grid: 60 x 80 (4800 patch tokens)");
  expect_line(out, "parameters: 21670272 (21.670M)");
  const std::string xcit = info({"--arch", "xcit_nano_12_p16", "--image_size", "100", "160"});
  expect_line(xcit, "token grid: 7 x 10 (70 patch tokens)");
  const std::string vit = info({"--arch", "vit_base", "--image_size", "224"});
  EXPECT_NE(vit.find("GFLOPs: 17.58 ("), std::string::npos) << vit;
}

TEST(InfoCli, BadArgumentsAreUsageErrors) {
  EXPECT_NE(info({"--arch", "xcit_tiny_48_p16"}, 2).find("unknown architecture"),
            std::string::npos);
  EXPECT_NE(
      info({"--arch", "xcit_nano_12_p16", "--image_size", "1", "2", "3"}, 2).find("--image_size"),
      std::string::npos);
}
