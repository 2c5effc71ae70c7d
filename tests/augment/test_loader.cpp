// DataLoader: batches equal a serial recomputation (sampler order, per-sample Rng) for any
// thread count, exact mid-epoch restarts, corrupt files skipped/reported once/counted,
// worker failures surfacing in the consumer, bounded prefetch.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "augment/data/image_folder.h"
#include "augment/data/loader.h"
#include "augment/sample_transforms.h"
#include "core/check.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using namespace xdino::augment;

namespace {

// n images of 12x16, content a function of the index; the listed indices throw like a
// corrupt file would.
class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(int64_t n, std::set<int64_t> corrupt = {})
      : n_(n), corrupt_(std::move(corrupt)), names_{"even", "odd", "third"} {}
  int64_t size() const override { return n_; }
  int64_t label(int64_t i) const override { return i % 3; }
  const std::vector<std::string>& class_names() const override { return names_; }
  std::string path(int64_t i) const override { return "synthetic/" + std::to_string(i); }
  Image load(int64_t i) const override {
    check_index(i);
    XDINO_CHECK(!corrupt_.count(i), "cannot decode ", path(i), ": corrupt (test)");
    Image m(12, 16, CV_8UC3);
    for (int r = 0; r < 12; ++r)
      for (int c = 0; c < 16; ++c)
        for (int ch = 0; ch < 3; ++ch)
          m.at<cv::Vec3b>(r, c)[ch] = static_cast<uint8_t>((i * 37 + r * 11 + c * 5 + ch) % 256);
    return m;
  }
  std::string format() const override { return "synthetic"; }
  std::string location() const override { return "synthetic"; }

 private:
  int64_t n_;
  std::set<int64_t> corrupt_;
  std::vector<std::string> names_;
};

torch::Tensor crop_tensor(const Image& m, int top, int left, int size, bool flip) {
  torch::Tensor t = torch::empty({3, size, size});
  for (int ch = 0; ch < 3; ++ch)
    for (int r = 0; r < size; ++r)
      for (int c = 0; c < size; ++c) {
        const int col = flip ? left + size - 1 - c : left + c;
        t[ch][r][c] = m.at<cv::Vec3b>(top + r, col)[ch] / 255.0f;
      }
  return t;
}

// Two random crops (8x8 and 4x4, the second maybe flipped): multi-crop in miniature.
std::vector<torch::Tensor> two_crops(const Image& m, Rng& rng) {
  const int t0 = static_cast<int>(rng.randint(0, m.rows - 8));
  const int l0 = static_cast<int>(rng.randint(0, m.cols - 8));
  const int t1 = static_cast<int>(rng.randint(0, m.rows - 4));
  const int l1 = static_cast<int>(rng.randint(0, m.cols - 4));
  const bool flip = rng.uniform() < 0.5;
  return {crop_tensor(m, t0, l0, 8, false), crop_tensor(m, t1, l1, 4, flip)};
}

std::vector<Batch> whole_epoch(DataLoader& loader, int64_t epoch, int64_t start = 0) {
  loader.start_epoch(epoch, start);
  std::vector<Batch> out;
  while (std::optional<Batch> b = loader.next()) out.push_back(std::move(*b));
  return out;
}

void expect_same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].position, b[k].position);
    EXPECT_TRUE(torch::equal(a[k].indices, b[k].indices)) << k;
    EXPECT_TRUE(torch::equal(a[k].labels, b[k].labels)) << k;
    ASSERT_EQ(a[k].views.size(), b[k].views.size());
    for (size_t v = 0; v < a[k].views.size(); ++v)
      EXPECT_TRUE(torch::equal(a[k].views[v], b[k].views[v])) << k << " view " << v;
  }
}

LoaderOptions options(int64_t batch, int64_t workers, int64_t seed = 7) {
  LoaderOptions o;
  o.batch_size = batch;
  o.num_workers = workers;
  o.seed = seed;
  return o;
}

}  // namespace

