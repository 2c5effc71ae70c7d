// Datasets: torchvision's ImageFolder order (golden from make_fixtures.py), flat folders, IDX
// files (gz and raw, written here), Fashion-MNIST, layout detection, balanced subsets.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <sstream>

#include "augment/data/idx_dataset.h"
#include "augment/data/image_folder.h"
#include "augment/data/open_dataset.h"
#include "core/check.h"
#include "tests/support/files.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
using namespace xdino::augment;
using xdino::testing::fixture;
using xdino::testing::fresh_dir;

namespace {

std::string dataset_usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const xdino::UsageError& e) {
    return e.what();
  } catch (const xdino::Error& e) {
    return std::string("(not a usage error) ") + e.what();
  }
  return "(no exception)";
}

// IDX bytes: magic 0 0 8 rank, big-endian dims, payload.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& payload) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((d >> shift) & 0xFF));
  s.append(payload.begin(), payload.end());
  return s;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

void write_gz(const fs::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

uint8_t idx_pixel(int i, int r, int c) {
  return static_cast<uint8_t>((i * 31 + r * 7 + c * 3) % 256);
}

// n images of h x w with pixel idx_pixel(i, r, c), label i % 3, written by `write` under prefix.
void write_idx(const fs::path& dir, const std::string& prefix, int n, int h, int w, bool gz) {
  std::vector<uint8_t> pixels, labels;
  for (int i = 0; i < n; ++i) {
    labels.push_back(static_cast<uint8_t>(i % 3));
    for (int r = 0; r < h; ++r)
      for (int c = 0; c < w; ++c) pixels.push_back(idx_pixel(i, r, c));
  }
  const auto write = gz ? write_gz : write_bytes;
  const std::string ext = gz ? ".gz" : "";
  write(dir / (prefix + "-images-idx3-ubyte" + ext),
        idx_bytes({uint32_t(n), uint32_t(h), uint32_t(w)}, pixels));
  write(dir / (prefix + "-labels-idx1-ubyte" + ext), idx_bytes({uint32_t(n)}, labels));
}

}  // namespace

TEST(ImageFolder, SamplesAndClassesMatchTorchvision) {
  for (const std::string split : {"train", "val"}) {
    const std::string root = fixture("datasets/folder/" + split).string();
    const ImageFolderDataset ds(root + "/", FolderLayout::kClasses);
    std::ifstream golden(fixture("datasets/samples_" + split + ".txt"));
    std::string line, word;
    std::getline(golden, line);
    std::istringstream classes(line);
    classes >> word;
    std::vector<std::string> names;
    while (classes >> word) names.push_back(word);
    EXPECT_EQ(ds.class_names(), names) << split;
    int64_t i = 0;
    for (std::string rel; golden >> rel; ++i) {
      int64_t label;
      golden >> label;
      ASSERT_LT(i, ds.size()) << split;
      EXPECT_EQ(ds.relative_path(i), rel) << split << " sample " << i;
      EXPECT_EQ(ds.label(i), label) << rel;
      EXPECT_EQ(ds.path(i), root + "/" + rel);
    }
    EXPECT_EQ(ds.size(), i) << split;
    EXPECT_EQ(ds.format(), "imagefolder");
  }
}

TEST(ImageFolder, FlatFolderIsUnlabeledAndSortedByName) {
  const ImageFolderDataset ds(fixture("datasets/flat").string(), FolderLayout::kFlat);
  ASSERT_EQ(ds.size(), 3);
  EXPECT_EQ(ds.relative_path(0), "a.png");
  EXPECT_EQ(ds.relative_path(1), "m.jpg");
  EXPECT_EQ(ds.relative_path(2), "z.png");
  EXPECT_EQ(ds.num_classes(), 0);
  EXPECT_EQ(ds.label(1), -1);
  EXPECT_EQ(ds.load(2).type(), CV_8UC3);
  EXPECT_THROW(ds.load(3), xdino::Error);
  EXPECT_EQ(detect_folder_layout(fixture("datasets/flat")), FolderLayout::kFlat);
  EXPECT_EQ(detect_folder_layout(fixture("datasets/folder/train")), FolderLayout::kClasses);
}

TEST(ImageFolder, ExtensionsAreTorchvisionsCaseInsensitively) {
  for (const char* yes :
       {"a.jpg", "b.JPEG", "c.Png", "d.ppm", "e.bmp", "f.pgm", "g.tif", "h.TIFF", "i.webp"})
    EXPECT_TRUE(has_image_extension(yes)) << yes;
  for (const char* no : {"a.gif", "b.txt", "jpg", "c.jpg.bak", "d.heic"})
    EXPECT_FALSE(has_image_extension(no)) << no;
}

