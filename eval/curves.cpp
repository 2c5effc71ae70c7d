#include "eval/curves.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <string>

#include "augment/data/encode.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/json.h"

namespace xdino::eval {
namespace fs = std::filesystem;
namespace {

// A readable axis: about `count` ticks at 1, 2 or 5 x 10^n steps covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count) {
  const double span = std::max(hi - lo, 1e-12);
  const double raw = span / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * span; t += step) out.push_back(t);
  return out;
}

std::string format_tick(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof buf, "%gk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%g", std::round(v * 1000) / 1000);
  return buf;
}

struct Line {
  double y;
  std::string label;
  cv::Scalar color;
};

const cv::Scalar kInk(40, 40, 40), kGrid(225, 225, 225), kCurve(200, 90, 30);

void dashed_hline(cv::Mat& img, int x0, int x1, int y, const cv::Scalar& color) {
  for (int x = x0; x < x1; x += 10) cv::line(img, {x, y}, {std::min(x + 5, x1), y}, color, 2);
}

// Under the panels, a legend strip: one row per entry (the curve, then each reference line),
// so no label is drawn over a line or over another label, however close the lines run.
constexpr int kPanelWidth = 420, kPanelHeight = 320, kLegendRow = 16;
constexpr int kLegendHeight = 4 * kLegendRow + 8;  // the k-NN panel's curve + 3 references

void legend_entry(cv::Mat& img, cv::Point at, const std::string& text, const cv::Scalar& color,
                  bool dashed) {
  const int y = at.y - 4;
  if (dashed)
    dashed_hline(img, at.x, at.x + 30, y, color);
  else {
    cv::line(img, {at.x, y}, {at.x + 30, y}, color, 2, cv::LINE_AA);
    cv::circle(img, {at.x + 15, y}, 3, color, cv::FILLED, cv::LINE_AA);
  }
  cv::putText(img, text, {at.x + 38, at.y}, cv::FONT_HERSHEY_SIMPLEX, 0.4, color, 1, cv::LINE_AA);
}

// One panel in `area`: axes, ticks, the curve with markers, reference lines; their legend in
// the strip below `area`.
void draw_panel(cv::Mat& img, const cv::Rect& area, const std::string& title,
                const std::string& curve_name, const std::vector<CurvePoint>& points,
                const std::vector<Line>& refs, double x_max) {
  const int font = cv::FONT_HERSHEY_SIMPLEX;
  cv::putText(img, title, {area.x + 10, area.y + 22}, font, 0.55, kInk, 1, cv::LINE_AA);
  const cv::Rect plot(area.x + 60, area.y + 40, area.width - 80, area.height - 85);
  if (points.empty() && refs.empty()) {
    cv::putText(img, "no data (see --knn_every)", {plot.x + 20, plot.y + plot.height / 2}, font,
                0.5, kInk, 1, cv::LINE_AA);
    return;
  }
  double lo = 1e300, hi = -1e300;
  for (const auto& p : points) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
  for (const auto& r : refs) lo = std::min(lo, r.y), hi = std::max(hi, r.y);
  const double pad = std::max((hi - lo) * 0.08, std::max(std::fabs(hi), 1.0) * 1e-3);
  lo -= pad;
  hi += pad;
  const auto px = [&](double x) {
    return plot.x + static_cast<int>(std::lround(x / x_max * plot.width));
  };
  const auto py = [&](double y) {
    return plot.y + plot.height - static_cast<int>(std::lround((y - lo) / (hi - lo) * plot.height));
  };
  for (double t : nice_ticks(lo, hi, 5)) {
    cv::line(img, {plot.x, py(t)}, {plot.x + plot.width, py(t)}, kGrid, 1);
    cv::putText(img, format_tick(t), {area.x + 4, py(t) + 4}, font, 0.38, kInk, 1, cv::LINE_AA);
  }
  for (double t : nice_ticks(0, x_max, 4)) {
    cv::line(img, {px(t), plot.y + plot.height}, {px(t), plot.y + plot.height + 4}, kInk, 1);
    cv::putText(img, format_tick(t), {px(t) - 12, plot.y + plot.height + 18}, font, 0.38, kInk, 1,
                cv::LINE_AA);
  }
  cv::rectangle(img, plot, kInk, 1);
  cv::putText(img, "images seen", {plot.x + plot.width / 2 - 40, plot.y + plot.height + 38}, font,
              0.42, kInk, 1, cv::LINE_AA);
  for (const auto& r : refs) dashed_hline(img, plot.x, plot.x + plot.width, py(r.y), r.color);
  for (size_t i = 0; i < points.size(); ++i) {
    const cv::Point p(px(points[i].images_seen), py(points[i].value));
    if (i > 0)
      cv::line(img, {px(points[i - 1].images_seen), py(points[i - 1].value)}, p, kCurve, 2,
               cv::LINE_AA);
    cv::circle(img, p, 3, kCurve, cv::FILLED, cv::LINE_AA);
  }
  cv::Point row(plot.x, area.y + area.height + kLegendRow);
  if (!points.empty()) {
    char text[96];
    std::snprintf(text, sizeof text, "%s, last %.4g", curve_name.c_str(), points.back().value);
    legend_entry(img, row, text, kCurve, false);
    row.y += kLegendRow;
  }
  for (const auto& r : refs) {
    char text[96];
    std::snprintf(text, sizeof text, "%s %.2f", r.label.c_str(), r.y);
    legend_entry(img, row, text, r.color, true);
    row.y += kLegendRow;
  }
}