TEST(Loader, BatchesEqualSerialRecomputationForAnyThreadCount) {
  const auto data = std::make_shared<SyntheticDataset>(50);
  std::vector<std::vector<Batch>> runs;
  for (int64_t workers : {1, 2, 3}) {
    DataLoader loader(data, two_crops, options(4, workers), 1, 2);
    EXPECT_EQ(loader.num_workers(), workers);
    runs.push_back(whole_epoch(loader, 3));
  }
  expect_same_batches(runs[0], runs[1]);
  expect_same_batches(runs[0], runs[2]);
  // The truth, serially: the sampler's order in batches, each sample with its own Rng.
  const std::vector<int64_t> order = DistributedSampler(50, 1, 2, true, 7).indices(3);
  ASSERT_EQ(runs[0].size(), 6u);  // floor(25 / 4), drop_last
  for (size_t k = 0; k < runs[0].size(); ++k) {
    const Batch& b = runs[0][k];
    ASSERT_EQ(b.views.size(), 2u);
    EXPECT_EQ(b.views[0].sizes(), (std::vector<int64_t>{4, 3, 8, 8}));
    EXPECT_EQ(b.views[1].sizes(), (std::vector<int64_t>{4, 3, 4, 4}));
    for (int64_t s = 0; s < 4; ++s) {
      const int64_t index = order[k * 4 + static_cast<size_t>(s)];
      EXPECT_EQ(b.indices[s].item<int64_t>(), index);
      EXPECT_EQ(b.labels[s].item<int64_t>(), index % 3);
      Rng rng(sample_seed(7, 3, static_cast<uint64_t>(index)));
      const std::vector<torch::Tensor> views = two_crops(data->load(index), rng);
      EXPECT_TRUE(torch::equal(b.views[0][s], views[0])) << k << " " << s;
      EXPECT_TRUE(torch::equal(b.views[1][s], views[1])) << k << " " << s;
    }
  }
}

TEST(Loader, WritingTransformsFillTheBatchSlotsWithTheSameResult) {
  const auto data = std::make_shared<SyntheticDataset>(30);
  const SampleTransform writing(
      {{3, 8, 8}, {3, 4, 4}}, [](const Image& m, Rng& rng, const std::vector<torch::Tensor>& out) {
        const std::vector<torch::Tensor> v = two_crops(m, rng);
        for (size_t k = 0; k < v.size(); ++k) {
          EXPECT_TRUE(out[k].is_contiguous());
          out[k].copy_(v[k]);
        }
      });
  EXPECT_TRUE(writing.writes_in_place());
  DataLoader returning_loader(data, two_crops, options(4, 2));
  DataLoader writing_loader(data, writing, options(4, 3));
  const std::vector<Batch> a = whole_epoch(returning_loader, 2);
  const std::vector<Batch> b = whole_epoch(writing_loader, 2);
  expect_same_batches(a, b);
  ASSERT_EQ(b.size(), 7u);
  EXPECT_NE(b[0].views[0].data_ptr(), b[1].views[0].data_ptr());
  // The writing kind also works standalone (allocating its views), e.g. for previews.
  Rng rng(1);
  EXPECT_EQ(writing(data->load(0), rng)[1].sizes(), (std::vector<int64_t>{3, 4, 4}));
}

TEST(Loader, BatchMemoryIsReusedOnlyOnceTheConsumerLetsGo) {
  const auto data = std::make_shared<SyntheticDataset>(64);
  const auto two_crops_into = [](const Image& m, Rng& rng, const std::vector<torch::Tensor>& out) {
    const std::vector<torch::Tensor> v = two_crops(m, rng);
    for (size_t k = 0; k < v.size(); ++k) out[k].copy_(v[k]);
  };
  for (const SampleTransform& t :
       {SampleTransform(two_crops), SampleTransform({{3, 8, 8}, {3, 4, 4}}, two_crops_into)}) {
    DataLoader loader(data, t, options(4, 2));
    loader.start_epoch(0);
    // Kept: a whole batch, and a slice of another. Neither may change until the epoch ends.
    const Batch kept = *loader.next();
    const torch::Tensor kept_copy = kept.views[0].clone();
    torch::Tensor slice = loader.next()->views[1][2];
    const torch::Tensor slice_copy = slice.clone();
    int64_t batches = 2;
    while (std::optional<Batch> b = loader.next()) {
      EXPECT_NE(b->views[0].data_ptr(), kept.views[0].data_ptr());
      ++batches;
    }
    EXPECT_EQ(batches, 16);
    EXPECT_TRUE(torch::equal(kept.views[0], kept_copy));
    EXPECT_TRUE(torch::equal(slice, slice_copy));
  }
}

