// load_pth / save_pth: official files read as torch.load reads them (golden descriptions made
// by tests/data/pickle/pth_tool.py), bit-exact round trips, and one-line errors naming the file.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/compat.h"
#include "core/pth.h"
#include "core/pth/pickle.h"
#include "core/pth/zip.h"
#include "tests/support/pth_testing.h"

namespace fs = std::filesystem;
using c10::IValue;
using xdino::testing::describe;

using xdino::testing::error_of;
using xdino::testing::literal_bytes;

namespace {

fs::path fixture(const std::string& name) { return xdino::testing::pickle_data_dir() + "/" + name; }

void expect_one_line_naming(const std::string& message, const fs::path& file,
                            const std::string& what) {
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find(what), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// Where an entry's data starts: after its local header, name and extra field.
size_t data_offset(const std::string& file, const xdino::pth::ZipEntry& e) {
  const auto at = [&](size_t i) { return size_t(static_cast<uint8_t>(file[e.header_offset + i])); };
  return e.header_offset + 30 + (at(26) | at(27) << 8) + (at(28) | at(29) << 8);
}

// Bytes of a tensor in logical order (NaN payloads and -0 included).
std::string tensor_bytes(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// A value with every kind save_pth writes: nested containers, dtypes, views, odd numbers.
IValue rich_value() {
  const at::Tensor base = torch::arange(24, torch::kFloat).reshape({4, 6}) / 7;
  auto sd = xdino::testing::any_dict();
  sd.insert("weight", torch::randn({3, 2}));
  sd.insert("bias", torch::tensor({0.5f, -0.0f, std::nanf("")}));
  auto ints = xdino::testing::any_dict();
  ints.insert(int64_t(0), std::string("a"));
  ints.insert(int64_t(300), -(int64_t(1) << 40));
  ints.insert(int64_t(-7), int64_t(70000));
  ints.insert(int64_t(1) << 62, INT64_MIN);
  auto ns = xdino::testing::any_dict();
  ns.insert("__class__", std::string("argparse.Namespace"));
  ns.insert("arch", std::string("xcit_small_12_p16"));
  ns.insert("lr", 0.0005);
  c10::impl::GenericList list(c10::AnyType::get());
  list.push_back(torch::tensor({1.0, 2.0}, torch::kDouble));
  list.push_back(IValue());
  list.push_back(true);
  list.push_back(std::numeric_limits<double>::infinity());
  list.push_back(-0.0);
  list.push_back(std::string("t\xc3\xaate \xe2\x9c\x93"));
  list.push_back(std::string("\x00\xff raw", 6));  // not UTF-8: written as bytes
  auto v = xdino::testing::any_dict();
  v.insert("sd", sd);
  v.insert("ints", ints);
  v.insert("args", ns);
  v.insert("list", list);
  v.insert("tuple", c10::ivalue::Tuple::create({int64_t(255), int64_t(256), int64_t(65536),
                                                int64_t(-2147483648LL), int64_t(2147483648LL)}));
  v.insert("small", c10::ivalue::Tuple::create({1.5}));
  v.insert("bf16", torch::tensor({1.5f, -2.25f, 3e-3f}).to(torch::kBFloat16));
  v.insert("f16", torch::tensor({0.1f, 65504.f, -6e-5f}).to(torch::kHalf));
  v.insert("i64", torch::tensor({INT64_MIN, int64_t(7), INT64_MAX}));
  v.insert("i32", torch::tensor({-5, 6}, torch::kInt));
  v.insert("i16", torch::tensor({-5, 6}, torch::kShort));
  v.insert("i8", torch::tensor({-128, 127}, torch::kChar));
  v.insert("u8", torch::tensor({0, 255}, torch::kByte));
  v.insert("b", torch::tensor({true, false, true}));
  v.insert("scalar", torch::tensor(4.5));
  v.insert("base", base);
  v.insert("view", base.slice(0, 1).slice(1, 1, 6, 2));  // offset 7, strides (6, 2)
  v.insert("transposed", base.t());
  v.insert("empty", torch::zeros({0, 3}));
  v.insert("grad", torch::ones({2}).requires_grad_());
  return v;
}

}  // namespace

TEST(PthLoad, EveryFixtureReadsAsTorchLoadReadsIt) {
  const auto expected = xdino::testing::expected_descriptions();
  ASSERT_GE(expected.size(), 12u);  // 8 official-construct fixtures + protocols 1, 2, 4, 5
  for (const auto& [name, lines] : expected) {
    SCOPED_TRACE(name);
    EXPECT_EQ(describe(xdino::load_pth(fixture(name))), lines);
  }
}

TEST(PthLoad, ViewsOfOneStorageShareItAfterLoading) {
  const IValue v = xdino::load_pth(fixture("p2_mixed.pth"));
  const auto d = v.toGenericDict();
  at::Tensor base = d.at("base").toTensor();
  const at::Tensor view = d.at("view").toTensor();
  const at::Tensor transposed = d.at("tview").toTensor();
  base.mul_(2);
  EXPECT_FLOAT_EQ(view[0][0].item<float>(), 2 * 5.f / 7);  // base[1][1] == 5/7
  EXPECT_FLOAT_EQ(transposed[3][2].item<float>(), 2 * 11.f / 7);
}

// A checkpoint written on a GPU (dino train --device cuda, main_dino.py on a cluster) names
// its storages' location "cuda:0"; torch before 1.13 also named the class torch.cuda.*Storage.
// Both load here as CPU tensors, bit for bit: resuming a CUDA run with --device cpu, or
// evaluating its weights on a CPU-only build (issue 71), starts from these.
TEST(PthLoad, StoragesWrittenOnAGpuLoadOnTheCpu) {
  torch::manual_seed(5);
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("weight", torch::randn({3, 4}));
  d.insert("running_var", torch::rand({5}, torch::kDouble));
  d.insert("epoch", int64_t{7});
  const xdino::pth::Pickled p = xdino::pth::pickle(d, "a GPU checkpoint");
  const auto replace_all = [](std::string s, const std::string& from, const std::string& to) {
    size_t n = 0;
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()), ++n)
      s.replace(at, from.size(), to);
    EXPECT_GT(n, 0u) << from;
    return s;
  };
  // BINUNICODE: 'X', a 4-byte little-endian length, the text.
  const std::string on_gpu =
      replace_all(p.bytes, std::string("X\x03\0\0\0cpu", 8), std::string("X\x06\0\0\0cuda:0", 11));
  const std::string old_classes =
      replace_all(replace_all(on_gpu, "ctorch\nFloatStorage\n", "ctorch.cuda\nFloatStorage\n"),
                  "ctorch\nDoubleStorage\n", "ctorch.cuda\nDoubleStorage\n");
  const auto load = [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
    for (const auto& s : p.storages)
      if (s.key == key) {
        EXPECT_EQ(s.data.scalar_type(), dtype);
        EXPECT_EQ(s.data.numel(), numel);
        return s.data.clone();
      }
    ADD_FAILURE() << "no storage " << key;
    return at::Tensor();
  };
  for (const std::string* bytes : {&on_gpu, &old_classes}) {
    const auto back = xdino::pth::unpickle(*bytes, load, "a GPU checkpoint").toGenericDict();
    for (const char* key : {"weight", "running_var"}) {
      const at::Tensor t = back.at(key).toTensor();
      EXPECT_TRUE(t.is_cpu()) << key;
      EXPECT_TRUE(torch::equal(t, d.at(key).toTensor())) << key;
    }
    EXPECT_EQ(back.at("epoch").toInt(), 7);
  }
}