TEST(ImageFolder, EmptyClassFolderIsAUsageErrorNamingIt) {
  const fs::path root = fresh_dir("empty_class");
  fs::create_directories(root / "a");
  fs::copy_file(fixture("datasets/flat/a.png"), root / "a" / "x.png");
  fs::create_directories(root / "b_empty");
  const std::string msg =
      dataset_usage_error([&] { ImageFolderDataset(root.string(), FolderLayout::kClasses); });
  EXPECT_NE(msg.find("b_empty"), std::string::npos) << msg;
  fs::remove_all(root);
}

TEST(Idx, RawAndGzipFilesReadTheSame) {
  const fs::path dir = fresh_dir("idx");
  write_idx(dir / "", "train", 7, 5, 4, false);
  fs::create_directories(dir / "gz");
  write_idx(dir / "gz", "train", 7, 5, 4, true);
  for (const fs::path& d : {dir, dir / "gz"}) {
    const std::optional<IdxFiles> files = find_idx_files(d, "train");
    ASSERT_TRUE(files.has_value()) << d;
    const IdxDataset ds(*files);
    ASSERT_EQ(ds.size(), 7);
    EXPECT_EQ(ds.height(), 5);
    EXPECT_EQ(ds.width(), 4);
    EXPECT_EQ(ds.class_names(), (std::vector<std::string>{"0", "1", "2"}));
    for (int i = 0; i < 7; ++i) {
      EXPECT_EQ(ds.label(i), i % 3);
      const Image m = ds.load(i);
      ASSERT_EQ(m.type(), CV_8UC3);
      for (int r = 0; r < 5; ++r)
        for (int c = 0; c < 4; ++c)
          for (int ch = 0; ch < 3; ++ch)
            ASSERT_EQ(m.at<cv::Vec3b>(r, c)[ch], idx_pixel(i, r, c)) << i << " " << r << " " << c;
    }
    EXPECT_EQ(ds.path(3), files->images.string() + "#3");
  }
  EXPECT_FALSE(find_idx_files(dir, "t10k").has_value());
  fs::remove_all(dir);
}

