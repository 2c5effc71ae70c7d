#include "eval/visualize.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>

#include "augment/data/decode.h"
#include "augment/data/open_dataset.h"
#include "augment/ops/resize.h"
#include "augment/ops/tensor.h"
#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "eval/heatmap.h"
#include "eval/video/attention_video.h"
#include "models/registry.h"
#include "models/weights.h"

namespace fs = std::filesystem;

namespace xdino::eval {
namespace {

torch::Tensor grid_of(const torch::Tensor& per_patch, int64_t gh, int64_t gw) {
  return per_patch.reshape({per_patch.size(0), gh, gw}).to(torch::kFloat).contiguous();
}

// X-ViT's XNorm has no normalised keys (it normalises the filters of K^T V): k_hat is
// undefined there and its maps are skipped.
torch::Tensor grid_or_undefined(const torch::Tensor& per_patch, int64_t gh, int64_t gw) {
  return per_patch.defined() ? grid_of(per_patch[0], gh, gw) : torch::Tensor();
}

std::string format_threshold(double t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", t);
  return buf;
}

bool wants(const VisualizeOptions& o, const char* kind) {
  XDINO_CHECK_ARG(
      o.qk_norms == "hat" || o.qk_norms == "raw" || o.qk_norms == "both" || o.qk_norms == "none",
      "--qk_norms must be hat, raw, both or none, got '", o.qk_norms, "'");
  return o.qk_norms == "both" || o.qk_norms == kind;
}

cv::Mat blend(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat out;
  cv::addWeighted(a, 0.5, b, 0.5, 0, out);
  return out;
}

std::vector<cv::Mat> heads_of(const torch::Tensor& maps, int64_t patch, Colormap colormap) {
  std::vector<cv::Mat> tiles;
  const torch::Tensor up = upsample_nearest(maps, patch);
  for (int64_t j = 0; j < up.size(0); ++j) tiles.push_back(colorize(up[j], colormap));
  return tiles;
}

std::vector<std::string> head_captions(int64_t heads) {
  std::vector<std::string> c;
  for (int64_t j = 0; j < heads; ++j) c.push_back("head " + std::to_string(j));
  return c;
}

// torchvision's Resize(size) output (rows, cols) for an image of rows x cols; `flag` names
// the size in errors.
cv::Size resized(int rows, int cols, const std::vector<int64_t>& size, const char* flag) {
  if (size.empty() || (size.size() == 1 && size[0] == 0)) return {cols, rows};
  XDINO_CHECK_ARG(size.size() <= 2 && size[0] > 0 && size.back() > 0, flag,
                  " takes H W, one size for the shorter side, or 0 to keep each image's size");
  if (size.size() == 2) return {static_cast<int>(size[1]), static_cast<int>(size[0])};
  const int64_t s = size[0], shorter = std::min(rows, cols), longer = std::max(rows, cols);
  const int other = static_cast<int>(s * longer / shorter);
  return rows <= cols ? cv::Size(other, static_cast<int>(s)) : cv::Size(static_cast<int>(s), other);
}

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  for (const char* e : {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".ppm", ".pgm", ".tif", ".tiff"})
    if (ext == e) return true;
  return false;
}

// A name derived from an input as one folder inside --output_dir: no separator or control
// character, and never ".", ".." (the stems of "..png" and "...png") or a name that starts
// with '.' or '-' (hidden, or read as an option by the tools a user runs on it): those get a
// leading '_'.
std::string folder_name(std::string name) {
  for (char& c : name)
    if (c == '/' || c == '\\' || std::iscntrl(static_cast<unsigned char>(c))) c = '_';
  if (name.empty() || name[0] == '.' || name[0] == '-') name.insert(0, "_");
  return name;
}

// The output folder of each input: its stem; where two inputs share one (a/00000.jpg and
// b/00000.jpg, a.jpg and a.mp4) their folder's name and the stem (a-00000), numbered if even
// those repeat, so that no input's pictures overwrite another's. Each is a folder_name.
std::vector<std::string> output_names(const std::vector<fs::path>& inputs) {
  std::map<std::string, int> stems;
  for (const fs::path& p : inputs) ++stems[p.stem().string()];
  std::set<std::string> taken;
  std::vector<std::string> names;
  for (const fs::path& p : inputs) {
    std::string name = p.stem().string();
    const std::string parent = p.parent_path().filename().string();
    if (stems[name] > 1 && !parent.empty()) name = parent + "-" + name;
    name = folder_name(name);
    for (int k = 2; taken.count(name) > 0; ++k)
      name = folder_name(p.stem().string()) + "-" + std::to_string(k);
    taken.insert(name);
    names.push_back(name);
  }
  return names;
}

}  // namespace