TEST(PthRoundTrip, NestedValuesComeBackBitIdentical) {
  const fs::path dir = xdino::testing::fresh_dir("pth_roundtrip");
  const IValue original = rich_value();
  xdino::save_pth(dir / "v.pth", original);
  const IValue loaded = xdino::load_pth(dir / "v.pth");
  EXPECT_EQ(describe(loaded), describe(original));
  const auto a = original.toGenericDict(), b = loaded.toGenericDict();
  for (const auto& item : a) {
    if (!item.value().isTensor()) continue;
    SCOPED_TRACE(item.key().toStringRef());
    EXPECT_EQ(tensor_bytes(b.at(item.key()).toTensor()), tensor_bytes(item.value().toTensor()));
  }
  const at::Tensor nan_bias = b.at("sd").toGenericDict().at("bias").toTensor();
  EXPECT_EQ(tensor_bytes(nan_bias), tensor_bytes(a.at("sd").toGenericDict().at("bias").toTensor()));
  // The three views still share one storage.
  EXPECT_EQ(b.at("view").toTensor().storage().unsafeGetStorageImpl(),
            b.at("base").toTensor().storage().unsafeGetStorageImpl());
  EXPECT_EQ(b.at("transposed").toTensor().storage().unsafeGetStorageImpl(),
            b.at("base").toTensor().storage().unsafeGetStorageImpl());
  fs::remove_all(dir);
}

