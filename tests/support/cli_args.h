// Command-line pieces for the tests that run `dino train` through the binary: the flag groups
// that recur from test to test, as argv words, joined into one command line with concat. Tests
// name them through an alias: namespace cli = xdino::testing::cli;
//
// Contract: each function returns argv words, in the order written here, without the program's
// path; numbers are written with std::to_string.
//   cli::train(data, out, arch): train --data_path DATA --output_dir OUT --arch ARCH
//   cli::dino_head(out_dim, hidden_dim, bottleneck_dim): the DINO head's sizes,
//       --out_dim O --head_hidden_dim H --head_bottleneck_dim B
//   cli::multi_crop(global_size, local_size, local_number): the multi-crop views,
//       --global_crops_size G --local_crops_size L --local_crops_number N
//   cli::epochs(count, warmup): --epochs COUNT --warmup_epochs WARMUP
//   cli::concat({a, b, ...}): the words of a, then of b, ... (one command line from pieces).
// Nothing throws but std::bad_alloc. Header-only, the standard library alone: usable from any
// test, the LibTorch-only build's included.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

namespace xdino::testing::cli {

inline std::vector<std::string> concat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

inline std::vector<std::string> train(const std::filesystem::path& data,
                                      const std::filesystem::path& out, const std::string& arch) {
  return {"train", "--data_path", data.string(), "--output_dir", out.string(), "--arch", arch};
}

inline std::vector<std::string> dino_head(int out_dim, int hidden_dim, int bottleneck_dim) {
  return {"--out_dim",
          std::to_string(out_dim),
          "--head_hidden_dim",
          std::to_string(hidden_dim),
          "--head_bottleneck_dim",
          std::to_string(bottleneck_dim)};
}

inline std::vector<std::string> multi_crop(int global_size, int local_size, int local_number) {
  return {"--global_crops_size",      std::to_string(global_size), "--local_crops_size",
          std::to_string(local_size), "--local_crops_number",      std::to_string(local_number)};
}

inline std::vector<std::string> epochs(int count, int warmup) {
  return {"--epochs", std::to_string(count), "--warmup_epochs", std::to_string(warmup)};
}

}  // namespace xdino::testing::cli
