#include "eval/video/davis_metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <opencv2/imgproc.hpp>

#include "core/check.h"

namespace xdino::eval::video {
namespace {

void check_same(const cv::Mat& a, const cv::Mat& b, const char* what) {
  XDINO_CHECK(a.type() == CV_8UC1 && b.type() == CV_8UC1 && a.size() == b.size(), what,
              ": masks must be CV_8UC1 of one size, got ", a.size(), " and ", b.size());
}

// mask & !void as 0/1.
cv::Mat valid(const cv::Mat& mask, const cv::Mat& void_pixels) {
  cv::Mat m = mask != 0;
  if (!void_pixels.empty()) m &= (void_pixels == 0);
  return m / 255;
}

double nanmean(const std::vector<double>& v, size_t begin, size_t end) {
  double sum = 0;
  int64_t n = 0;
  for (size_t i = begin; i < end && i < v.size(); ++i)
    if (!std::isnan(v[i])) sum += v[i], ++n;
  return n ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

double region_similarity(const cv::Mat& gt, const cv::Mat& mask, const cv::Mat& void_pixels) {
  check_same(gt, mask, "J");
  cv::Mat keep = void_pixels.empty() ? cv::Mat(gt.size(), CV_8UC1, cv::Scalar(255))
                                     : cv::Mat(void_pixels == 0);
  const double inter = cv::countNonZero((gt != 0) & (mask != 0) & keep);
  const double uni = cv::countNonZero(((gt != 0) | (mask != 0)) & keep);
  return uni == 0 ? 1.0 : inter / uni;
}

cv::Mat boundary_map(const cv::Mat& mask) {
  const int h = mask.rows, w = mask.cols;
  cv::Mat seg = mask != 0, b(h, w, CV_8UC1, cv::Scalar(0));
  const auto at = [&](int y, int x) { return seg.at<uint8_t>(y, x) != 0; };
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const bool s = at(y, x);
      const bool e = x + 1 < w ? at(y, x + 1) : false;  // zero outside, as np.zeros_like
      const bool so = y + 1 < h ? at(y + 1, x) : false;
      const bool se = x + 1 < w && y + 1 < h ? at(y + 1, x + 1) : false;
      bool v;
      if (y == h - 1 && x == w - 1)
        v = false;
      else if (y == h - 1)
        v = s != e;
      else if (x == w - 1)
        v = s != so;
      else
        v = (s != e) || (s != so) || (s != se);
      b.at<uint8_t>(y, x) = v ? 1 : 0;
    }
  }
  return b;
}

double boundary_measure(const cv::Mat& gt, const cv::Mat& mask, const cv::Mat& void_pixels,
                        double bound_th) {
  check_same(gt, mask, "F");
  const double diagonal = std::hypot(static_cast<double>(gt.rows), static_cast<double>(gt.cols));
  const int r = static_cast<int>(bound_th >= 1 ? bound_th : std::ceil(bound_th * diagonal));
  cv::Mat disk(2 * r + 1, 2 * r + 1, CV_8UC1);
  for (int y = -r; y <= r; ++y)
    for (int x = -r; x <= r; ++x) disk.at<uint8_t>(y + r, x + r) = x * x + y * y <= r * r;
  const cv::Mat fg = boundary_map(valid(mask, void_pixels));
  const cv::Mat gb = boundary_map(valid(gt, void_pixels));
  cv::Mat fg_dil, gt_dil;
  cv::dilate(fg, fg_dil, disk);
  cv::dilate(gb, gt_dil, disk);
  const double n_fg = cv::countNonZero(fg), n_gt = cv::countNonZero(gb);
  double precision, recall;
  if (n_fg == 0 && n_gt > 0)
    precision = 1, recall = 0;
  else if (n_fg > 0 && n_gt == 0)
    precision = 0, recall = 1;
  else if (n_fg == 0 && n_gt == 0)
    precision = 1, recall = 1;
  else {
    precision = cv::countNonZero(fg & gt_dil) / n_fg;
    recall = cv::countNonZero(gb & fg_dil) / n_gt;
  }
  return precision + recall == 0 ? 0.0 : 2 * precision * recall / (precision + recall);
}

Statistics statistics(const std::vector<double>& v) {
  Statistics s;
  s.mean = nanmean(v, 0, v.size());
  std::vector<double> above;
  for (double x : v) above.push_back(x > 0.5 ? 1.0 : 0.0);  // NaN > 0.5 is false, as numpy
  s.recall = nanmean(above, 0, above.size());
  // ids = round(linspace(1, n, 5) + 1e-10) - 1; bin i = v[ids[i] .. ids[i+1]] inclusive.
  const double n = static_cast<double>(v.size());
  size_t ids[5];
  for (int i = 0; i < 5; ++i)
    ids[i] = static_cast<size_t>(std::nearbyint(1.0 + (n - 1.0) * i / 4.0 + 1e-10) - 1);
  s.decay = nanmean(v, ids[0], ids[1] + 1) - nanmean(v, ids[3], ids[4] + 1);
  return s;
}

std::vector<ObjectScores> evaluate_sequence(const std::vector<cv::Mat>& gt,
                                            const std::vector<cv::Mat>& results) {
  XDINO_CHECK(gt.size() == results.size(), gt.size(), " ground-truth frames but ", results.size(),
              " results");
  int objects = 0;
  for (const cv::Mat& g : gt) {
    cv::Mat labels = g.clone();
    labels.setTo(0, g == 255);
    double max = 0;
    cv::minMaxLoc(labels, nullptr, &max);
    objects = std::max(objects, static_cast<int>(max));
  }
  std::vector<ObjectScores> out(static_cast<size_t>(objects));
  for (size_t t = 1; t + 1 < gt.size(); ++t) {
    check_same(gt[t], results[t], "J&F");
    const cv::Mat void_pixels = gt[t] == 255;
    for (int o = 1; o <= objects; ++o) {
      const cv::Mat g = gt[t] == o, r = results[t] == o;
      out[static_cast<size_t>(o - 1)].j.push_back(region_similarity(g, r, void_pixels));
      out[static_cast<size_t>(o - 1)].f.push_back(boundary_measure(g, r, void_pixels));
    }
  }
  for (ObjectScores& s : out) {
    s.j_stats = statistics(s.j);
    s.f_stats = statistics(s.f);
  }
  return out;
}

}  // namespace xdino::eval::video
