// Why core/pth keeps its own unpickler, pickler and CRC-checking reader (~1.4k lines) although
// LibTorch ships torch::pickle_load / pickle_save and caffe2's PyTorchStreamReader: each test
// below asserts one limit of the LibTorch we build against (1.13 on Debian 12) and that our
// code does not have it. When a LibTorch upgrade makes one of these tests fail, the limit is
// gone and the matching part of core/pth can be replaced (docs/checkpoints.md).
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/compat.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "tests/support/pth_testing.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using xdino::testing::literal_bytes;

namespace {

// A torch.save-style zip holding `pickle` as its data.pkl (no tensors).
fs::path zip_with_pickle(const fs::path& dir, const std::string& name, const std::string& pickle) {
  const fs::path path = dir / name;
  caffe2::serialize::PyTorchStreamWriter zip(path.string());
  zip.writeRecord("data.pkl", pickle.data(), pickle.size());
  zip.writeEndOfFile();
  return path;
}

std::vector<char> file_bytes(const fs::path& path) {
  const std::string s = xdino::read_file(path);
  return std::vector<char>(s.begin(), s.end());
}

}  // namespace

TEST(LibTorchLimits, UnpicklerCannotReadWhatPythonCheckpointsHold) {
  const fs::path dir = xdino::testing::fresh_dir("libtorch_limits_unpickle");
  // Each case next to a control that differs only in the construct LibTorch lacks.
  // {"a": 1} with SETITEM (Python's pickler uses it for one-item dicts) vs SETITEMS.
  const std::string setitem = literal_bytes(
      "\x80\x02}X\x01\x00\x00\x00"
      "aK\x01s.");
  const std::string setitems = literal_bytes(
      "\x80\x02}(X\x01\x00\x00\x00"
      "aK\x01u.");
  // OrderedDict({"a": 1}), as every nn.Module state_dict is pickled. (LibTorch turns the
  // OrderedDict global into None, which it only expects in a tensor's backward hooks, so an
  // empty one "loads" as None and a filled one fails.)
  const std::string ordered = literal_bytes(
      "\x80\x02"
      "ccollections\nOrderedDict\n)R(X\x01\x00\x00\x00"
      "aK\x01u.");
  // argparse.Namespace(a=1) (the official checkpoints' `args`), built with NEWOBJ + BUILD.
  const std::string ns = literal_bytes(
      "\x80\x02"
      "cargparse\nNamespace\n)\x81}X\x01\x00\x00\x00"
      "aK\x01sb.");
  const fs::path control = zip_with_pickle(dir, "setitems.pth", setitems);
  EXPECT_NO_THROW(torch::pickle_load(file_bytes(control)));
  for (const auto& [name, pickle] : {std::pair<std::string, std::string>{"setitem.pth", setitem},
                                     {"ordered.pth", ordered},
                                     {"namespace.pth", ns}}) {
    const fs::path f = zip_with_pickle(dir, name, pickle);
    // 2.15 reads SETITEM (core/compat.h); the others no LibTorch we build against reads.
    if (name != "setitem.pth" || !xdino::compat::kUnpicklerReadsSetitem) {
      EXPECT_ANY_THROW(torch::pickle_load(file_bytes(f))) << name << ": LibTorch reads it now";
    }
    EXPECT_NO_THROW(xdino::load_pth(f)) << name;
  }
  // A numpy scalar, as torch.save writes it (np.float64(1.5) and friends in a dict).
  const fs::path np = xdino::testing::pickle_data_dir() + "/t_np_scalar.pth";
  EXPECT_ANY_THROW(torch::pickle_load(file_bytes(np))) << "LibTorch reads numpy scalars now";
  EXPECT_NO_THROW(xdino::load_pth(np));
  fs::remove_all(dir);
}

TEST(LibTorchLimits, PicklerWritesGlobalsThatWeightsOnlyLoadingRejects) {
  // An optimiser-state-like dict: a list of ints next to a tensor.
  auto d = xdino::make_dict();
  d.insert("params", c10::List<int64_t>({0, 1, 2}));
  d.insert("exp_avg", torch::ones({3}));
  const std::vector<char> theirs = torch::pickle_save(d);
  const std::string text(theirs.begin(), theirs.end());
  EXPECT_NE(text.find("torch.jit._pickle"), std::string::npos)
      << "LibTorch's pickler no longer emits torch.jit._pickle globals";
  if (!xdino::testing::python_torch_available())
    XDINO_SKIP_MISSING()
        << "/usr/bin/python3 cannot import torch and numpy (scripts/setup.sh --tests)";
  const fs::path dir = xdino::testing::fresh_dir("libtorch_limits_pickle");
  xdino::write_file_atomically(dir / "theirs.pth", text);
  xdino::save_pth(dir / "ours.pth", d);
  EXPECT_ANY_THROW(xdino::testing::run_pth_tool({"describe-safe", (dir / "theirs.pth").string()}))
      << "torch.load(weights_only=True) now accepts LibTorch's pickles";
  EXPECT_NO_THROW(xdino::testing::run_pth_tool({"describe-safe", (dir / "ours.pth").string()}));
  fs::remove_all(dir);
}

TEST(LibTorchLimits, StreamReaderDoesNotCheckCrcs) {
  const fs::path dir = xdino::testing::fresh_dir("libtorch_limits_crc");
  const fs::path f = dir / "t.pth";
  xdino::save_pth(f, torch::full({256}, 3.0f));
  std::string bytes = xdino::read_file(f);
  // The record's data: 256 floats 3.0f = 00 00 40 40; damage one byte in the middle of it.
  const std::string pattern("\x00\x00\x40\x40\x00\x00\x40\x40", 8);
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 2] ^= 0x01;
  xdino::write_file_atomically(f, bytes);
  caffe2::serialize::PyTorchStreamReader reader(f.string());
  EXPECT_NO_THROW(reader.getRecord("data/0")) << "PyTorchStreamReader checks CRC-32 now";
  EXPECT_THROW(xdino::load_pth(f), xdino::Error);
  fs::remove_all(dir);
}