ImageMaps compute_maps(models::Backbone& model, const augment::Image& rgb,
                       const VisualizeOptions& o, const std::string& name) {
  ImageMaps m;
  m.name = name;
  m.patch = model.patch_size();
  augment::Image sized = rgb;
  const cv::Size size = resized(rgb.rows, rgb.cols, o.image_size, "--image_size");
  if (size != rgb.size()) sized = augment::resize(rgb, size, augment::Interpolation::kBilinear);
  const int hc = sized.rows - sized.rows % static_cast<int>(m.patch);
  const int wc = sized.cols - sized.cols % static_cast<int>(m.patch);
  XDINO_CHECK_ARG(hc > 0 && wc > 0, "image '", name, "' (", sized.cols, "x", sized.rows,
                  ") is smaller than one ", m.patch, "-pixel patch");
  m.image = sized(cv::Rect(0, 0, wc, hc)).clone();
  m.input = augment::Normalizer()(m.image);

  models::ProbeRequest request;
  request.feature = false;
  request.cls_attention_layer = o.ca_layer;
  // XCiT and X-ViT end in class-attention layers and have per-block |Q|/|K| maps; ViT's
  // attention maps are its blocks' CLS rows (models::Capabilities).
  m.caps = model.capabilities();
  const bool class_attention = m.caps.class_attention_layers > 0;
  if (m.caps.qk_norms && o.qk_norms != "none") request.qk_block = o.qk_block;
  models::Probe probe;
  {
    torch::NoGradGuard no_grad;
    probe = model.probe(m.input.unsqueeze(0).to(o.device), request);
  }
  for (torch::Tensor* t : {&probe.qk.q_hat, &probe.qk.k_hat, &probe.qk.q_raw, &probe.qk.k_raw})
    if (t->defined()) *t = t->to(torch::kCPU);
  const int64_t gh = hc / m.patch, gw = wc / m.patch;
  const torch::Tensor attn =
      probe.cls_attention[0].to(torch::kCPU).narrow(1, 1, gh * gw);  // drop CLS->CLS
  m.attention = grid_of(attn, gh, gw);
  if (o.threshold > 0) m.mask = grid_of(attention_mask(attn, o.threshold), gh, gw);
  if (request.qk_block) {
    m.q_hat = grid_or_undefined(probe.qk.q_hat, gh, gw);
    m.k_hat = grid_or_undefined(probe.qk.k_hat, gh, gw);
    m.q_raw = grid_or_undefined(probe.qk.q_raw, gh, gw);
    m.k_raw = grid_or_undefined(probe.qk.k_raw, gh, gw);
    m.qk_block = models::resolve_index(o.qk_block, model.num_blocks(), "--qk_block");
  }
  m.ca_layer = models::resolve_index(
      o.ca_layer, class_attention ? m.caps.class_attention_layers : model.num_blocks(),
      "--ca_layer");
  return m;
}

