// bench/bench_train as a user runs it: one JSON line per configuration with the device, the
// precision and (on the CPU) the heap the forward keeps; dino train's one-line errors for bad
// --device/--precision values, exit code 2.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/process.h"

using xdino::testing::run_process;

namespace {

const std::vector<std::string> kTiny = {XDINO_BENCH_TRAIN_BIN,
                                        "--arch",
                                        "xcit_nano_12_p16",
                                        "--out_dim",
                                        "64",
                                        "--head_hidden_dim",
                                        "32",
                                        "--batch",
                                        "2",
                                        "--global_size",
                                        "32",
                                        "--local_size",
                                        "16",
                                        "--locals",
                                        "2",
                                        "--steps",
                                        "1",
                                        "--warmup",
                                        "1"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST(BenchTrainCli, PrintsDeviceAndPrecisionInItsJson) {
  const auto r = run_process(with(kTiny, {"--device", "cpu", "--precision", "fp32"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* field :
       {"\"device\": \"cpu\"", "\"precision\": \"fp32\"",
        "\"images_per_sec\": ", "\"optimizer_sec\": ", "\"forward_retained_mib\": "})
    EXPECT_NE(r.out.find(field), std::string::npos) << field << " missing in: " << r.out;
  EXPECT_EQ(r.out.find("peak_allocated_mib"), std::string::npos) << "a CUDA-only field on CPU";

  const auto bf16 = run_process(with(kTiny, {"--device", "cpu", "--precision", "bf16"}));
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_NE(bf16.out.find("\"precision\": \"bf16\""), std::string::npos) << bf16.out;
}

TEST(BenchTrainCli, BadValuesGetDinoTrainsOneLineErrors) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--device", "gpu"}, "--device must be auto, cpu, cuda or cuda:N, got 'gpu'"},
      {{"--precision", "fp8"}, "--precision must be auto, fp32, bf16 or fp16, got 'fp8'"},
      {{"--device", "cpu", "--precision", "fp16"}, "--precision fp16 needs a CUDA device"},
      {{"--batch", "two"}, "--batch takes a whole number >= 1, got 'two'"},
      {{"--colour", "red"}, "unknown option --colour"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_process(with(kTiny, args));
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  }
}
