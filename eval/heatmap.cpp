#include "eval/heatmap.h"

#include <algorithm>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/atomic_file.h"
#include "core/check.h"

namespace xdino::eval {

torch::Tensor attention_mask(const torch::Tensor& attn, double threshold) {
  XDINO_CHECK(attn.dim() == 2, "attention_mask wants (heads, patches), got ", attn.sizes());
  XDINO_CHECK_ARG(threshold > 0 && threshold <= 1, "--threshold must be in (0, 1], got ",
                  threshold);
  const auto sorted = attn.to(torch::kDouble).sort(/*dim=*/1, /*descending=*/false);
  const torch::Tensor& values = std::get<0>(sorted);
  const torch::Tensor& order = std::get<1>(sorted);
  const torch::Tensor cumulative = (values / values.sum(1, true)).cumsum(1);
  const torch::Tensor keep_sorted = (cumulative > 1 - threshold).to(torch::kFloat);
  return torch::zeros_like(keep_sorted).scatter_(1, order, keep_sorted);
}

torch::Tensor upsample_nearest(const torch::Tensor& maps, int64_t factor) {
  XDINO_CHECK(maps.dim() == 3 && factor >= 1, "upsample_nearest wants (h, H, W) and factor >= 1");
  return maps.repeat_interleave(factor, 1).repeat_interleave(factor, 2);
}

namespace {

// OpenCV reads host memory: callers bring their maps to the CPU first (a map of a CUDA run).
cv::Mat wrap(const torch::Tensor& contiguous, int type) {
  XDINO_CHECK(contiguous.is_cpu() && contiguous.is_contiguous(),
              "an image for OpenCV must be a contiguous CPU tensor");
  return cv::Mat(static_cast<int>(contiguous.size(0)), static_cast<int>(contiguous.size(1)), type,
                 contiguous.data_ptr());
}

cv::Mat to_grey_u8(const torch::Tensor& map) {
  const torch::Tensor m = map.to(torch::kCPU, torch::kFloat);
  XDINO_CHECK(m.dim() == 2, "a map must be (H, W), got ", m.sizes());
  const float lo = m.min().item<float>(), hi = m.max().item<float>();
  const torch::Tensor scaled =
      hi > lo ? ((m - lo) / (hi - lo) * 255.0f).round().clamp(0, 255) : torch::zeros_like(m);
  return wrap(scaled.to(torch::kUInt8).contiguous(), CV_8UC1).clone();
}

}  // namespace

cv::Mat colorize(const torch::Tensor& map, Colormap colormap) {
  cv::Mat bgr, rgb;
  cv::applyColorMap(to_grey_u8(map), bgr,
                    colormap == Colormap::kViridis ? cv::COLORMAP_VIRIDIS : cv::COLORMAP_INFERNO);
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

cv::Mat overlay_mask(const cv::Mat& image, const torch::Tensor& mask, const cv::Scalar& colour) {
  XDINO_CHECK(image.type() == CV_8UC3 && mask.dim() == 2 && mask.size(0) == image.rows &&
                  mask.size(1) == image.cols,
              "overlay_mask: image ", image.cols, "x", image.rows, " and mask ", mask.sizes(),
              " differ");
  const torch::Tensor m = mask.to(torch::kCPU, torch::kFloat).contiguous();
  const cv::Mat weights = wrap(m, CV_32FC1);
  cv::Mat out(image.size(), CV_8UC3);
  for (int y = 0; y < image.rows; ++y) {
    const auto* src = image.ptr<cv::Vec3b>(y);
    const auto* w = weights.ptr<float>(y);
    auto* dst = out.ptr<cv::Vec3b>(y);
    for (int x = 0; x < image.cols; ++x)
      for (int c = 0; c < 3; ++c)
        dst[x][c] = cv::saturate_cast<uint8_t>(src[x][c] * (1 - 0.5f * w[x]) +
                                               0.5f * w[x] * static_cast<float>(colour[c]));
  }
  // Contours at level 0.5 of the mask padded by one zero pixel, like DINO's find_contours.
  cv::Mat binary;
  cv::copyMakeBorder(weights > 0.5f, binary, 1, 1, 1, 1, cv::BORDER_CONSTANT, 0);
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(binary, contours, cv::RETR_LIST, cv::CHAIN_APPROX_NONE, cv::Point(-1, -1));
  cv::drawContours(out, contours, -1, colour, 1);
  return out;
}

cv::Mat tensor_to_image(const torch::Tensor& chw) {
  XDINO_CHECK(chw.dim() == 3 && chw.size(0) == 3, "expected a (3, H, W) image, got ", chw.sizes());
  torch::Tensor t = chw.to(torch::kCPU, torch::kFloat);
  const float lo = t.min().item<float>(), hi = t.max().item<float>();
  t = hi > lo ? (t - lo) / (hi - lo) : torch::zeros_like(t);
  const torch::Tensor hwc =
      (t * 255.0f).round().clamp(0, 255).to(torch::kUInt8).permute({1, 2, 0}).contiguous();
  return wrap(hwc, CV_8UC3).clone();
}

cv::Mat make_grid(const std::vector<GridRow>& rows, int tile_height, const std::string& title) {
  XDINO_CHECK(!rows.empty() && tile_height > 0, "make_grid needs rows");
  constexpr int kGap = 4, kCaption = 18;
  const int title_height = title.empty() ? 0 : 26;
  auto text_width = [](const std::string& text, double scale) {
    int baseline = 0;
    return cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &baseline).width;
  };
  int kLabelWidth = 60;  // wide enough for the longest label
  for (const GridRow& r : rows) kLabelWidth = std::max(kLabelWidth, text_width(r.label, 0.45) + 14);
  const bool captions =
      std::any_of(rows.begin(), rows.end(), [](const GridRow& r) { return !r.captions.empty(); });
  const int row_height = tile_height + (captions ? kCaption : 0) + kGap;
  std::vector<std::vector<cv::Mat>> scaled(rows.size());
  int width = std::max(kLabelWidth, title.empty() ? 0 : text_width(title, 0.5) + 12);
  for (size_t r = 0; r < rows.size(); ++r) {
    int w = kLabelWidth;
    for (const cv::Mat& tile : rows[r].tiles) {
      cv::Mat s;
      const int tw = std::max(1, tile.cols * tile_height / std::max(1, tile.rows));
      cv::resize(tile, s, cv::Size(tw, tile_height), 0, 0, cv::INTER_NEAREST);
      if (s.channels() == 1) cv::cvtColor(s, s, cv::COLOR_GRAY2RGB);
      scaled[r].push_back(s);
      w += tw + kGap;
    }
    width = std::max(width, w);
  }
  cv::Mat grid(title_height + static_cast<int>(rows.size()) * row_height + kGap, width, CV_8UC3,
               cv::Scalar(255, 255, 255));
  if (!title.empty())
    cv::putText(grid, title, cv::Point(6, 18), cv::FONT_HERSHEY_SIMPLEX, 0.5, cv::Scalar(0, 0, 0),
                1, cv::LINE_AA);
  for (size_t r = 0; r < rows.size(); ++r) {
    const int top = title_height + kGap + static_cast<int>(r) * row_height;
    cv::putText(grid, rows[r].label, cv::Point(6, top + tile_height / 2 + 5),
                cv::FONT_HERSHEY_SIMPLEX, 0.45, cv::Scalar(0, 0, 0), 1, cv::LINE_AA);
    int x = kLabelWidth;
    for (size_t t = 0; t < scaled[r].size(); ++t) {
      scaled[r][t].copyTo(grid(cv::Rect(x, top, scaled[r][t].cols, tile_height)));
      if (t < rows[r].captions.size())
        cv::putText(grid, rows[r].captions[t], cv::Point(x + 2, top + tile_height + 13),
                    cv::FONT_HERSHEY_SIMPLEX, 0.4, cv::Scalar(60, 60, 60), 1, cv::LINE_AA);
      x += scaled[r][t].cols + kGap;
    }
  }
  return grid;
}

void write_npy(const std::filesystem::path& path, const torch::Tensor& tensor) {
  torch::Tensor t = tensor.cpu().contiguous();
  std::string descr;
  switch (t.scalar_type()) {
    case torch::kFloat:
      descr = "<f4";
      break;
    case torch::kDouble:
      descr = "<f8";
      break;
    case torch::kLong:
      descr = "<i8";
      break;
    case torch::kInt:
      descr = "<i4";
      break;
    case torch::kUInt8:
      descr = "|u1";
      break;
    default:
      t = t.to(torch::kFloat);
      descr = "<f4";
  }
  std::string shape;
  for (int64_t d : t.sizes()) shape += std::to_string(d) + ", ";
  if (t.dim() > 1)
    shape.erase(shape.size() - 2);  // "3, 4"
  else if (t.dim() == 1)
    shape.erase(shape.size() - 1);  // "3," (a Python 1-tuple)
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Magic (6) + version (2) + header length (2) + header + '\n', padded to a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  write_file_atomically(path, bytes);
}

}  // namespace xdino::eval
