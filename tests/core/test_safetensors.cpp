// Safetensors files (core/safetensors.h) and how the weights readers route a file to them
// (models/weights.h):
//  - hostile files, one defect each, are refused with the one line that names it: a header
//    that does not start with '{' (white space included), a length of 0, of 2^63, past the end
//    of the file, duplicate keys inside an entry or at the top, spans that overlap or leave a
//    gap, a sparse file claiming more than this machine's memory; names are quoted, with
//    their control characters escaped;
//  - a file that is not a torch.save file is never handed to the .pth reader's zip error: a
//    .safetensors file gets the safetensors line, a nameless one both;
//  - a header of 300 000 tensors reads back whole (an ordered JSON object made this
//    quadratic: minutes; bench/results/platforms_and_ci.md, "Safetensors headers");
//  - the writer lays tensors out as safetensors.torch.save_file does: the same bytes for
//    the same tensors, checked against the package itself (scripts/setup.sh --tests' pyenv).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/safetensors.h"
#include "models/weights.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;

namespace {

// An 8-byte little-endian length, then `header`, then `data`.
std::string file_bytes(uint64_t length, const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(length >> (8 * i));
  return out + header + data;
}
std::string file_of(const std::string& header, const std::string& data = "") {
  return file_bytes(header.size(), header, data);
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

// What a call threw: "usage: <message>", "error: <message>" or "" when it returned.
std::string outcome(const std::function<void()>& call) {
  try {
    call();
  } catch (const xdino::UsageError& e) {
    return std::string("usage: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
  return "";
}

struct Hostile {
  std::string name;
  std::string bytes;
  std::string line;  // a part of the message, "usage: " or "error: " first
};

const std::string kEntry = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";

std::vector<Hostile> hostile_files() {
  return {
      {"header_not_an_object", file_of(R"(["a"])"),
       "usage: safetensors file '%': its header does not start with '{'"},
      {"space_before_brace", file_of(" {" + kEntry + "}", "abcd"),
       "usage: safetensors file '%': its header does not start with '{' (it starts with ' {"},
      {"length_zero", file_bytes(0, "", "abcd"),
       "usage: safetensors file '%': its header declares 0 bytes, too few"},
      {"length_2_63", file_bytes(uint64_t{1} << 63, "{}"),
       "usage: safetensors file '%': its header declares 9223372036854775808 bytes, more than "
       "the 100000000"},
      {"length_past_the_end", file_bytes(4096, "{}"),
       "usage: safetensors file '%': its header declares 4096 bytes but the file has 2 after "
       "the length"},
      {"duplicate_key_in_an_entry",
       file_of(R"({"a":{"dtype":"F32","dtype":"F64","shape":[1],"data_offsets":[0,4]}})", "abcd"),
       "usage: safetensors file '%': the header names 'dtype' twice in one entry"},
      {"duplicate_tensor", file_of("{" + kEntry + "," + kEntry + "}", "abcd"),
       "usage: safetensors file '%': the header names 'a' twice"},
      {"overlapping",
       file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
               "abcdef"),
       "usage: safetensors file '%': tensor 'b' starts at byte 2 of the data, where 4 was "
       "expected (tensors overlap or leave a gap)"},
      {"gap", file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "abcdefgh"),
       "usage: safetensors file '%': tensor 'a' starts at byte 4 of the data, where 0 was "
       "expected"},
      {"escape_in_a_name",
       file_of("{\"a\\u001b[31mred\":{\"dtype\":\"F9\",\"shape\":[1],\"data_offsets\":[0,4]}}",
               "abcd"),
       "usage: safetensors file '%': tensor 'a\\x1b[31mred' has dtype \"F9\""},
  };
}

}  // namespace

TEST(Safetensors, HostileFilesAreRefusedEachWithItsLine) {
  const fs::path dir = xdino::testing::fresh_dir("safetensors_hostile");
  for (const Hostile& h : hostile_files()) {
    SCOPED_TRACE(h.name);
    const fs::path file = dir / (h.name + ".safetensors");
    write_bytes(file, h.bytes);
    std::string want = h.line;
    want.replace(want.find('%'), 1, file.string());
    const std::string got = outcome([&] { xdino::read_safetensors(file); });
    EXPECT_EQ(got.rfind(want, 0), 0u) << got;
    EXPECT_EQ(got.find('\x1b'), std::string::npos) << "a raw escape character in: " << got;
    // --pretrained_weights takes the same path, with the same line.
    EXPECT_EQ(outcome([&] { xdino::models::read_pretrained(file); }), got);
  }
}

TEST(Safetensors, ASparseFileLargerThanMemoryIsRefusedNamingIt) {
  const fs::path file = xdino::testing::fresh_dir("safetensors_sparse") / "huge.safetensors";
  // 10^12 float32 values, 4 TB, that the file claims to hold: a sparse file costs no disk.
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4000000000000]}})";
  write_bytes(file, file_of(header));
  fs::resize_file(file, 8 + header.size() + 4000000000000ull);
  const std::string got = outcome([&] { xdino::read_safetensors(file); });
  EXPECT_EQ(got.rfind("error: safetensors file '" + file.string() +
                          "' holds 4.0 TB of "
                          "tensors, more than this machine's memory (",
                      0),
            0u)
      << got;
  EXPECT_EQ(got.find("batch_size"), std::string::npos) << got;
}