TEST(PthRoundTrip, OfficialContentSurvivesResaving) {
  const fs::path dir = xdino::testing::fresh_dir("pth_resave");
  for (const char* name : {"p2_mixed.pth", "with_namespace.pth", "sd_ordered_meta.pth"}) {
    SCOPED_TRACE(name);
    const IValue official = xdino::load_pth(fixture(name));
    xdino::save_pth(dir / name, official);
    EXPECT_EQ(describe(xdino::load_pth(dir / name)), describe(official));
  }
  fs::remove_all(dir);
}

TEST(PthRoundTrip, TheSameTensorTwiceIsOneTensorAgain) {
  const fs::path dir = xdino::testing::fresh_dir("pth_identity");
  const at::Tensor t = torch::ones({2});
  xdino::save_pth(dir / "t.pth", c10::ivalue::Tuple::create({t, t}));
  const auto items = xdino::load_pth(dir / "t.pth").toTupleRef().elements();
  EXPECT_TRUE(items[0].toTensor().is_same(items[1].toTensor()));
  fs::remove_all(dir);
}

TEST(PthRoundTrip, Zip64RecordsAreRead) {
  const fs::path dir = xdino::testing::fresh_dir("pth_zip64");
  const IValue original = rich_value();
  xdino::testing::save_pth_zip64(dir / "z.pth", original);
  // The ZIP64 end-of-central-directory record is there, so the ZIP64 path was read.
  EXPECT_NE(xdino::read_file(dir / "z.pth").find("PK\x06\x06"), std::string::npos);
  EXPECT_EQ(describe(xdino::load_pth(dir / "z.pth")), describe(original));
  fs::remove_all(dir);
}

TEST(PthSave, WritesPyTorchsLayoutWith64ByteAlignedRecords) {
  const fs::path dir = xdino::testing::fresh_dir("pth_layout");
  auto v = xdino::testing::any_dict();
  v.insert("a", torch::ones({3}));
  v.insert("b", torch::zeros({5}, torch::kLong));
  xdino::save_pth(dir / "c.pth", v);
  const xdino::pth::ZipReader zip(dir / "c.pth");
  std::vector<std::string> names;
  for (const auto& e : zip.entries()) names.push_back(e.name);
  std::vector<std::string> expected{"archive/data.pkl", "archive/byteorder", "archive/data/0",
                                    "archive/data/1", "archive/version"};
  // LibTorch's writer adds a content hash record since 2.1, as torch.save does (core/compat.h).
  if (xdino::compat::kWriterAddsSerializationId)
    expected.push_back("archive/.data/serialization_id");
  EXPECT_EQ(names, expected);
  const std::string bytes = xdino::read_file(dir / "c.pth");
  for (const auto& e : zip.entries()) EXPECT_EQ(data_offset(bytes, e) % 64, 0u) << e.name;
  EXPECT_EQ(zip.read_string(*zip.find("archive/version")), "3\n");
  EXPECT_EQ(zip.read_string(*zip.find("archive/byteorder")), "little");
  fs::remove_all(dir);
}

