// HDF5 shards: pack → read round trip against the source files, several shards, stale and
// missing shards, corrupt packs; and both directions with h5py (skipped without it).
#include <gtest/gtest.h>

#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "augment/data/h5_dataset.h"
#include "augment/data/image_folder.h"
#include "augment/data/open_dataset.h"
#include "augment/data/pack.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using namespace xdino::augment;
using xdino::testing::fixture;
using xdino::testing::fresh_dir;

namespace {

bool same_image(const Image& a, const Image& b) {
  return a.size() == b.size() && a.type() == b.type() &&
         std::equal(a.data, a.data + a.total() * a.elemSize(), b.data);
}

// Every sample of `packed` holds the bytes, label and relative path of the folder's sample.
void expect_same_as_folder(const Dataset& packed, const ImageFolderDataset& folder) {
  ASSERT_EQ(packed.size(), folder.size());
  EXPECT_EQ(packed.class_names(), folder.class_names());
  const auto* h5 = dynamic_cast<const H5Dataset*>(&packed);
  ASSERT_NE(h5, nullptr);
  for (int64_t i = 0; i < folder.size(); ++i) {
    EXPECT_EQ(packed.path(i), folder.relative_path(i));
    EXPECT_EQ(packed.label(i), folder.label(i));
    EXPECT_EQ(h5->encoded(i), xdino::read_file(folder.path(i))) << folder.path(i);
    EXPECT_TRUE(same_image(packed.load(i), folder.load(i))) << folder.path(i);
  }
}

PackOptions pack_options(const fs::path& out, double shard_mb = 4096) {
  PackOptions o;
  o.data_path = fixture("datasets/folder").string();
  o.output_dir = out.string();
  o.shard_size_mb = shard_mb;
  return o;
}

xdino::testing::ProcessResult run_python(const std::string& code) {
  return xdino::testing::run_process({"/usr/bin/python3", "-c", code}, {}, 120);
}

}  // namespace

TEST(H5Pack, OneShardRoundTripKeepsBytesLabelsPathsAndClasses) {
  const fs::path out = fresh_dir("pack_one");
  const PackResult r = pack_image_folder(pack_options(out));
  ASSERT_EQ(r.files, std::vector<fs::path>{out / "train.h5"});
  EXPECT_EQ(r.images, 13);
  const DatasetPtr packed = open_dataset(out.string(), "train");
  EXPECT_EQ(packed->format(), "hdf5");
  const ImageFolderDataset folder(fixture("datasets/folder/train").string(),
                                  FolderLayout::kClasses);
  expect_same_as_folder(*packed, folder);
  // The file given directly is the training set too.
  EXPECT_EQ(open_dataset((out / "train.h5").string(), "train")->size(), 13);
  fs::remove_all(out);
}

TEST(H5Pack, SeveralShardsReadAsOneDatasetAndStaleOnesAreRemoved) {
  const fs::path out = fresh_dir("pack_shards");
  const PackResult r = pack_image_folder(pack_options(out, 0.001));  // ~1 KB per shard
  ASSERT_GE(r.files.size(), 3u);
  char last[64];
  std::snprintf(last, sizeof last, "train-%05zu-of-%05zu.h5", r.files.size() - 1, r.files.size());
  EXPECT_EQ(r.files.back().filename(), last);
  const DatasetPtr packed = open_dataset(out.string(), "train");
  const auto& h5 = dynamic_cast<const H5Dataset&>(*packed);
  EXPECT_EQ(h5.num_shards(), static_cast<int64_t>(r.files.size()));
  EXPECT_EQ(h5.direct_shards(), h5.num_shards());  // our packs are read with pread()
  expect_same_as_folder(*packed, ImageFolderDataset(fixture("datasets/folder/train").string(),
                                                    FolderLayout::kClasses));
  // A missing shard is named.
  fs::rename(r.files[1], out / "moved.h5");
  try {
    open_dataset(out.string(), "train");
    ADD_FAILURE() << "incomplete shards accepted";
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(r.files[1].filename().string()), std::string::npos);
  }
  // Packing again as one file removes the old shards.
  pack_image_folder(pack_options(out));
  for (const fs::path& f : r.files) EXPECT_FALSE(fs::exists(f)) << f;
  EXPECT_EQ(open_dataset(out.string(), "train")->size(), 13);
  fs::remove_all(out);
}

TEST(H5Pack, CheckImagesLeavesUnreadableFilesOut) {
  const fs::path root = fresh_dir("pack_check");
  fs::copy(fixture("datasets/folder/val"), root / "val", fs::copy_options::recursive);
  fs::copy_file(fixture("datasets/corrupt/truncated.jpg"), root / "val" / "cat" / "bad.jpg");
  PackOptions o = pack_options(root);
  o.data_path = root.string();
  o.split = "val";
  o.check_images = true;
  ::testing::internal::CaptureStderr();
  const PackResult r = pack_image_folder(o);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("bad.jpg"), std::string::npos);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.images, 3);
  const H5Dataset packed({root / "val.h5"});
  for (int64_t i = 0; i < packed.size(); ++i) EXPECT_NE(packed.path(i), "cat/bad.jpg");
  fs::remove_all(root);
}

