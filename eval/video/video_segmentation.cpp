#include "eval/video/video_segmentation.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "augment/ops/tensor.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "eval/video/davis_metrics.h"
#include "eval/video/indexed_png.h"
#include "eval/video/label_propagation.h"

namespace fs = std::filesystem;

namespace xdino::eval::video {
namespace {

struct Frame {
  torch::Tensor image;        // (1, 3, th, tw)
  int height = 0, width = 0;  // original
};

Frame read_frame(const fs::path& path, torch::Device device) {
  const cv::Mat bgr = cv::imread(path.string(), cv::IMREAD_COLOR);
  XDINO_CHECK(!bgr.empty(), "cannot read the frame ", path.string());
  const auto [th, tw] = frame_size(bgr.rows, bgr.cols);
  cv::Mat resized, rgb, f;
  cv::resize(bgr, resized, cv::Size(tw, th), 0, 0, cv::INTER_LINEAR);
  cv::cvtColor(resized, rgb, cv::COLOR_BGR2RGB);
  rgb.convertTo(f, CV_32FC3, 1.0 / 255.0);
  torch::Tensor t =
      torch::from_blob(f.data, {th, tw, 3}, torch::kFloat32).permute({2, 0, 1}).clone();
  const torch::Tensor mean = torch::tensor(augment::kImageNetMean, torch::kFloat32).view({3, 1, 1});
  // eval_video_segmentation.py's own std: 0.228 where ImageNet's is 0.229 (kept, to match it).
  const torch::Tensor std =
      torch::tensor({0.228, augment::kImageNetStd[1], augment::kImageNetStd[2]}, torch::kFloat32)
          .view({3, 1, 1});
  t = (t - mean) / std;
  return {t.unsqueeze(0).to(device), bgr.rows, bgr.cols};
}

// (h*w, C) patch features of one frame.
torch::Tensor frame_features(models::Backbone& model, const torch::Tensor& image) {
  torch::Tensor tokens = model.patch_tokens(image);  // (1, N, C)
  return tokens[0].to(torch::kFloat32);
}

std::vector<std::string> read_list(const fs::path& file) {
  std::ifstream in(file);
  XDINO_CHECK_ARG(in.good(), "no video list ", file.string(),
                  " (--data_path must hold ImageSets/2017/val.txt, JPEGImages/480p/ and "
                  "Annotations/480p/)");
  std::vector<std::string> videos;
  for (std::string line; std::getline(in, line);) {
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (!line.empty()) videos.push_back(line);
  }
  return videos;
}

std::vector<std::string> frame_names(const fs::path& dir) {
  XDINO_CHECK_ARG(fs::is_directory(dir), "no frame folder ", dir.string());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jpg") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  XDINO_CHECK_ARG(!names.empty(), "no .jpg frame in ", dir.string());
  return names;
}

Json stats_json(const Statistics& s) {
  return Json{{"mean", s.mean}, {"recall", s.recall}, {"decay", s.decay}};
}

}  // namespace

cv::Mat resize_nearest(const cv::Mat& labels, int width, int height) {
  cv::Mat out(height, width, CV_8UC1);
  const double sx = static_cast<double>(labels.cols) / width;
  const double sy = static_cast<double>(labels.rows) / height;
  for (int y = 0; y < height; ++y) {
    const int yy = std::min(static_cast<int>((y + 0.5) * sy), labels.rows - 1);
    for (int x = 0; x < width; ++x) {
      const int xx = std::min(static_cast<int>((x + 0.5) * sx), labels.cols - 1);
      out.at<uint8_t>(y, x) = labels.at<uint8_t>(yy, xx);
    }
  }
  return out;
}

Json run_video_segmentation(const VideoSegmentationOptions& o, torch::Device device,
                            const ChecksPassed& checks_passed) {
  XDINO_CHECK_ARG(o.n_last_frames >= 0 && o.topk >= 1 && o.size_mask_neighborhood >= 0,
                  "--n_last_frames must be >= 0, --topk >= 1, --size_mask_neighborhood >= 0");
  models::check_arch(o.model.arch,
                     "video segmentation (label propagation over the patch tokens; "
                     "eval_video_segmentation.py takes ViTs only)");
  const fs::path root(o.data_path);
  const std::vector<std::string> videos = read_list(root / "ImageSets" / "2017" / "val.txt");
  // The frames keep their size: the input's image_size only builds the model (a ViT's position
  // table) and is recorded.
  const ImageInput& input = o.input;
  const auto model = load_frozen_backbone(o.model, input, device, "video segmentation").model;
  const int64_t p = model->patch_size();
  notify(checks_passed);
  torch::NoGradGuard no_grad;
  const Palette& palette = davis_palette();
  Json sequences = Json::array();
  std::vector<double> j_means, j_recalls, j_decays, f_means, f_recalls, f_decays;
  for (size_t v = 0; v < videos.size(); ++v) {
    const std::string& name = videos[v];
    log::info("[", v, "/", videos.size(), "] Begin to segmentate video ", name, ".");
    const fs::path frames_dir = root / "JPEGImages" / "480p" / name;
    const fs::path masks_dir = root / "Annotations" / "480p" / name;
    const std::vector<std::string> frames = frame_names(frames_dir);
    const fs::path first_mask = masks_dir / (frames[0] + ".png");
    XDINO_CHECK_ARG(fs::exists(first_mask), "no first-frame annotation ", first_mask.string());
    const cv::Mat seg_ori = read_label_png(first_mask);
    const Frame first = read_frame(frames_dir / (frames[0] + ".jpg"), device);
    XDINO_CHECK(first.height == seg_ori.rows && first.width == seg_ori.cols, "frame ",
                (frames_dir / (frames[0] + ".jpg")).string(), " is ", first.width, "x",
                first.height, " but its annotation is ", seg_ori.cols, "x", seg_ori.rows);
    const auto [mh, mw] = mask_size(seg_ori.rows, seg_ori.cols);
    const cv::Mat small =
        resize_nearest(seg_ori, mw / static_cast<int>(p), mh / static_cast<int>(p));
    double max_label = 0;
    cv::minMaxLoc(small, nullptr, &max_label);
    const torch::Tensor small_t =
        torch::from_blob(small.data, {small.rows, small.cols}, torch::kUInt8).to(torch::kInt64);
    const torch::Tensor first_seg = torch::one_hot(small_t, static_cast<int64_t>(max_label) + 1)
                                        .permute({2, 0, 1})
                                        .unsqueeze(0)
                                        .to(device, torch::kFloat32);

    const fs::path out_dir = fs::path(o.output_dir) / name;
    fs::create_directories(out_dir);
    write_label_png(out_dir / (frames[0] + ".png"), seg_ori, palette);
    const torch::Tensor first_feat = frame_features(*model, first.image).t();  // (C, hw)
    std::deque<std::pair<torch::Tensor, torch::Tensor>> queue;  // (features, soft mask)
    torch::Tensor mask;
    std::vector<cv::Mat> results{seg_ori};
    for (size_t t = 1; t < frames.size(); ++t) {
      const Frame frame = read_frame(frames_dir / (frames[t] + ".jpg"), device);
      XDINO_CHECK(frame.height == first.height && frame.width == first.width, "frame ",
                  (frames_dir / (frames[t] + ".jpg")).string(), " is ", frame.width, "x",
                  frame.height, " but the video's first frame is ", first.width, "x", first.height);
      const torch::Tensor target = frame_features(*model, frame.image);  // (hw, C)
      const auto [gh, gw] = model->token_grid(frame.image.size(2), frame.image.size(3));
      XDINO_CHECK(gh * gw == first_seg.size(2) * first_seg.size(3), "the feature grid ", gh, "x",
                  gw, " does not match the mask grid ", first_seg.size(2), "x", first_seg.size(3),
                  " (frame and annotation of different aspect?)");
      if (o.size_mask_neighborhood > 0 && !mask.defined())
        mask = neighbourhood_mask(gh, gw, o.size_mask_neighborhood).to(device);
      std::vector<torch::Tensor> feats{first_feat}, segs{first_seg};
      for (const auto& [f, s] : queue) feats.push_back(f), segs.push_back(s);
      const torch::Tensor soft =
          propagate(target, torch::stack(feats), torch::cat(segs), mask, o.topk);
      if (static_cast<int64_t>(queue.size()) == o.n_last_frames && !queue.empty())
        queue.pop_front();
      if (o.n_last_frames > 0) queue.emplace_back(target.t(), soft.clone());
      namespace F = torch::nn::functional;
      torch::Tensor up = F::interpolate(
          soft,
          F::InterpolateFuncOptions()
              .scale_factor(std::vector<double>{static_cast<double>(p), static_cast<double>(p)})
              .mode(torch::kBilinear)
              .align_corners(false)
              .recompute_scale_factor(false))[0];
      up = norm_mask(up);
      const torch::Tensor labels = std::get<1>(up.max(0)).to(torch::kUInt8).cpu().contiguous();
      const cv::Mat seg(static_cast<int>(labels.size(0)), static_cast<int>(labels.size(1)), CV_8UC1,
                        labels.data_ptr<uint8_t>());
      cv::Mat full = resize_nearest(seg, first.width, first.height);
      write_label_png(out_dir / (frames[t] + ".png"), full, palette);
      results.push_back(full);
    }
    if (!o.evaluate) continue;
    std::vector<cv::Mat> gt;
    for (const std::string& f : frames) {
      const fs::path a = masks_dir / (f + ".png");
      XDINO_CHECK_ARG(fs::exists(a), "no annotation ", a.string(),
                      " for J&F (pass --evaluate false to only segment)");
      gt.push_back(read_label_png(a));
      XDINO_CHECK(gt.back().size() == results[gt.size() - 1].size(), "annotation ", a.string(),
                  " is ", gt.back().cols, "x", gt.back().rows, " but its frame is ", first.width,
                  "x", first.height);
    }
    const std::vector<ObjectScores> scores = evaluate_sequence(gt, results);
    Json objects = Json::array();
    for (const ObjectScores& s : scores) {
      objects.push_back(Json{{"J", stats_json(s.j_stats)}, {"F", stats_json(s.f_stats)}});
      j_means.push_back(s.j_stats.mean), j_recalls.push_back(s.j_stats.recall),
          j_decays.push_back(s.j_stats.decay);
      f_means.push_back(s.f_stats.mean), f_recalls.push_back(s.f_stats.recall),
          f_decays.push_back(s.f_stats.decay);
    }
    sequences.push_back(Json{{"name", name}, {"frames", frames.size()}, {"objects", objects}});
  }
  Json j = Json::object();
  j["protocol"] = "video object segmentation (eval_video_segmentation.py, DAVIS 2017 J&F)";
  add_model_fields(j, o.model, input.image_size);
  j["n_last_frames"] = o.n_last_frames;
  j["size_mask_neighborhood"] = o.size_mask_neighborhood;
  j["topk"] = o.topk;
  if (o.evaluate && !j_means.empty()) {
    const auto mean = [](const std::vector<double>& v) {
      double s = 0;
      for (double x : v) s += x;
      return s / static_cast<double>(v.size());
    };
    j["J&F-Mean"] = (mean(j_means) + mean(f_means)) / 2;
    j["J-Mean"] = mean(j_means);
    j["J-Recall"] = mean(j_recalls);
    j["J-Decay"] = mean(j_decays);
    j["F-Mean"] = mean(f_means);
    j["F-Recall"] = mean(f_recalls);
    j["F-Decay"] = mean(f_decays);
    log::info("J&F-Mean ", j["J&F-Mean"].get<double>(), "  J-Mean ", mean(j_means), "  F-Mean ",
              mean(f_means));
  }
  j["sequences"] = sequences;
  write_file_atomically(fs::path(o.output_dir) / "video_segmentation.json",
                        python_dumps(j, 2) + "\n");
  log::info("wrote ", (fs::path(o.output_dir) / "video_segmentation.json").string());
  return j;
}

}  // namespace xdino::eval::video