TEST(Safetensors, WeightsThatAreNotATorchSaveFileNeverGetItsZipError) {
  const fs::path dir = xdino::testing::fresh_dir("safetensors_routing");
  const std::string junk = file_bytes(0, "", "not a model");
  // Named .safetensors: the safetensors line alone.
  write_bytes(dir / "w.safetensors", junk);
  const std::string named = outcome([&] { xdino::models::read_pretrained(dir / "w.safetensors"); });
  EXPECT_NE(named.find("its header declares 0 bytes"), std::string::npos) << named;
  EXPECT_EQ(named.find("zip"), std::string::npos) << named;
  // Named like neither: both readers' views, in one line.
  write_bytes(dir / "weights", junk);
  const std::string bare = outcome([&] { xdino::models::read_pretrained(dir / "weights"); });
  EXPECT_EQ(bare.rfind("usage: '" + (dir / "weights").string() +
                           "' is neither a torch.save file (.pth: it does not start with a zip "
                           "header) nor a safetensors file (",
                       0),
            0u)
      << bare;
  // Named .pth: the .pth reader's line, as before.
  write_bytes(dir / "w.pth", junk);
  const std::string pth = outcome([&] { xdino::models::read_pretrained(dir / "w.pth"); });
  EXPECT_NE(pth.find("is not a torch.save file"), std::string::npos) << pth;
}

TEST(Safetensors, AHeaderOf300000TensorsReadsBackWhole) {
  const fs::path file = xdino::testing::fresh_dir("safetensors_many") / "many.safetensors";
  constexpr int64_t kTensors = 300000;
  xdino::TensorDict tensors;
  for (int64_t i = 0; i < kTensors; ++i)
    tensors.insert("blocks." + std::to_string(i) + ".w", torch::full({1}, static_cast<float>(i)));
  xdino::write_safetensors(file, tensors);
  const xdino::Safetensors back = xdino::read_safetensors(file);
  ASSERT_EQ(back.tensors.size(), static_cast<size_t>(kTensors));
  for (const int64_t i : {int64_t{0}, int64_t{12345}, kTensors - 1})
    EXPECT_EQ(back.tensors["blocks." + std::to_string(i) + ".w"].item<float>(),
              static_cast<float>(i));
}

TEST(Safetensors, WriterLaysOutTensorsAsTheReferenceDoes) {
  const std::string python = xdino::testing::pyenv_python();
  if (const std::string why = xdino::testing::python_lacks({"safetensors", "torch"}, python);
      !why.empty())
    XDINO_SKIP_MISSING() << why;
  const fs::path dir = xdino::testing::fresh_dir("safetensors_layout");
  // Every dtype, names that sort otherwise than the dtypes do, and metadata.
  xdino::TensorDict t;
  t.insert("b", torch::arange(3, torch::kFloat));
  t.insert("a", torch::arange(2, torch::kHalf));
  t.insert("c", torch::arange(3, torch::kDouble));
  t.insert("d", torch::arange(5, torch::kByte));
  t.insert("e", torch::arange(1, torch::kLong));
  t.insert("f", torch::arange(4, torch::kBFloat16));
  t.insert("g", torch::ones({2}, torch::kBool));
  t.insert("h", torch::arange(3, torch::kInt));
  t.insert("i", torch::arange(2, torch::kChar));
  t.insert("j", torch::arange(2, torch::kShort));
  t.insert("aa", torch::arange(6, torch::kFloat).view({2, 3}));
  // One metadata key: the reference writes a map of several in an order of its own (a Rust
  // HashMap's), which differs from run to run.
  xdino::write_safetensors(dir / "ours.safetensors", t, {{"format", "pt"}});
  const std::string script = R"(
import sys, torch
from safetensors.torch import load_file, save_file
save_file(load_file(sys.argv[1]), sys.argv[2], metadata={"format": "pt"})
)";
  const auto r =
      xdino::testing::run_process({python, "-c", script, (dir / "ours.safetensors").string(),
                                   (dir / "theirs.safetensors").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(xdino::read_file(dir / "ours.safetensors"),
            xdino::read_file(dir / "theirs.safetensors"));
}