TEST(PthSave, UnsupportedValueFailsAndLeavesTheOldFile) {
  const fs::path dir = xdino::testing::fresh_dir("pth_unsupported");
  const fs::path file = dir / "c.pth";
  xdino::write_file_atomically(file, "old");
  auto v = xdino::testing::any_dict();
  v.insert("sparse", torch::eye(2).to_sparse());
  expect_one_line_naming(error_of([&] { xdino::save_pth(file, v); }), file, "dense");
  auto w = xdino::testing::any_dict();
  w.insert("two dtypes", c10::ivalue::Tuple::create({torch::zeros({2}, torch::kInt),
                                                     torch::zeros({2}).view(torch::kInt)}));
  EXPECT_NO_THROW(xdino::save_pth(dir / "same_dtype.pth", w));
  auto x = xdino::testing::any_dict();
  const at::Tensor f = torch::zeros({2});
  x.insert("mixed", c10::ivalue::Tuple::create({f, f.view(torch::kInt)}));
  expect_one_line_naming(error_of([&] { xdino::save_pth(file, x); }), file, "one storage");
  EXPECT_EQ(xdino::read_file(file), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
  fs::remove_all(dir);
}

TEST(PthErrors, MissingEmptyGarbageLegacyAndTorchScriptFilesAreNamed) {
  const fs::path dir = xdino::testing::fresh_dir("pth_errors");
  expect_one_line_naming(error_of([&] { xdino::load_pth(dir / "nope.pth"); }), dir / "nope.pth",
                         "No such file");
  xdino::write_file_atomically(dir / "empty.pth", "");
  expect_one_line_naming(error_of([&] { xdino::load_pth(dir / "empty.pth"); }), dir / "empty.pth",
                         "empty");
  xdino::write_file_atomically(dir / "garbage.pth", std::string(1000, '\x17'));
  expect_one_line_naming(error_of([&] { xdino::load_pth(dir / "garbage.pth"); }),
                         dir / "garbage.pth", "not a torch.save file");
  expect_one_line_naming(error_of([&] { xdino::load_pth(fixture("legacy.pth")); }),
                         fixture("legacy.pth"), "legacy (PyTorch < 1.6)");
  {
    caffe2::serialize::PyTorchStreamWriter zip((dir / "script.pt").string());
    zip.writeRecord("data.pkl", "\x80\x02N.", 4);
    zip.writeRecord("constants.pkl", "\x80\x02N.", 4);
    zip.writeEndOfFile();
  }
  expect_one_line_naming(error_of([&] { xdino::load_pth(dir / "script.pt"); }), dir / "script.pt",
                         "TorchScript");
  fs::remove_all(dir);
}

TEST(PthErrors, TruncatedAndDamagedFilesAreNamed) {
  const fs::path dir = xdino::testing::fresh_dir("pth_damaged");
  const std::string good = xdino::read_file(fixture("p2_mixed.pth"));
  for (const size_t keep : {size_t(30), good.size() / 2, good.size() - 10}) {
    const fs::path cut = dir / ("cut" + std::to_string(keep) + ".pth");
    xdino::write_file_atomically(cut, good.substr(0, keep));
    expect_one_line_naming(error_of([&] { xdino::load_pth(cut); }), cut, "truncated");
  }
  // One flipped bit inside a tensor's bytes.
  const xdino::pth::ZipReader reader(fixture("p2_mixed.pth"));
  const xdino::pth::ZipEntry* storage = reader.find("p2_mixed/data/0");
  ASSERT_NE(storage, nullptr);
  std::string flipped = good;
  flipped[data_offset(good, *storage) + 5] ^= 0x10;
  xdino::write_file_atomically(dir / "flipped.pth", flipped);
  expect_one_line_naming(error_of([&] { xdino::load_pth(dir / "flipped.pth"); }),
                         dir / "flipped.pth", "CRC-32");
  // A CRC of 0 in the zip directory means "not computed" (PyTorch >= 2.5 can write that).
  std::string unchecked = good;
  const size_t directory_name = unchecked.rfind(storage->name);
  std::memset(&unchecked[directory_name - 46 + 16], 0, 4);
  xdino::write_file_atomically(dir / "no_crc.pth", unchecked);
  EXPECT_EQ(describe(xdino::load_pth(dir / "no_crc.pth")),
            describe(xdino::load_pth(fixture("p2_mixed.pth"))));
  fs::remove_all(dir);
}

TEST(PthErrors, BadPicklesNameTheOpcodeOffset) {
  const fs::path dir = xdino::testing::fresh_dir("pth_pickle");
  const auto write = [&](const std::string& name, const std::string& pkl) {
    caffe2::serialize::PyTorchStreamWriter zip((dir / name).string());
    zip.writeRecord("data.pkl", pkl.data(), pkl.size());
    zip.writeEndOfFile();
    return dir / name;
  };
  fs::path f = write("opcode.pth", literal_bytes("\x80\x02}\xff."));
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f, "byte 3: unknown opcode 255");
  f = write("short.pth", literal_bytes("\x80\x02}(X\x01\x00\x00\x00"));
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f, "ends inside an argument");
  f = write("nostop.pth", literal_bytes("\x80\x02}"));
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f, "before its STOP");
  f = write("storage.pth",
            literal_bytes("\x80\x02(X\x07\x00\x00\x00storagecfoo\nBar\nX\x01\x00\x00\x00"
                          "0X\x03\x00\x00\x00"
                          "cpuK\x01tQ."));
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f, "storage class foo.Bar");
  fs::remove_all(dir);
}