TEST(Idx, ClassNamesFileAndBrokenFiles) {
  const fs::path dir = fresh_dir("idx_bad");
  write_idx(dir, "train", 4, 2, 2, false);
  std::ofstream(dir / "classes.txt") << "zero\none\ntwo\n";
  EXPECT_EQ(IdxDataset(*find_idx_files(dir, "train")).class_names(),
            (std::vector<std::string>{"zero", "one", "two"}));
  // Label count mismatch, truncated payload, bad magic: Error naming the file.
  write_bytes(dir / "train-labels-idx1-ubyte", idx_bytes({3}, {0, 1, 2}));
  EXPECT_THROW(IdxDataset(*find_idx_files(dir, "train")), xdino::Error);
  write_idx(dir, "train", 4, 2, 2, false);
  std::string images = idx_bytes({4, 2, 2}, std::vector<uint8_t>(15, 1));
  write_bytes(dir / "train-images-idx3-ubyte", images);
  try {
    IdxDataset(*find_idx_files(dir, "train"));
    ADD_FAILURE() << "truncated IDX accepted";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("train-images-idx3-ubyte"), std::string::npos);
  }
  write_bytes(dir / "train-images-idx3-ubyte", "GIF89a....");
  EXPECT_THROW(IdxDataset(*find_idx_files(dir, "train")), xdino::Error);
  fs::remove(dir / "train-labels-idx1-ubyte");
  EXPECT_NE(dataset_usage_error([&] { find_idx_files(dir, "train"); }).find("labels"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(Idx, FashionMnistFromTheDebianPackage) {
  const fs::path root = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(root / "train-images-idx3-ubyte.gz"))
    XDINO_SKIP_MISSING() << "dataset-fashion-mnist is not installed";
  const DatasetPtr train = open_dataset(root.string(), "train");
  const DatasetPtr val = open_dataset(root.string(), "val");
  EXPECT_EQ(train->format(), "idx");
  ASSERT_EQ(train->size(), 60000);
  ASSERT_EQ(val->size(), 10000);
  EXPECT_EQ(train->num_classes(), 10);
  EXPECT_EQ(val->num_classes(), 10);
  EXPECT_EQ(train->class_names()[9], "Ankle boot");
  std::vector<int64_t> counts(10, 0);
  for (int64_t l : train->labels()) counts[static_cast<size_t>(l)]++;
  EXPECT_EQ(counts, std::vector<int64_t>(10, 6000));
  // Reference values computed with numpy from the same files.
  EXPECT_EQ(train->label(0), 9);
  EXPECT_EQ(val->label(1), 2);
  const Image first = train->load(0);
  ASSERT_EQ(first.rows, 28);
  ASSERT_EQ(first.cols, 28);
  EXPECT_EQ(cv::sum(first)[0], 76247);
  EXPECT_EQ(cv::sum(first)[2], 76247);
  EXPECT_EQ(cv::sum(val->load(9999))[1], 24390);
  EXPECT_EQ(first.at<cv::Vec3b>(14, 12)[0], 237);
}

TEST(OpenDataset, DetectsEachLayoutPerSplit) {
  const fs::path root = fresh_dir("detect");
  fs::copy(fixture("datasets/folder"), root / "images", fs::copy_options::recursive);
  // ROOT/train and ROOT/val folders.
  EXPECT_EQ(open_dataset((root / "images").string(), "train")->location(),
            (root / "images" / "train").string());
  EXPECT_EQ(open_dataset((root / "images").string(), "val")->size(), 3);
  // main_dino.py: a folder without train/ is the training set itself; it has no val split.
  const DatasetPtr itself = open_dataset((root / "images" / "train").string(), "train");
  EXPECT_EQ(itself->format(), "imagefolder");
  EXPECT_EQ(itself->num_classes(), 3);
  EXPECT_NE(dataset_usage_error([&] {
              open_dataset((root / "images" / "train").string(), "val");
            }).find("no val split"),
            std::string::npos);
  // A folder of loose images: unlabeled.
  EXPECT_EQ(open_dataset(fixture("datasets/flat").string(), "train")->format(), "folder");
  // IDX: train-* for train, t10k-* for val, even next to other files.
  fs::create_directories(root / "idx");
  write_idx(root / "idx", "train", 6, 3, 3, true);
  write_idx(root / "idx", "t10k", 4, 3, 3, false);
  EXPECT_EQ(open_dataset((root / "idx").string(), "train")->size(), 6);
  EXPECT_EQ(open_dataset((root / "idx").string(), "val")->size(), 4);
  EXPECT_EQ(open_dataset((root / "idx").string(), "val")->format(), "idx");
  // A train/ folder wins over IDX files in the same root.
  fs::copy(fixture("datasets/folder/val"), root / "idx" / "train", fs::copy_options::recursive);
  EXPECT_EQ(open_dataset((root / "idx").string(), "train")->format(), "imagefolder");
  // Errors: missing root, unknown split, a file that is no pack.
  EXPECT_NE(dataset_usage_error([&] {
              open_dataset((root / "nope").string(), "train");
            }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(dataset_usage_error([&] { open_dataset(root.string(), "test"); }).find("split"),
            std::string::npos);
  EXPECT_NE(dataset_usage_error([&] {
              open_dataset(fixture("datasets/flat/a.png").string(), "train");
            }).find("HDF5"),
            std::string::npos);
  fs::remove_all(root);
}

TEST(OpenDataset, MaxSamplesKeepsAClassBalancedSubsetInDatasetOrder) {
  // Fixture train: bird 0..3, cat 4..7, dog 8..12.
  DatasetOptions o;
  o.max_samples = 5;
  const DatasetPtr five = open_dataset(fixture("datasets/folder").string(), "train", o);
  ASSERT_EQ(five->size(), 5);
  const auto* subset = dynamic_cast<const SubsetDataset*>(five.get());
  ASSERT_NE(subset, nullptr);
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < 5; ++i) kept.push_back(subset->base_index(i));
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 1, 4, 5, 8}));
  EXPECT_EQ(five->label(2), 1);
  EXPECT_EQ(five->path(4), subset->base().path(8));
  EXPECT_EQ(five->num_classes(), 3);
  const DatasetPtr full = open_dataset(fixture("datasets/folder").string(), "train");
  EXPECT_EQ(balanced_subset(*full, 12).size(), 12u);
  EXPECT_EQ(balanced_subset(*full, 12).back(), 11);  // the dog's fifth image is the one left
  EXPECT_EQ(balanced_subset(*full, 0).size(), 13u);
  const DatasetPtr flat = open_dataset(fixture("datasets/flat").string(), "train");
  EXPECT_EQ(balanced_subset(*flat, 2), (std::vector<int64_t>{0, 1}));
}
