// Attention visualisations: what DINO's visualize_attention.py / video_generation.py draw for
// ViT, and their XCiT and X-ViT counterparts (class-attention maps, |Q^| / |K^| maps; README,
// "Evaluation and pictures"), as PNG files, an overview grid and raw .npy maps.
//
// Contract:
//  - Each image is read as RGB, resized with PIL's bilinear filter as torchvision's
//    Resize(image_size) sizes it: {H, W} exactly, {S} its shorter side to S (the longer one to
//    floor(S * long / short)), {0} or {} kept; normalised with ImageNet statistics, and cropped
//    from the top-left to multiples of the patch size, so maps align with pixels exactly.
//  - compute_maps runs the model (eval mode, float32, no grad) once per image. attention is
//    (heads, Hf, Wf): the CLS query's weights over patches (CLS column dropped, not
//    renormalised) of class-attention layer `ca_layer` (XCiT) or of the last block (ViT).
//    mask is attention_mask(threshold) reshaped alike (undefined without a threshold). For
//    XCiT, q_hat/k_hat and q_raw/k_raw are the per-patch norms of XCA block `qk_block`; for
//    X-ViT those of XNorm block `qk_block`, with q_hat = 1 by design and k_hat undefined
//    (models/xvit.h; its knorm maps are skipped). X-ViT counts as XCiT below.
//  - write_maps writes into `dir`: img.png, attn-head{j}.png, attn-overlay-head{j}.png,
//    mask_th{t}_head{j}.png (with a threshold), qnorm[-raw]-layer{l}-head{j}.png and
//    knorm[-raw]-layer{l}-head{j}.png (XCiT), overview.png (labelled rows), and the raw maps
//    attn.npy, mask.npy, qnorm[_raw].npy, knorm[_raw].npy.
//  - visualize(options) does all of it: one image writes into output_dir (the official
//    layout), several into output_dir/<image stem>/. Videos take video_generation.py's layout,
//    in `root` = output_dir (output_dir/<name> when image_path has several folders or videos).
//    Inputs that share a stem (a/00000.jpg, b/00000.jpg) are named <folder>-<stem> (a-00000),
//    then numbered, so that none overwrites another's pictures. In root:
//    a folder of frames gives root/attention/attn-<frame name>, the mean over heads in the
//    inferno colormap, and root/video.<video_format> made of them at `fps`
//    (eval/video/attention_video.h); a video file is first cut into root/frames/frame-NNNN.jpg,
//    and the video gets the source's frame rate (`fps` when it has none). video_only:
//    image_path is one folder of attn-*.jpg pictures, only the video is made.
//    input_path (video_generation.py's flags) is image_path = {input_path} with output_path
//    and resize for output_dir and image_size; giving it with image_path or data_path is a
//    UsageError. With data_path set, the chosen samples of a dataset are visualised instead of
//    files. Returns the number of images processed.
//  - Unreadable images, unknown archs and out-of-range layers throw with one line naming them.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "augment/ops/image.h"
#include "eval/frozen_backbone.h"
#include "models/backbone.h"

namespace xdino::eval {

struct VisualizeOptions {
  // The scripts' model (ViT-S/8 by default), built and loaded as the evaluations load theirs
  // (eval/frozen_backbone.h); the pictures' size is image_size below.
  BackboneSpec model{"vit_small", 8, "", "teacher", 0};
  ImageInput input;  // how the model is built (RGB); the pictures' size is image_size below
  // visualize_attention.py's input.
  std::vector<std::string> image_path;
  // Or images of a dataset (any layout open_dataset reads, e.g. Fashion-MNIST's IDX files):
  // samples `sample_indices` of `split`, each written to output_dir/<split>_<index>_<class>/.
  std::string data_path;
  std::string split = "val";
  std::vector<int64_t> sample_indices = {0, 1, 2, 3};
  std::vector<int64_t> image_size = {480, 480};  // (H, W), {S}: shorter side, {0}: keep
  std::string output_dir = ".";
  double threshold = 0;           // mass kept by the masks; 0: no masks (the official None)
  int64_t ca_layer = -1;          // XCiT class-attention layer of the attention maps
  int64_t qk_block = -1;          // XCiT XCA block of the |Q|/|K| maps
  std::string qk_norms = "both";  // hat, raw, both or none
  // Attention videos (video_generation.py's flags).
  std::string input_path;  // a video, a folder of frames, or of attn-*.jpg (video_only)
  std::string output_path = "./";
  std::vector<int64_t> resize;  // as image_size; empty: each frame's own size
  double fps = 30.0;
  std::string video_format = "mp4";  // mp4 | avi
  bool video_only = false;
  // Where the model runs (launch/ picks the GPU when there is one, as visualize_attention.py and
  // video_generation.py do); the maps come back to the CPU, where the pictures are drawn.
  torch::Device device = torch::kCPU;
};

struct ImageMaps {
  std::string name;
  augment::Image image;  // the resized, cropped RGB image the model saw
  torch::Tensor input;   // (3, H, W) normalised
  int64_t patch = 0;
  torch::Tensor attention;                   // (heads, Hf, Wf)
  torch::Tensor mask;                        // (heads, Hf, Wf), or undefined
  torch::Tensor q_hat, k_hat, q_raw, k_raw;  // (heads, Hf, Wf), or undefined
  int64_t ca_layer = 0, qk_block = 0;        // resolved indices, for labels and file names
  models::Capabilities caps;                 // the model's, for labels
};

ImageMaps compute_maps(models::Backbone& model, const augment::Image& rgb,
                       const VisualizeOptions& options, const std::string& name);
void write_maps(const ImageMaps& maps, const std::filesystem::path& dir,
                const VisualizeOptions& options);
void write_frame(const ImageMaps& maps, const std::filesystem::path& file);

int64_t visualize(const VisualizeOptions& options);

}  // namespace xdino::eval