void write_maps(const ImageMaps& m, const fs::path& dir, const VisualizeOptions& o) {
  fs::create_directories(dir);
  const int64_t heads = m.attention.size(0);
  const cv::Mat img = tensor_to_image(m.input);
  write_png(dir / "img.png", img);
  std::vector<GridRow> rows;
  rows.push_back({"image", {m.image}, {m.name}});

  const auto attn_tiles = heads_of(m.attention, m.patch, Colormap::kViridis);
  std::vector<cv::Mat> overlays;
  for (int64_t j = 0; j < heads; ++j) {
    write_png(dir / ("attn-head" + std::to_string(j) + ".png"), attn_tiles[j]);
    overlays.push_back(blend(m.image, attn_tiles[j]));
    write_png(dir / ("attn-overlay-head" + std::to_string(j) + ".png"), overlays.back());
  }
  write_npy(dir / "attn.npy", m.attention);
  rows.push_back({(m.caps.class_attention_layers > 0 ? "CLS attn, CA layer " : "CLS attn, block ") +
                      std::to_string(m.ca_layer),
                  attn_tiles, head_captions(heads)});
  rows.push_back({"attn over image", overlays, {}});

  if (m.mask.defined()) {
    const std::string t = format_threshold(o.threshold);
    const torch::Tensor up = upsample_nearest(m.mask, m.patch);
    std::vector<cv::Mat> tiles;
    for (int64_t j = 0; j < heads; ++j) {
      tiles.push_back(overlay_mask(img, up[j]));
      write_png(dir / ("mask_th" + t + "_head" + std::to_string(j) + ".png"), tiles.back());
    }
    write_npy(dir / "mask.npy", m.mask);
    rows.push_back({"mask: top " + t + " of mass", tiles, {}});
  }

  const std::string layer = "-layer" + std::to_string(m.qk_block);
  // X-ViT normalises each query over its own channels: |q^| = 1 everywhere, by design.
  const bool unit_queries = m.caps.unit_queries;
  auto qk_rows = [&](const torch::Tensor& q, const torch::Tensor& k, const std::string& suffix,
                     const std::string& label) {
    for (const auto& [map, stem] :
         {std::pair{q, std::string("qnorm")}, std::pair{k, std::string("knorm")}}) {
      if (!map.defined()) continue;
      const auto tiles = heads_of(map, m.patch, Colormap::kViridis);
      for (int64_t j = 0; j < heads; ++j)
        write_png(dir / (stem + suffix + layer + "-head" + std::to_string(j) + ".png"), tiles[j]);
      write_npy(dir / (stem + (suffix.empty() ? "" : "_raw") + ".npy"), map);
      rows.push_back({(stem == "qnorm" ? "|q|" : "|k|") + label + ", " + m.caps.block_label +
                          " blk " + std::to_string(m.qk_block),
                      tiles,
                      {}});
    }
  };
  if (m.q_hat.defined() && wants(o, "hat"))
    qk_rows(m.q_hat, m.k_hat, "", unit_queries ? " normalised (=1 by design)" : " normalised");
  if (m.q_raw.defined() && wants(o, "raw")) qk_rows(m.q_raw, m.k_raw, "-raw", " raw");

  // Small images (28-32 px) drawn at least 4x, so a 7x7 token grid reads as cells.
  const int tile = static_cast<int>(std::clamp<int64_t>(4 * m.image.rows, 128, 192));
  const std::string title =
      o.model.arch +
      (o.model.pretrained_weights.empty() ? " (random weights)"
                                          : " <- " + o.model.pretrained_weights) +
      "   colours: each map from its minimum (dark blue) to its maximum (yellow)";
  write_png(dir / "overview.png", make_grid(rows, tile, title));
}

void write_frame(const ImageMaps& m, const fs::path& file) {
  const torch::Tensor mean = upsample_nearest(m.attention.mean(0, true), m.patch)[0];
  augment::write_image(file, colorize(mean, Colormap::kInferno));
}

namespace {

// "val_00042_Sneaker": the split, the index and, for labelled data, the class name (made safe
// for a folder name).
std::string sample_name(const augment::Dataset& data, const std::string& split, int64_t i) {
  std::string index = std::to_string(i);
  index.insert(0, index.size() < 5 ? 5 - index.size() : 0, '0');
  std::string name = split + "_" + index;
  const int64_t label = data.label(i);
  if (label >= 0) name += "_" + data.class_names()[static_cast<size_t>(label)];
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '-';
  return name;
}

int64_t visualize_samples(const VisualizeOptions& o) {
  XDINO_CHECK_ARG(o.image_path.empty(), "give either --image_path or --data_path, not both");
  XDINO_CHECK_ARG(!o.sample_indices.empty(), "--sample_indices is empty");
  const auto data = augment::open_dataset(o.data_path, o.split);
  for (int64_t i : o.sample_indices)
    XDINO_CHECK_ARG(i >= 0 && i < data->size(), "--sample_indices ", i, " is outside the ",
                    data->size(), " images of ", data->describe());
  auto model = load_frozen_backbone(o.model, o.input, o.device, "dino visualize").model;
  const fs::path out(o.output_dir);
  fs::create_directories(out);
  for (int64_t i : o.sample_indices) {
    const std::string name = sample_name(*data, o.split, i);
    const ImageMaps m = compute_maps(*model, data->load(i), o, name);
    write_maps(m, out / name, o);
    log::info("wrote ", out / name / "overview.png");
  }
  return static_cast<int64_t>(o.sample_indices.size());
}

// The attention pictures of every frame of `dir`, written as out/attn-<frame name>.
int64_t visualize_frames(models::Backbone& model, const fs::path& dir, const fs::path& out,
                         const VisualizeOptions& o) {
  std::vector<fs::path> frames;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && is_image_file(e.path())) frames.push_back(e.path());
  std::sort(frames.begin(), frames.end());
  XDINO_CHECK_ARG(!frames.empty(), "frame folder '", dir.string(), "' has no images");
  fs::create_directories(out);
  for (const fs::path& f : frames) {
    write_frame(compute_maps(model, augment::read_image(f), o, f.filename().string()),
                out / ("attn-" + f.filename().string()));
  }
  log::info("wrote ", frames.size(), " attention frames from ", dir, " to ", out);
  return static_cast<int64_t>(frames.size());
}

