#include "augment/preview.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "augment/data/encode.h"
#include "augment/data/open_dataset.h"
#include "augment/sample_transforms.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"

namespace xdino::augment {

Image views_grid(const std::vector<std::vector<torch::Tensor>>& rows,
                 const std::vector<double>& mean, const std::vector<double>& std, int padding) {
  XDINO_CHECK(!rows.empty(), "nothing to draw: no image");
  XDINO_CHECK(mean.size() == 3 && std.size() == 3, "mean and std need 3 values each");
  int width = 0, height = padding;
  for (const auto& row : rows) {
    int w = padding, h = 0;
    for (const torch::Tensor& v : row) {
      XDINO_CHECK(v.dim() == 3 && v.size(0) == 3, "a view of shape ", v.sizes(),
                  " is not a (3,H,W) image");
      w += static_cast<int>(v.size(2)) + padding;
      h = std::max(h, static_cast<int>(v.size(1)));
    }
    width = std::max(width, w);
    height += h + padding;
  }
  Image canvas(height, width, CV_8UC3, cv::Scalar(128, 128, 128));
  int y = padding;
  for (const auto& row : rows) {
    int x = padding, row_height = 0;
    for (const torch::Tensor& view : row) {
      const torch::Tensor v = view.detach().to(torch::kCPU, torch::kDouble).contiguous();
      const int h = static_cast<int>(v.size(1)), w = static_cast<int>(v.size(2));
      const double* p = v.data_ptr<double>();
      for (int c = 0; c < 3; ++c)
        for (int r = 0; r < h; ++r)
          for (int q = 0; q < w; ++q) {
            const double value = (p[(c * h + r) * w + q] * std[c] + mean[c]) * 255.0;
            canvas.ptr<uint8_t>(y + r)[(x + q) * 3 + c] =
                static_cast<uint8_t>(std::clamp(std::lround(value), 0L, 255L));
          }
      x += w + padding;
      row_height = std::max(row_height, h);
    }
    y += row_height + padding;
  }
  return canvas;
}

std::vector<std::vector<torch::Tensor>> preview_rows(const Dataset& dataset,
                                                     const SampleTransform& transform,
                                                     const std::vector<int64_t>& indices,
                                                     int64_t seed, int64_t epoch) {
  std::vector<std::vector<torch::Tensor>> rows;
  for (int64_t i : indices) {
    Rng rng(sample_seed(static_cast<uint64_t>(seed), static_cast<uint64_t>(epoch),
                        static_cast<uint64_t>(i)));
    rows.push_back(transform(dataset.load(i), rng));
  }
  return rows;
}

std::vector<int64_t> write_preview(const PreviewOptions& o) {
  XDINO_CHECK_ARG(!o.data_path.empty(), "--data_path is required: the images to preview");
  XDINO_CHECK_ARG(o.transform == "multicrop" || o.transform == "eval" || o.transform == "linear",
                  "--transform must be multicrop, eval or linear, not '", o.transform, "'");
  XDINO_CHECK_ARG(o.num_images >= 1 || !o.indices.empty(), "--num_images must be at least 1");
  const DatasetPtr dataset = open_dataset(o.data_path, o.split);
  std::vector<int64_t> indices = o.indices;
  if (indices.empty()) indices = balanced_subset(*dataset, o.num_images);
  for (int64_t i : indices)
    XDINO_CHECK_ARG(i >= 0 && i < dataset->size(), "--indices: ", i, " is not an index of the ",
                    dataset->size(), " images of ", dataset->location());
  const SampleTransform transform = o.transform == "multicrop" ? multi_crop_transform(o.multi_crop)
                                    : o.transform == "eval"    ? eval_transform({})
                                                               : linear_train_transform({});
  const Normalization n = o.transform == "multicrop" ? o.multi_crop.normalization : Normalization{};
  write_png(o.output, views_grid(preview_rows(*dataset, transform, indices, o.seed, o.epoch),
                                 {n.mean.begin(), n.mean.end()}, {n.std.begin(), n.std.end()}));
  return indices;
}

}  // namespace xdino::augment