TEST(Loader, StartingMidEpochReproducesTheRestExactly) {
  const auto data = std::make_shared<SyntheticDataset>(40);
  DataLoader loader(data, two_crops, options(3, 2));
  const std::vector<Batch> full = whole_epoch(loader, 5);
  ASSERT_EQ(full.size(), 13u);
  const std::vector<Batch> rest = whole_epoch(loader, 5, 9);
  expect_same_batches(std::vector<Batch>(full.begin() + 9, full.end()), rest);
  // Restarting while batches are in flight abandons them cleanly.
  loader.start_epoch(6);
  ASSERT_TRUE(loader.next().has_value());
  const std::vector<Batch> again = whole_epoch(loader, 5, 12);
  ASSERT_EQ(again.size(), 1u);
  expect_same_batches({full.back()}, again);
  EXPECT_TRUE(whole_epoch(loader, 5, 13).empty());
  EXPECT_THROW(loader.start_epoch(5, 14), xdino::Error);
}

TEST(Loader, WithoutDropLastTheLastBatchIsShort) {
  const auto data = std::make_shared<SyntheticDataset>(10);
  LoaderOptions o = options(4, 2);
  o.drop_last = false;
  o.shuffle = false;
  DataLoader loader(data, two_crops, o);
  const std::vector<Batch> batches = whole_epoch(loader, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].size(), 2);
  EXPECT_EQ(batches[2].views[0].size(0), 2);
  EXPECT_EQ(batches[2].indices[1].item<int64_t>(), 9);
  EXPECT_EQ(loader.stats().samples, 10);
}

TEST(Loader, CorruptSampleIsReplacedByTheNextReportedOnceAndCounted) {
  const auto data = std::make_shared<SyntheticDataset>(12, std::set<int64_t>{3, 4});
  LoaderOptions o = options(4, 3);
  o.shuffle = false;
  DataLoader loader(data, two_crops, o);
  ::testing::internal::CaptureStderr();
  const std::vector<Batch> e0 = whole_epoch(loader, 0);
  const std::vector<Batch> e1 = whole_epoch(loader, 1);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(e0.size(), 3u);
  // Positions 3 and 4 hold index 5, the next readable one, with its label.
  EXPECT_EQ(e0[0].indices[3].item<int64_t>(), 5);
  EXPECT_EQ(e0[1].indices[0].item<int64_t>(), 5);
  EXPECT_EQ(e0[1].labels[0].item<int64_t>(), 2);
  // Each file reported once over both epochs, with its path.
  for (const char* path : {"synthetic/3", "synthetic/4"}) {
    const size_t first = err.find(path);
    EXPECT_NE(first, std::string::npos) << err;
    EXPECT_EQ(err.find(path, first + 1), std::string::npos) << err;
  }
  const LoaderStats s = loader.stats();
  EXPECT_EQ(s.corrupt_files, 2);
  EXPECT_EQ(s.replaced, 4);
  EXPECT_EQ(s.batches, 6);
}

TEST(Loader, TruncatedJpegInAnImageFolderIsSkipped) {
  const fs::path root = xdino::testing::fresh_dir("loader_truncated");
  fs::create_directories(root / "c");
  for (const char* f : {"a.png", "m.jpg", "z.png"})
    fs::copy_file(xdino::testing::fixture(std::string("datasets/flat/") + f), root / "c" / f);
  fs::copy_file(xdino::testing::fixture("datasets/corrupt/truncated.jpg"), root / "c" / "b.jpg");
  const auto data = std::make_shared<ImageFolderDataset>(root.string(), FolderLayout::kClasses);
  ASSERT_EQ(data->size(), 4);
  auto resize = [](const Image& m, Rng&) {
    return std::vector<torch::Tensor>{torch::full({3, 2, 2}, m.at<cv::Vec3b>(0, 0)[0])};
  };
  DataLoader loader(data, resize, options(2, 2));
  ::testing::internal::CaptureStderr();
  for (int64_t e = 0; e < 3; ++e) EXPECT_EQ(whole_epoch(loader, e).size(), 2u);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const size_t first = err.find("b.jpg");
  EXPECT_NE(first, std::string::npos);
  EXPECT_NE(err.find("truncated JPEG"), std::string::npos) << err;
  EXPECT_EQ(err.find("b.jpg", first + 1), std::string::npos) << err;
  EXPECT_EQ(loader.stats().corrupt_files, 1);
  EXPECT_EQ(loader.stats().replaced, 3);
  fs::remove_all(root);
}