double number(const Json& j, const char* key, const std::string& where) {
  XDINO_CHECK(j.contains(key) && j[key].is_number(), where, ": no number '", key, "'");
  return j[key].get<double>();
}

}  // namespace

TrainingCurves read_training_curves(const fs::path& dir) {
  TrainingCurves c;
  const fs::path ref_path = dir / "knn_reference.json";
  if (fs::exists(ref_path)) {
    const Json ref = parse_json(read_file(ref_path), ref_path.string());
    const std::string where = ref_path.string();
    c.knn_random = number(ref, "knn_top1_random", where);
    c.knn_pixels = number(ref, "knn_top1_pixels", where);
    if (ref.contains("knn_top1_random_bn")) {  // older files: no such line
      if (ref["knn_top1_random_bn"].is_null())
        c.knn_random_no_batch_norm = true;
      else
        c.knn_random_bn = number(ref, "knn_top1_random_bn", where);
    }
    c.knn_train = static_cast<int64_t>(number(ref, "knn_train", where));
    c.knn_val = static_cast<int64_t>(number(ref, "knn_val", where));
    c.knn_top1.push_back({0.0, *c.knn_random});
  }
  const fs::path log_path = dir / "log.txt";
  if (!fs::exists(log_path)) return c;
  std::istringstream lines(read_file(log_path));
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (line.empty()) continue;
    const std::string where = log_path.string() + " line " + std::to_string(n);
    const Json j = parse_json(line, where);
    const double x =
        j.contains("images_seen") ? number(j, "images_seen", where) : number(j, "epoch", where) + 1;
    c.loss.push_back({x, number(j, "train_loss", where)});
    if (j.contains("train_teacher_entropy"))
      c.teacher_entropy.push_back({x, number(j, "train_teacher_entropy", where)});
    if (j.contains("knn_top1")) {
      c.knn_top1.push_back({x, number(j, "knn_top1", where)});
      c.knn_train = static_cast<int64_t>(number(j, "knn_train", where));
      c.knn_val = static_cast<int64_t>(number(j, "knn_val", where));
    }
  }
  return c;
}

void write_training_curves(const fs::path& dir) {
  const TrainingCurves c = read_training_curves(dir);
  double x_max = 1;
  for (const auto* series : {&c.loss, &c.teacher_entropy, &c.knn_top1})
    for (const auto& p : *series) x_max = std::max(x_max, p.images_seen);
  const int w = kPanelWidth, h = kPanelHeight;
  cv::Mat img(h + kLegendHeight, 3 * w, CV_8UC3, cv::Scalar(255, 255, 255));
  draw_panel(img, {0, 0, w, h}, "DINO loss", "loss", c.loss, {}, x_max);
  draw_panel(img, {w, 0, w, h}, "teacher entropy (nats)", "entropy", c.teacher_entropy, {}, x_max);
  std::vector<Line> refs;
  if (c.knn_pixels) refs.push_back({*c.knn_pixels, "raw pixels", cv::Scalar(30, 120, 30)});
  if (c.knn_random)
    refs.push_back({*c.knn_random,
                    c.knn_random_no_batch_norm ? "random init (no BatchNorm)" : "random init",
                    cv::Scalar(120, 120, 120)});
  if (c.knn_random_bn)
    refs.push_back({*c.knn_random_bn, "random init, data's BN", cv::Scalar(150, 60, 150)});
  std::string title = "online 20-NN top-1 (%)";
  if (c.knn_train > 0)
    title += ", " + std::to_string(c.knn_train) + "/" + std::to_string(c.knn_val) + " images";
  draw_panel(img, {2 * w, 0, w, h}, title, "teacher", c.knn_top1, refs, x_max);
  augment::write_png(dir / "curves.png", img);
}

}  // namespace xdino::eval
