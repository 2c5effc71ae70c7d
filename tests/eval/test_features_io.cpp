// Feature files (HDF5): round trips, h5py reading our files, errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "eval/features_io.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using xdino::testing::fresh_dir;
using namespace xdino::eval;

namespace {

FeatureSet sample_set() {
  FeatureSet s;
  s.features = torch::arange(15, torch::kFloat32).view({5, 3}) / 7.0;
  s.labels = torch::tensor(std::vector<int64_t>{0, 2, 1, 1, 4000000000LL});
  s.paths = {"train/a/1.jpg", "train/b/ümlaut ß.png", "", "x", "train/c/3.JPEG"};
  s.attributes.arch = "xcit_small_12_p16";
  s.attributes.checkpoint = "/ckpt/checkpoint.pth";
  s.attributes.checkpoint_key = "teacher";
  s.attributes.split = "train";
  s.attributes.image_size = 384;
  s.attributes.patch_size = 16;
  s.attributes.normalized = false;
  return s;
}

}  // namespace

TEST(FeaturesIo, RoundTrip) {
  const fs::path dir = fresh_dir("features_rt");
  const FeatureSet s = sample_set();
  write_features(dir / "f.h5", s);
  const FeatureSet r = read_features(dir / "f.h5");
  EXPECT_TRUE(torch::equal(r.features, s.features));
  EXPECT_TRUE(torch::equal(r.labels, s.labels));
  EXPECT_EQ(r.paths, s.paths);
  EXPECT_EQ(r.attributes.arch, "xcit_small_12_p16");
  EXPECT_EQ(r.attributes.checkpoint, "/ckpt/checkpoint.pth");
  EXPECT_EQ(r.attributes.checkpoint_key, "teacher");
  EXPECT_EQ(r.attributes.split, "train");
  EXPECT_EQ(r.attributes.feature, "backbone");
  EXPECT_EQ(r.attributes.image_size, 384);
  EXPECT_FALSE(r.attributes.normalized);
  // Only the final file remains (the temporary was renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(FeaturesIo, H5pyReadsOurFileAndWeReadH5pys) {
  if (!fs::exists("/usr/bin/python3")) XDINO_SKIP_MISSING() << "no /usr/bin/python3";
  const auto probe = xdino::testing::run_process({"/usr/bin/python3", "-c", "import h5py"});
  if (probe.exit_code != 0) XDINO_SKIP_MISSING() << "h5py not installed";
  const fs::path dir = fresh_dir("features_h5py");
  write_features(dir / "ours.h5", sample_set());
  const std::string script = R"(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    x = f['features'][()]; y = f['labels'][()]; p = [s.decode('utf-8') for s in f['paths'][()]]
    assert x.dtype == np.float32 and x.shape == (5, 3), (x.dtype, x.shape)
    assert np.array_equal(x, (np.arange(15, dtype=np.float32).reshape(5, 3) / np.float32(7)))
    assert y.dtype == np.int64 and list(y) == [0, 2, 1, 1, 4000000000]
    assert p[1] == 'train/b/\u00fcmlaut \u00df.png' and p[2] == '', p
    assert f.attrs['arch'] == 'xcit_small_12_p16' and int(f.attrs['image_size']) == 384
    assert int(f.attrs['normalized']) == 0
with h5py.File(sys.argv[2], 'w') as f:
    f['features'] = np.ones((2, 4), dtype=np.float64) * 0.5
    f['labels'] = np.array([3, 7], dtype=np.int32)
    f.attrs['arch'] = 'vit_small'
print('ok')
)";
  const auto r = xdino::testing::run_process(
      {"/usr/bin/python3", "-c", script, (dir / "ours.h5").string(), (dir / "theirs.h5").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  // A file written by h5py with other dtypes and no /paths reads with conversions.
  const FeatureSet t = read_features(dir / "theirs.h5");
  EXPECT_TRUE(torch::equal(t.features, torch::full({2, 4}, 0.5f)));
  EXPECT_TRUE(torch::equal(t.labels, torch::tensor(std::vector<int64_t>{3, 7})));
  EXPECT_EQ(t.paths, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(t.attributes.arch, "vit_small");
  EXPECT_TRUE(t.attributes.normalized);  // default when the attribute is missing
  fs::remove_all(dir);
}

TEST(FeaturesIo, ErrorsNameTheFile) {
  const fs::path dir = fresh_dir("features_err");
  try {
    read_features(dir / "missing.h5");
    FAIL() << "no exception";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.h5"), std::string::npos);
  }
  std::ofstream(dir / "junk.h5") << "not hdf5";
  EXPECT_THROW(read_features(dir / "junk.h5"), xdino::Error);
  FeatureSet bad = sample_set();
  bad.labels = bad.labels.narrow(0, 0, 4);
  EXPECT_THROW(write_features(dir / "bad.h5", bad), xdino::Error);
  EXPECT_FALSE(fs::exists(dir / "bad.h5"));
  fs::remove_all(dir);
}

// A full disk, imitated by a file-size limit (EFBIG, as `ulimit -f` gives; SIGXFSZ ignored as
// `dino` ignores it): one line naming the file and the reason, the previous file intact, no
// temporary file left.
TEST(FeaturesIo, AFailedWriteNamesTheFileAndKeepsThePreviousOne) {
  const fs::path dir = fresh_dir("features_efbig");
  const fs::path path = dir / "trainfeat.h5";
  write_features(path, sample_set());
  const std::string before = xdino::read_file(path);

  FeatureSet big = sample_set();
  big.features = torch::rand({20000, 128});  // 10 MB
  big.labels = torch::zeros({20000}, torch::kInt64);
  big.paths.clear();
  const std::string message =
      xdino::testing::error_under_file_size_limit(1 << 20, [&] { write_features(path, big); });
  EXPECT_NE(message.find("cannot write '" + path.string() +
                         "': File too large (the previous file is left as it was)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find(".tmp-"), std::string::npos) << message;
  EXPECT_EQ(xdino::read_file(path), before);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"trainfeat.h5"});
  fs::remove_all(dir);
}
