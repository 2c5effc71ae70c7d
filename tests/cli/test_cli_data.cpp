// The data subcommands of the dino binary: `dino pack` and `dino preview` (and their errors).
#include <gtest/gtest.h>

#include "augment/data/decode.h"
#include "augment/data/h5_dataset.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

TEST(CliPack, PacksAFolderThatTrainingThenFinds) {
  const fs::path out = xdino::testing::fresh_dir("cli_pack");
  const auto r = run_process({dino_binary(), "pack", "--data_path",
                              xdino::testing::fixture("datasets/folder").string(), "--split", "val",
                              "--output_dir", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("packed 3 images"), std::string::npos) << r.out;
  EXPECT_EQ(xdino::augment::H5Dataset({out / "val.h5"}).size(), 3);
  fs::remove_all(out);
}

TEST(CliPack, BadInvocationsExitTwoWithOneLine) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"pack", "--output_dir", "/tmp"},
        std::vector<std::string>{"pack", "--data_path", "/nonexistent/data"},
        std::vector<std::string>{"pack", "--data_path", "/tmp", "--shard_size_mb", "0"}}) {
    std::vector<std::string> argv{dino_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 2) << args[1] << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const auto help = run_process({dino_binary(), "pack", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--shard_size_mb"), std::string::npos) << help.out;
}

TEST(CliPreview, WritesAPngOfTheMultiCropViews) {
  const fs::path out = xdino::testing::fresh_dir("cli_preview");
  const auto r = run_process(
      {dino_binary(), "preview", "--data_path", xdino::testing::fixture("datasets/folder").string(),
       "--output", (out / "crops.png").string(), "--num_images", "2", "--local_crops_number", "2",
       "--global_crops_size", "64", "--local_crops_size", "32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const xdino::augment::Image png = xdino::augment::read_image(out / "crops.png");
  EXPECT_EQ(png.cols, 4 + 2 * (64 + 4) + 2 * (32 + 4));
  EXPECT_EQ(png.rows, 4 + 2 * (64 + 4));
  const auto bad = run_process(
      {dino_binary(), "preview", "--data_path", out.string(), "--transform", "sharpen"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--transform"), std::string::npos) << bad.err;
  fs::remove_all(out);
}