void make_video(const fs::path& pictures, const fs::path& out, double fps,
                const VisualizeOptions& o) {
  const fs::path file = out / ("video." + o.video_format);
  const int64_t n = video::write_video(pictures, file, fps, o.video_format);
  log::info("wrote ", file, " (", n, " frames, ", fps, " fps)");
}

}  // namespace

int64_t visualize(const VisualizeOptions& options) {
  VisualizeOptions o = options;
  if (!options.input_path.empty()) {  // video_generation.py's flags
    XDINO_CHECK_ARG(options.image_path.empty() && options.data_path.empty(),
                    "--input_path (video_generation.py) and --image_path/--data_path "
                    "(visualize_attention.py) both name the input: give one");
    resized(1, 1, options.resize, "--resize");  // a bad --resize is named as such
    o.image_path = {options.input_path};
    o.output_dir = options.output_path;
    o.image_size = options.resize;
  }
  // Attention needs tokens: a ResNet is refused before any data or image is opened.
  if (!o.video_only) models::check_arch(o.model.arch, "attention maps (visualize_attention.py)");
  if (!o.data_path.empty()) return visualize_samples(o);
  if (o.video_only) {
    XDINO_CHECK_ARG(o.image_path.size() == 1 && fs::is_directory(o.image_path[0]),
                    "--video_only needs --input_path to be one folder of attn-*.jpg pictures");
    fs::create_directories(o.output_dir);
    make_video(o.image_path[0], o.output_dir, o.fps, o);
    return 0;
  }
  XDINO_CHECK_ARG(!o.image_path.empty(),
                  "--image_path is required (one or more images, or a folder of video frames), "
                  "or --data_path with --sample_indices, or --input_path (a video or a folder "
                  "of its frames)");
  std::vector<fs::path> images, videos;  // videos: files and folders of frames
  for (const std::string& p : o.image_path) {
    XDINO_CHECK_ARG(fs::exists(p), "'", p, "' does not exist (--image_path / --input_path)");
    const bool video = fs::is_directory(p) || video::is_video_file(p);
    // "frames/" names the folder "frames", as "frames" does.
    (video ? videos : images).push_back(fs::path(p).lexically_normal());
  }
  XDINO_CHECK_ARG(o.video_format == "mp4" || o.video_format == "avi",
                  "--video_format must be mp4 or avi, got '", o.video_format, "'");
  auto model = load_frozen_backbone(o.model, o.input, o.device, "dino visualize").model;
  const fs::path out(o.output_dir);
  fs::create_directories(out);
  for (fs::path& input : videos)
    if (input.filename().empty()) input = input.parent_path();
  std::vector<fs::path> inputs = images;
  inputs.insert(inputs.end(), videos.begin(), videos.end());
  const std::vector<std::string> names = output_names(inputs);
  int64_t count = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const fs::path& path = images[i];
    const ImageMaps m =
        compute_maps(*model, augment::read_image(path), o, path.filename().string());
    const fs::path dir = images.size() == 1 ? out : out / names[i];
    write_maps(m, dir, o);
    log::info("wrote ", dir / "overview.png", " (", m.attention.size(0), " heads, ",
              m.attention.size(1), "x", m.attention.size(2), " patches)");
    ++count;
  }
  for (size_t j = 0; j < videos.size(); ++j) {
    const fs::path& input = videos[j];
    const fs::path root = videos.size() == 1 ? out : out / names[images.size() + j];
    double fps = o.fps;
    fs::path frames = input;
    if (!fs::is_directory(input)) {
      frames = root / "frames";
      const double source_fps = video::extract_frames(input, frames);
      log::info("Video: ", input, " (", source_fps, " fps)");
      if (source_fps > 0) fps = source_fps;
    }
    count += visualize_frames(*model, frames, root / "attention", o);
    make_video(root / "attention", root, fps, o);
  }
  return count;
}

}  // namespace xdino::eval
