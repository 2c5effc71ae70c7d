// State dicts: PyTorch's names and order, strict loading, and the official pretrained-weights
// loader (DINO utils.load_pretrained_weights + XCiT's supervised files).
//
// Contract:
//  - state_dict(module): every defined parameter and buffer as `prefix.name` -> tensor in
//    PyTorch's order (a module's own parameters, then its own buffers, then each child in
//    registration order, recursively). Tensors are detached aliases of the module's own
//    (writing into them writes the module), like Python's state_dict().
//  - to_ivalue / from_ivalue convert to and from the GenericDict save_pth/load_pth use.
//    from_ivalue throws xdino::Error naming `source` and the first entry that is not
//    str -> tensor.
//  - load_state_dict(module, state, strict): copies every matching tensor into the module in
//    place (no autograd, converting dtype and device). It checks everything before copying, so
//    on failure the module is untouched. A shape mismatch always fails (as in PyTorch); with
//    strict, a key the model has but `state` lacks (missing) or the reverse (unexpected) fails
//    too. Each failure is one line naming `source`, the first offending key and both shapes.
//    BatchNorm's num_batches_tracked may be absent (the module keeps its count) and a
//    1-element 1-d value loads into a 0-d tensor, as PyTorch allows. Non-strict loads return
//    the missing/unexpected keys in the report for the caller to log.
//  - load_pretrained(module, path, checkpoint_key, strict) does what the official loader does
//    with --pretrained_weights: load_pth(path); if `checkpoint_key` is a top-level key take
//    that sub-dict, else a supervised XCiT file's "model" (or "state_dict"); remove the
//    substrings "module." and "backbone." from every key; drop keys the loader ignores on
//    purpose (report.ignored): what only training has (is_training_only_key: the DINO
//    projection head head.mlp.*, head.last_layer.*, iBOT's ibot_head.* and mask_token) and,
//    when the model has no head.* keys, a classifier head (head.weight, head.bias); then
//    load_state_dict. It logs one info line saying what it loaded and ignored. Errors name
//    the file (and the sub-dict taken). A non-empty `checkpoint_key` the file lacks falls back
//    to the whole file, as the official loader does, only when the file is a flat dict of
//    tensors; otherwise it throws UsageError naming the keys the file holds.
//    read_pretrained() is its first half (the file, the sub-dict), load_pretrained(module,
//    weights) the second (names, ignored keys, load_state_dict).
//  - Input channels (docs/checkpoints.md, "Input channels"): when `module` is a Backbone and
//    the stored tensor under its input_conv_weight() differs from the model's in the
//    input-channel axis alone, 3 stored channels are adapted as timm's adapt_input_conv does
//    (adapt_input_conv below) and one info line says what was done; any other stored count
//    is one UsageError line naming both counts and the fix (--in_chans). No other tensor is
//    ever adapted: every other shape mismatch fails as above.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/registry.h"
#include "models/state_dict.h"

namespace xdino::models {

StateDict state_dict(const torch::nn::Module& module);

c10::IValue to_ivalue(const StateDict& state);
StateDict from_ivalue(const c10::IValue& value, const std::string& source = "state dict");

struct LoadReport {
  int64_t loaded = 0;                   // tensors copied into the module
  std::vector<std::string> missing;     // model keys the checkpoint lacks (left as they were)
  std::vector<std::string> unexpected;  // checkpoint keys the model lacks (not loaded)
  std::vector<std::string> ignored;     // checkpoint keys load_pretrained dropped on purpose
  // One line for the log: counts and the first few keys of each list.
  std::string summary() const;
};

LoadReport load_state_dict(torch::nn::Module& module, const StateDict& state, bool strict = true,
                           const std::string& source = "checkpoint");

LoadReport load_pretrained(torch::nn::Module& module, const std::filesystem::path& path,
                           const std::string& checkpoint_key = "teacher", bool strict = true);

// load_pretrained in two steps, for a caller that looks at the weights before it builds the
// model (create_backbone_for below).
// A file named .safetensors, or one that neither starts as a torch.save file does
// (core/safetensors.h, looks_like_pth) nor is named like one (.pth, .pt, .tar, .ckpt), is read
// as safetensors, so that the error names what is wrong with it as one.
struct PretrainedWeights {
  c10::impl::GenericDict weights;  // the chosen sub-dict (or the whole file), keys as stored
  std::string source;              // "'path'" or "'path' (key 'teacher')", for messages
  bool whole_training_checkpoint = false;  // no key taken from a file with student/teacher
  // The normalisation the file records, or empty: a safetensors file's metadata (`dino
  // export` writes mean and std there) or a training checkpoint's args.mean / args.std.
  std::vector<double> mean{}, std{};
};
PretrainedWeights read_pretrained(const std::filesystem::path& path,
                                  const std::string& checkpoint_key = "teacher");
LoadReport load_pretrained(torch::nn::Module& module, const PretrainedWeights& weights,
                           bool strict = true);
// timm's adapt_input_conv: the (out, 3, k, k) weight of an RGB input conv for images of
// `in_chans` channels. 1: the sum over the three (a gray image g gives what the RGB model gives
// on (g, g, g)); any other count: the three repeated ceil(in_chans / 3) times along the input
// axis, the first in_chans kept, times 3 / in_chans (for a multiple of 3, an image of its RGB
// channels repeated gives the RGB model's response). Computed in float32 (float64 stays float64),
// returned in the weight's dtype. UsageError unless `rgb_weight` is (out, 3, k, k) and in_chans
// >= 1.
torch::Tensor adapt_input_conv(const torch::Tensor& rgb_weight, int64_t in_chans);
// What adapt_input_conv does to 3 channels for `in_chans`, for the log: "summed into 1",
// "repeated into 4 and scaled by 3/4".
std::string adapt_input_conv_summary(int64_t in_chans);

// A stored key as the model names it: "module." and "backbone." removed, as the official
// loader removes them.
std::string pretrained_name(const std::string& key);
// Whether a name (as pretrained_name gives it) is one of the DINO projection head's tensors,
// head.mlp.* or head.last_layer.*: the part of a training checkpoint a backbone never takes.
bool is_dino_head_key(const std::string& name);
// The same, or iBOT's separate head (ibot_head.*) or mask token (mask_token): what only a
// training run has.
bool is_training_only_key(const std::string& name);
// The tensor stored under `name` once "module." and "backbone." are removed, or undefined.
torch::Tensor find_weight(const PretrainedWeights& weights, const std::string& name);

// The backbone `arch` built to take `weights`: a ViT's position table gets the grid of the
// stored pos_embed, since `dino train` writes the grid of its --global_crops_size and the
// official checkpoints 14 x 14 (224 / 16); forward() interpolates the table to any input
// either way. options.in_chans kInChansFromWeights (the caller was not given a count) becomes
// the input-channel count of the stored input conv (models::input_conv_weight_of), else 3;
// any other value is kept (load_pretrained then adapts 3 stored channels or refuses).
// position_table_image_size() is that grid's image size, side x patch for a pos_embed of (1, side^2
// + 1, C), else `otherwise` (XCiT/X-ViT have no learned table).
int64_t position_table_image_size(const PretrainedWeights& weights, int64_t patch_size,
                                  int64_t otherwise);
std::shared_ptr<Backbone> create_backbone_for(const std::string& arch, BackboneOptions options,
                                              const PretrainedWeights& weights);

}  // namespace xdino::models