TEST(Loader, WorkerFailuresSurfaceInTheConsumerAsError) {
  const auto data = std::make_shared<SyntheticDataset>(20);
  auto std_throw = [](const Image& m, Rng& rng) -> std::vector<torch::Tensor> {
    if (m.at<cv::Vec3b>(0, 0)[0] == (7 * 37) % 256) throw std::runtime_error("boom at seven");
    return two_crops(m, rng);
  };
  auto torch_throw = [](const Image&, Rng&) -> std::vector<torch::Tensor> {
    return {torch::ones({2}).view({3})};
  };
  auto ragged = [](const Image& m, Rng& rng) -> std::vector<torch::Tensor> {
    const int size = m.at<cv::Vec3b>(0, 0)[0] % 2 == 0 ? 2 : 3;
    return {torch::zeros({3, size, size})};
  };
  for (const auto& [transform, text] : std::vector<std::pair<SampleTransform, std::string>>{
           {std_throw, "synthetic/7): boom at seven"},
           {torch_throw, "is invalid for input"},
           {ragged, "cannot be batched"}}) {
    DataLoader loader(data, transform, options(4, 2));
    loader.start_epoch(0);
    try {
      while (loader.next()) {
      }
      ADD_FAILURE() << "no error for " << text;
    } catch (const xdino::Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
}

TEST(Loader, AllFilesUnreadableStopsTheRun) {
  std::set<int64_t> all;
  for (int64_t i = 0; i < 30; ++i) all.insert(i);
  const auto data = std::make_shared<SyntheticDataset>(30, all);
  DataLoader loader(data, two_crops, options(4, 2));
  ::testing::internal::CaptureStderr();
  loader.start_epoch(0);
  try {
    loader.next();
    ADD_FAILURE() << "a dataset of unreadable files went through";
  } catch (const xdino::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unreadable"), std::string::npos) << e.what();
  }
  ::testing::internal::GetCapturedStderr();
}

TEST(Loader, WorkersRunAtenWithOneThreadAndPrefetchIsBounded) {
  const int main_threads = at::get_num_threads();
  const auto data = std::make_shared<SyntheticDataset>(64);
  std::atomic<int> produced{0}, max_threads{0};
  auto counting = [&](const Image& m, Rng& rng) {
    max_threads = std::max(max_threads.load(), at::get_num_threads());
    ++produced;
    return two_crops(m, rng);
  };
  LoaderOptions o = options(4, 3);
  o.prefetch_batches = 2;
  DataLoader loader(data, counting, o);
  loader.start_epoch(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE(produced.load(), 8);  // prefetch_batches * batch_size while nobody consumes
  ASSERT_TRUE(loader.next().has_value());
  EXPECT_EQ(max_threads.load(), 1);
  EXPECT_EQ(at::get_num_threads(), main_threads);
  // Destroyed mid-epoch with work in flight: joins without hanging.
}

// The batch buffers are allocated on a worker thread when a batch starts: an allocation that
// fails there reaches the consumer as one Error saying what and what to lower (it used to end
// the process: "terminate called after throwing an instance of 'c10::Error'").
TEST(Loader, BatchBuffersThatCannotBeAllocatedAreOneErrorInTheConsumer) {
  const auto data = std::make_shared<SyntheticDataset>(8);
  xdino::augment::EvalTransformOptions huge;
  huge.crop_size = 200000;  // 4 x 3 x 200000^2 floats: ~1.9 TB
  DataLoader loader(data, xdino::augment::eval_transform(huge), options(4, 2));
  loader.start_epoch(0);
  try {
    while (loader.next()) {
    }
    ADD_FAILURE() << "no error for a batch larger than memory";
  } catch (const xdino::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot allocate the data loader's batch buffers (1920000000000 bytes: "
                        "[4, 3, 200000, 200000]"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("lower --batch_size_per_gpu"), std::string::npos) << what;
  }
}