// --check_images decodes as training does: a folder of float32 and 16-bit TIFFs (the float
// pipeline's images) packs whole, and only the unreadable one is left out. The 8-bit decoder
// it once used called every float32 TIFF unreadable.
TEST(H5Pack, CheckImagesKeepsFloatTiffs) {
  const fs::path root = fresh_dir("pack_check_float");
  for (const char* cls : {"a", "b"}) {
    fs::create_directories(root / "val" / cls);
    for (int i = 0; i < 3; ++i) {
      cv::Mat m(12, 10, i == 0 ? CV_32FC4 : CV_16UC4);
      cv::randu(m, 0, i == 0 ? 1 : 65535);
      ASSERT_TRUE(cv::imwrite((root / "val" / cls / (std::to_string(i) + ".tif")).string(), m));
    }
  }
  std::ofstream(root / "val" / "a" / "broken.tif") << "not a tiff";
  PackOptions o = pack_options(root);
  o.data_path = root.string();
  o.split = "val";
  o.check_images = true;
  const PackResult r = pack_image_folder(o);
  EXPECT_EQ(r.skipped, 1);
  EXPECT_EQ(r.images, 6);
  fs::remove_all(root);
}

TEST(H5Pack, InconsistentPackIsAnErrorNamingTheFile) {
  const fs::path out = fresh_dir("pack_bad");
  if (!xdino::testing::python_has("h5py")) XDINO_SKIP_MISSING() << "no h5py for /usr/bin/python3";
  const auto r = run_python(
      "import h5py, numpy as np\n"
      "with h5py.File('" +
      (out / "train.h5").string() +
      "', 'w') as f:\n"
      "  f['images'] = np.zeros(10, np.uint8)\n"
      "  f['offsets'] = np.array([0, 4, 20])\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  try {
    H5Dataset({out / "train.h5"});
    ADD_FAILURE() << "offsets past the data accepted";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.h5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("offsets"), std::string::npos) << e.what();
  }
  fs::remove_all(out);
}

TEST(H5Pack, H5pyReadsOurPack) {
  if (!xdino::testing::python_has("h5py")) XDINO_SKIP_MISSING() << "no h5py for /usr/bin/python3";
  const fs::path out = fresh_dir("pack_h5py");
  pack_image_folder(pack_options(out, 0.001));
  const fs::path src = fixture("datasets/folder/train");
  // h5py (no code of ours) checks bytes, labels and class ids of every shard.
  const auto r = run_python(
      "import glob, h5py, io, numpy as np\n"
      "from PIL import Image\n"
      "n = 0\n"
      "for name in sorted(glob.glob('" +
      out.string() +
      "/train-*.h5')):\n"
      "  with h5py.File(name, 'r') as f:\n"
      "    assert f.attrs['format'] == 'xdino-encoded-images', f.attrs['format']\n"
      "    names = [s.decode() for s in f['class_names'][()]]\n"
      "    o = f['offsets'][()]\n"
      "    for i, p in enumerate(f['paths'][()]):\n"
      "      p = p.decode()\n"
      "      data = f['images'][o[i]:o[i + 1]].tobytes()\n"
      "      assert data == open('" +
      src.string() +
      "/' + p, 'rb').read(), p\n"
      "      assert f['labels'][i] == names.index(p.split('/')[0]), p\n"
      "      Image.open(io.BytesIO(data)).convert('RGB')\n"
      "      n += 1\n"
      "print('OK', n)\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "OK 13\n") << r.err;
  fs::remove_all(out);
}

TEST(H5Pack, WeReadH5pyWrittenFilesContiguousOrCompressed) {
  if (!xdino::testing::python_has("h5py")) XDINO_SKIP_MISSING() << "no h5py for /usr/bin/python3";
  const fs::path out = fresh_dir("h5py_written");
  const fs::path src = fixture("datasets/folder/val");
  // Contiguous images with labels only (classes named by id); gzip-chunked images with
  // fixed-length paths and class names.
  const auto r = run_python(
      "import h5py, numpy as np\n"
      "paths = ['cat/v1.png', 'dog/V0.png', 'dog/v2.jpg']\n"
      "blobs = [open('" +
      src.string() +
      "/' + p, 'rb').read() for p in paths]\n"
      "data = np.frombuffer(b''.join(blobs), np.uint8)\n"
      "offsets = np.cumsum([0] + [len(b) for b in blobs])\n"
      "with h5py.File('" +
      (out / "a.h5").string() +
      "', 'w') as f:\n"
      "  f['images'] = data\n"
      "  f['offsets'] = offsets\n"
      "  f['labels'] = np.array([0, 1, 1], np.int32)\n"
      "with h5py.File('" +
      (out / "b.h5").string() +
      "', 'w') as f:\n"
      "  f.create_dataset('images', data=data, chunks=(1000,), compression='gzip')\n"
      "  f['offsets'] = offsets\n"
      "  f['labels'] = np.array([0, 1, 1])\n"
      "  f['paths'] = np.array([p.encode() for p in paths], dtype='S12')\n"
      "  f['class_names'] = ['cat', 'dog']\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const ImageFolderDataset folder(src.string(), FolderLayout::kClasses);
  const H5Dataset a({out / "a.h5"});
  EXPECT_EQ(a.class_names(), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(a.path(2), (out / "a.h5").string() + "#2");
  // A path-less shard's name is made when asked, with the index inside that shard.
  const H5Dataset twice({out / "a.h5", out / "a.h5"});
  EXPECT_EQ(twice.path(4), (out / "a.h5").string() + "#1");
  EXPECT_EQ(a.direct_shards(), 1);
  const H5Dataset b({out / "b.h5"});
  EXPECT_EQ(b.direct_shards(), 0);  // compressed: read through HDF5
  EXPECT_EQ(b.class_names(), folder.class_names());
  EXPECT_EQ(b.num_classes(), 2);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a.label(i), folder.label(i));
    EXPECT_EQ(b.label(i), folder.label(i));
    EXPECT_EQ(b.path(i), folder.relative_path(i));
    EXPECT_TRUE(same_image(a.load(i), folder.load(i))) << i;
    EXPECT_TRUE(same_image(b.load(i), folder.load(i))) << i;
  }
  fs::remove_all(out);
}
