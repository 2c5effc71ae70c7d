// The transforms through the loader (writing straight into batch slots) equal direct calls of
// MultiCropAugmentation / EvalTransform with the same Rng; `write_preview` draws them.
#include <gtest/gtest.h>

#include "augment/data/decode.h"
#include "augment/data/loader.h"
#include "augment/data/open_dataset.h"
#include "augment/preview.h"
#include "augment/sample_transforms.h"
#include "core/check.h"
#include "tests/support/files.h"

using namespace xdino::augment;

namespace {

MultiCropOptions small_crops() {
  MultiCropOptions o;
  o.global_crops_size = 32;
  o.local_crops_size = 16;
  o.local_crops_number = 3;
  return o;
}

DatasetPtr fixture_train() {
  return open_dataset(xdino::testing::fixture("datasets/folder").string(), "train");
}

}  // namespace

TEST(Pipelines, MultiCropThroughTheLoaderEqualsDirectCalls) {
  const DatasetPtr data = fixture_train();
  LoaderOptions lo;
  lo.batch_size = 4;
  lo.num_workers = 2;
  lo.seed = 3;
  DataLoader loader(data, multi_crop_transform(small_crops()), lo);
  const MultiCropAugmentation direct(small_crops());
  loader.start_epoch(1);
  int64_t checked = 0;
  while (std::optional<Batch> b = loader.next()) {
    ASSERT_EQ(b->views.size(), 5u);
    EXPECT_EQ(b->views[0].sizes(), (std::vector<int64_t>{4, 3, 32, 32}));
    EXPECT_EQ(b->views[4].sizes(), (std::vector<int64_t>{4, 3, 16, 16}));
    for (int64_t s = 0; s < b->size(); ++s, ++checked) {
      const int64_t index = b->indices[s].item<int64_t>();
      Rng rng(sample_seed(3, 1, static_cast<uint64_t>(index)));
      const std::vector<torch::Tensor> views = direct(data->load(index), rng);
      for (size_t v = 0; v < views.size(); ++v)
        EXPECT_TRUE(torch::equal(b->views[v][s], views[v])) << index << " view " << v;
    }
  }
  EXPECT_EQ(checked, 12);  // 13 images, batches of 4, drop_last
}

TEST(Pipelines, EvalTransformThroughTheLoaderInDatasetOrder) {
  const DatasetPtr data = fixture_train();
  EvalTransformOptions eo;
  eo.crop_size = 16;
  LoaderOptions lo;
  lo.batch_size = 5;
  lo.num_workers = 3;
  lo.shuffle = false;
  lo.drop_last = false;
  DataLoader loader(data, eval_transform(eo), lo);
  const EvalTransform direct(eo);
  loader.start_epoch(0);
  int64_t next = 0;
  while (std::optional<Batch> b = loader.next()) {
    ASSERT_EQ(b->views.size(), 1u);
    for (int64_t s = 0; s < b->size(); ++s, ++next) {
      EXPECT_EQ(b->indices[s].item<int64_t>(), next);
      EXPECT_EQ(b->labels[s].item<int64_t>(), data->label(next));
      EXPECT_TRUE(torch::equal(b->views[0][s], direct(data->load(next)))) << next;
    }
  }
  EXPECT_EQ(next, 13);
}

TEST(Pipelines, PreviewDrawsOneRowOfEveryViewPerImage) {
  const auto dir = xdino::testing::fresh_dir("preview_pipeline");
  PreviewOptions o;
  o.data_path = xdino::testing::fixture("datasets/folder").string();
  o.output = (dir / "p.png").string();
  o.num_images = 3;
  o.multi_crop = small_crops();
  EXPECT_EQ(write_preview(o), (std::vector<int64_t>{0, 4, 8}));  // one image per class
  const Image png = read_image(o.output);
  EXPECT_EQ(png.cols, 4 + 2 * (32 + 4) + 3 * (16 + 4));
  EXPECT_EQ(png.rows, 4 + 3 * (32 + 4));
  o.transform = "eval";
  o.indices = {12};
  write_preview(o);
  EXPECT_EQ(read_image(o.output).cols, 4 + 224 + 4);
  o.transform = "bogus";
  EXPECT_THROW(write_preview(o), xdino::UsageError);
  std::filesystem::remove_all(dir);
}
