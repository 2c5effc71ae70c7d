// `dino video_segmentation`: eval_video_segmentation.py on the DAVIS-2017 layout, then J&F
// (davis_metrics.h) on what it wrote.
//
// Contract:
//  - Layout: <data_path>/ImageSets/2017/val.txt (one video per line), JPEGImages/480p/<video>/
//    *.jpg (sorted by name), Annotations/480p/<video>/<frame>.png (palette PNGs). The first
//    frame's annotation is the input; the others are needed only for J&F.
//  - Per video, as the script: each frame read by OpenCV (BGR -> RGB), resized (INTER_LINEAR)
//    to frame_size(), /255, normalised with mean (0.485, 0.456, 0.406) and std
//    (0.228, 0.224, 0.225) (the script's std); patch features = the last layer's patch tokens
//    (ViT: final-normed, get_intermediate_layers(n=1); XCiT/X-ViT: the last XCA block's). The
//    first mask is resized (Pillow NEAREST) to mask_size() / patch and one-hot encoded
//    (channels 0..max label). Each next frame: propagate() from the first frame and the last
//    n_last_frames frames (their soft masks), bilinear upsampling by the patch size,
//    norm_mask, argmax, Pillow NEAREST resize to the original size; written as
//    <output_dir>/<video>/<frame>.png in the DAVIS palette, the first frame's annotation as
//    00000.png-style <first frame>.png.
//  - evaluate: J&F per object (every frame but the first and last), the toolkit's global
//    numbers: J&F-Mean = (mean J + mean F) / 2 over all objects of all videos, and J/F mean,
//    recall, decay; <output_dir>/video_segmentation.json holds them with the per-object ones.
//  - Errors, one line each: a missing list, video folder or first annotation; a frame whose
//    size differs from its annotation; an annotation that is not a palette/greyscale PNG.
//  - Single process (the script is too); the model runs on `device`.
#pragma once

#include <torch/torch.h>

#include <opencv2/core.hpp>
#include <string>

#include "core/json.h"
#include "eval/checks_passed.h"
#include "eval/frozen_backbone.h"

namespace xdino::eval::video {

struct VideoSegmentationOptions {
  BackboneSpec model{"vit_small", 16, "", "teacher", 0};
  std::string output_dir = ".";
  std::string data_path = "/path/to/davis/";
  int64_t n_last_frames = 7;
  int64_t size_mask_neighborhood = 12;
  int64_t topk = 5;
  int64_t bs = 6;        // the script's flag; it does not use it either
  bool evaluate = true;  // ours: J&F on the written masks
  // How the model is built (its image_size: a ViT's position table; RGB); the frames keep
  // their own size.
  ImageInput input;
};

Json run_video_segmentation(const VideoSegmentationOptions& options, torch::Device device,
                            const ChecksPassed& checks_passed = {});

// Pillow's Image.resize(size, NEAREST) of a label image: source pixel floor((x + 0.5) * in / out).
cv::Mat resize_nearest(const cv::Mat& labels, int width, int height);

}  // namespace xdino::eval::video
