// Replays the inputs under tests/data/fuzz/<target>/ through the fuzz targets' own entry points
// (fuzz/targets.h), in the ordinary build: each file is either accepted or rejected with one
// std::exception, never a crash (issue 17); files named valid* must be accepted. Files the
// fuzzers found go there as they are (named after their artifact); the hand-made ones come
// from make_fuzz_regressions.py. tests/data/fuzz/pth/ serves both .pth targets (pth, pth_zip).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "fuzz/targets.h"

namespace fs = std::filesystem;

namespace {

const fs::path kDir = XDINO_FUZZ_REGRESSIONS_DIR;

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The error message, or "" when the input was accepted.
std::string outcome(void (*target)(const uint8_t*, size_t), const fs::path& p) {
  const std::vector<uint8_t> bytes = read_all(p);
  try {
    target(bytes.data(), bytes.size());
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
  return "";
}

// Reaching the end of each file at all is the point; a file named valid* must also be
// accepted, and with `others_refused` every other one refused (a corpus of hostile files,
// each with a defect the reader must see).
void replay(const std::string& name, void (*target)(const uint8_t*, size_t),
            bool others_refused = false) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kDir / name)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << kDir / name;
  for (const fs::path& p : files) {
    const std::string got = outcome(target, p);
    if (p.filename().string().rfind("valid", 0) == 0) {
      EXPECT_EQ(got, "") << p;
    } else if (others_refused) {
      EXPECT_NE(got, "") << p << " was accepted";
    }
  }
}

}  // namespace

TEST(FuzzRegressions, Json) { replay("json", xdino::fuzz::fuzz_json); }
TEST(FuzzRegressions, PthZip) { replay("pth", xdino::fuzz::fuzz_pth_zip); }
TEST(FuzzRegressions, Pth) { replay("pth", xdino::fuzz::fuzz_pth); }
TEST(FuzzRegressions, Tensorboard) { replay("tensorboard", xdino::fuzz::fuzz_tensorboard); }
TEST(FuzzRegressions, Safetensors) {
  replay("safetensors", xdino::fuzz::fuzz_safetensors, /*others_refused=*/true);
}

#if XDINO_FUZZ_FLAGS
TEST(FuzzRegressions, Flags) { replay("flags", xdino::fuzz::fuzz_flags); }
TEST(FuzzRegressions, Normalization) { replay("normalization", xdino::fuzz::fuzz_normalization); }
TEST(FuzzRegressions, WarmStart) { replay("warm_start", xdino::fuzz::fuzz_warm_start); }
#endif

#if XDINO_FUZZ_DATA
TEST(FuzzRegressions, Idx) { replay("idx", xdino::fuzz::fuzz_idx); }
TEST(FuzzRegressions, Decode) { replay("decode", xdino::fuzz::fuzz_decode); }
TEST(FuzzRegressions, H5) { replay("h5", xdino::fuzz::fuzz_h5); }
TEST(FuzzRegressions, Features) { replay("features", xdino::fuzz::fuzz_features); }
TEST(FuzzRegressions, DecodeFloat) { replay("decode_float", xdino::fuzz::fuzz_decode_float); }
TEST(FuzzRegressions, PatchTokens) { replay("patch_tokens", xdino::fuzz::fuzz_patch_tokens); }

// The seeds that must be refused are, each with the line that names why.
TEST(FuzzRegressions, FloatImagesAndPatchTokenWritesRefuseWhatTheyCannotHold) {
  const struct {
    void (*target)(const uint8_t*, size_t);
    const char* file;
    const char* says;
  } cases[] = {
      {xdino::fuzz::fuzz_decode_float, "decode_float/nan_float32.tiff",
       "1 of its 192 samples are not finite"},
      {xdino::fuzz::fuzz_decode_float, "decode_float/rgb16_as_4.tiff",
       "has 3 channels and --in_chans is 4"},
      {xdino::fuzz::fuzz_patch_tokens, "patch_tokens/index_out_of_range",
       "name a dataset index outside [0, 3)"},
      {xdino::fuzz::fuzz_patch_tokens, "patch_tokens/kept_unwritten",
       "keep dataset index 1 at row 1: kept indices must ascend, each an image whose patch "
       "tokens were written"},
      {xdino::fuzz::fuzz_patch_tokens, "patch_tokens/kept_descending",
       "keep dataset index 0 at row 1"},
      {xdino::fuzz::fuzz_patch_tokens, "patch_tokens/shape_changes",
       "every image must give the same tokens"},
  };
  for (const auto& c : cases)
    EXPECT_NE(outcome(c.target, kDir / c.file).find(c.says), std::string::npos)
        << c.file << ": " << outcome(c.target, kDir / c.file);
}

// IDX dimensions whose product passes 2^63 are a corrupt header, not an overflow.
TEST(FuzzRegressions, IdxDimensionOverflowIsChecked) {
  const std::string got = outcome(xdino::fuzz::fuzz_idx, kDir / "idx" / "dims_overflow.idx");
  EXPECT_NE(got.find("more than any file holds"), std::string::npos) << got;
}

// A 79-byte JPEG declaring 12079 x 65338 pixels (width x height): refused from its header, where
// OpenCV allocated 2.4 GB; and a PNG header declaring the same, made here.
TEST(FuzzRegressions, DecompressionBombsAreRefusedFromTheHeader) {
  std::string got =
      outcome(xdino::fuzz::fuzz_decode, kDir / "decode" / "oom-a140d0ac_jpeg_sof_65338x12079.jpg");
  EXPECT_NE(got.find("declares 12079 x 65338 pixels, more than the 178956970"), std::string::npos)
      << got;
  static const char kHeader[] =
      "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\xff\x3a\0\0\x2f\x2f\x08\x02\0\0\0";
  std::string png(kHeader, sizeof kHeader - 1);
  png += std::string(4, '\0');  // the chunk's CRC: never reached
  const auto* p = reinterpret_cast<const uint8_t*>(png.data());
  try {
    xdino::fuzz::fuzz_decode(p, png.size());
    got = "";
  } catch (const std::exception& e) {
    got = e.what();
  }
  EXPECT_NE(got.find("declares 65338 x 12079 pixels"), std::string::npos) << got;
}
#endif

// Declared sizes that disagree with the file are rejected by a check naming the problem,
// before anything of the declared size is allocated.
TEST(FuzzRegressions, PthDeclaredSizesAreChecked) {
  const std::map<std::string, std::string> expected = {
      {"tensor_size_exceeds_storage.pth", "reaches past its storage of 4 elements"},
      {"tensor_stride_overflow.pth", "reaches past its storage"},
      {"tensor_offset_overflow.pth", "reaches past its storage"},
      {"storage_numel_exceeds_record.pth", "holds 16 bytes"},
      {"storage_record_missing.pth", "storage record"},
      {"zip_entry_size_exceeds_file.pth", "reaches past the end of the file"},
      {"zip_entry_count_huge_crash-61b541b3.pth", "cannot hold the"},
      {"zip64_entry_count_huge_crash-693ef775.pth", "cannot hold the"},
  };
  for (const auto& [file, message] : expected) {
    const std::string got = outcome(xdino::fuzz::fuzz_pth, kDir / "pth" / file);
    EXPECT_NE(got.find(message), std::string::npos) << file << ": " << got;
    // The fuzz entry point reads a temporary copy; the message names that file.
    EXPECT_NE(got.find("xdino_fuzz_"), std::string::npos) << "the message names the file: " << got;
  }
}