// Nesting is bounded while the pickle is read (core/pth/unpickle.cpp, Nesting): 10^6 nested
// lists, 2 MB of data.pkl, crashed the process in LibTorch's recursive IValue destructor
// before; 50 levels (more than any real checkpoint) still load, and what they load is the
// structure the pickle describes.
TEST(PthErrors, NestingPastTheBoundIsRefusedAndFiftyLevelsLoad) {
  const fs::path dir = xdino::testing::fresh_dir("pth_nesting");
  const auto write = [&](const std::string& name, const std::string& pkl) {
    caffe2::serialize::PyTorchStreamWriter zip((dir / name).string());
    zip.writeRecord("data.pkl", pkl.data(), pkl.size());
    zip.writeEndOfFile();
    return dir / name;
  };
  const auto nested_lists = [](size_t depth) {  // PROTO 2, MARK x depth, LIST x depth, STOP
    return literal_bytes("\x80\x02") + std::string(depth, '(') + std::string(depth, 'l') + ".";
  };
  fs::path f = write("deep.pth", nested_lists(1000000));
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f,
                         "containers nest deeper than 256 levels");
  // The same depth through dicts, tuples and APPENDS onto an empty list.
  std::string via_dicts = literal_bytes("\x80\x02");
  for (int i = 0; i < 300; ++i) via_dicts += literal_bytes("}X\x01\x00\x00\x00k");
  via_dicts += "}";  // the innermost value
  for (int i = 0; i < 300; ++i) via_dicts += "s";
  f = write("dicts.pth", via_dicts + ".");
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f, "nest deeper than 256");
  f = write("tuples.pth",
            literal_bytes("\x80\x02") + std::string(300, '(') + std::string(300, 't') + ".");
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f, "nest deeper than 256");

  // A list appended to itself (MARK EMPTY_LIST BINPUT 0 BINGET 0 APPEND): recursive, refused.
  f = write("self.pth", literal_bytes("\x80\x02]q\x00h\x00"
                                      "a."));
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f,
                         "a container is changed after it was nested in another");
  // A list grown after it was nested, reached again through the memo: the aliasing that could
  // hide depth (A = [], B = [], B.append(A), then A.append([])).
  f = write("alias.pth", literal_bytes("\x80\x02]q\x00]q\x01h\x00"
                                       "a0h\x00]ah\x01."));
  expect_one_line_naming(error_of([&] { xdino::load_pth(f); }), f,
                         "a container is changed after it was nested in another");

  f = write("fifty.pth", nested_lists(50));
  IValue v = xdino::load_pth(f);
  int depth = 0;
  while (v.isList()) {
    ++depth;
    const auto list = v.toList();
    ASSERT_LE(list.size(), 1u);
    if (list.size() == 0) break;
    v = list.get(0);
  }
  EXPECT_EQ(depth, 50);
  fs::remove_all(dir);
}

// The CRC-32 of records comes from zlib (crc32_z, and crc32_combine64 to join the CRCs of
// slices read on different threads): check the calls we make against the definition.
TEST(Crc32, ZlibMatchesTheZipCheckValueAndChains) {
  const auto crc = [](uLong c, const void* p, size_t n) {
    return crc32_z(c, static_cast<const Bytef*>(p), n);
  };
  EXPECT_EQ(crc(0, "123456789", 9), 0xCBF43926u);
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 + 7);
  const uLong whole = crc(0, data.data(), data.size());
  EXPECT_EQ(crc(crc(0, data.data(), 333), data.data() + 333, 667), whole);
  // Bitwise reference: the definition, one bit at a time.
  uint32_t c = ~0u;
  for (const char ch : data) {
    c ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  EXPECT_EQ(whole, ~c);
  // Joining the CRCs of pieces, empty ones included.
  for (const size_t cut : {size_t(0), size_t(1), size_t(16), size_t(999), size_t(1000)}) {
    const uLong a = crc(0, data.data(), cut);
    const uLong b = crc(0, data.data() + cut, data.size() - cut);
    EXPECT_EQ(crc32_combine64(a, b, static_cast<z_off64_t>(data.size() - cut)), whole) << cut;
  }
}

TEST(PthLoad, RecordsReadInParallelSlicesAreExactAndChecked) {
  const fs::path dir = xdino::testing::fresh_dir("pth_parallel");
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  auto v = xdino::testing::any_dict();
  const at::Tensor big = torch::randn({3 << 20});  // 12 MB: three 4 MB slices
  v.insert("big", big);
  v.insert("small", torch::arange(5));
  xdino::save_pth(dir / "big.pth", v);
  const auto loaded = xdino::load_pth(dir / "big.pth").toGenericDict();
  EXPECT_EQ(tensor_bytes(loaded.at("big").toTensor()), tensor_bytes(big));
  EXPECT_TRUE(torch::equal(loaded.at("small").toTensor(), torch::arange(5)));
  std::string bytes = xdino::read_file(dir / "big.pth");
  const xdino::pth::ZipReader zip(dir / "big.pth");
  bytes[data_offset(bytes, *zip.find("archive/data/0")) + (6 << 20)] ^= 1;  // middle slice
  xdino::write_file_atomically(dir / "bad.pth", bytes);
  expect_one_line_naming(error_of([&] { xdino::load_pth(dir / "bad.pth"); }), dir / "bad.pth",
                         "'archive/data/0' fails its CRC-32 check");
  at::set_num_threads(threads);
  fs::remove_all(dir);
}
