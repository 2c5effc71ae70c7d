// The interface every backbone implements (XCiT family, DINO ViT, pixels baseline).
//
// Contract:
//  - Input images are float tensors (B, in_chans(), H, W) (3: RGB, ImageNet-normalised; 1:
//    grayscale; any count >= 1, BackboneOptions::in_chans), any H and W the
//    architecture accepts (XCiT: any size, rounded up per stage; ViT: floor(H/p) x floor(W/p)
//    patches, position embeddings interpolated). Outputs are on the input's device, in the
//    model's dtype (or autocast's). Works in float32, float64, bfloat16 and under autocast.
//  - forward(x): (B, C) final-normalised CLS feature when num_classes == 0, else (B, classes).
//    Train mode enables drop path; the official "(y, y) tuple in train mode" is not reproduced
//    because DINO's wrapper takes element 0 anyway.
//  - probe(x, request): the one forward implementation; it returns forward()'s feature and,
//    on request, intermediate results of the same pass (see ProbeRequest). Every other
//    method below is a thin wrapper around it, so features and maps always agree.
//  - linear_features(x, n_last_blocks, avgpool): the feature eval_linear.py feeds to the linear
//    layer for this architecture (XCiT: forward(x); ViT: concatenated normalised CLS tokens of
//    the last n blocks, plus the averaged patch tokens when avgpool).
//  - Block indices run over the num_blocks() main blocks (XCiT: the XCA blocks; ViT: the
//    transformer blocks); negative indices count from the end (-1 = last). Out of range:
//    xdino::UsageError. Block outputs are the tokens leaving the block, before any final norm:
//    XCiT (B, N, C) patch tokens; ViT (B, 1+N, C) with CLS first (block_prefix_tokens() = 1).
//  - patch_tokens(x): (B, N, C). XCiT: output of the last XCA block (what the class-attention
//    layers read; the final norm is only ever applied to CLS); ViT: final-normed patch tokens
//    (what DINO's avgpool averages).
//  - cls_attention(x, layer): (B, heads, N+1) attention of the CLS query over [CLS, patches],
//    rows summing to 1, float32 (float64 for float64 models). XCiT: class-attention layer `layer`
//    of 2 (negative counts from the end); ViT: CLS row of block `layer`'s self-attention.
//    UsageError where undefined.
//  - qk_norms(x, block): per-patch |q|, |k| (raw and after the attention's normalisation),
//    each (B, heads, N), float32 (float64 for float64 models), for main block `block`: XCiT
//    (XCA's token-axis L2 normalisation) and X-ViT (XNorm's per-token one: |q^| = 1, no |k^|);
//    UsageError for other families.
//  - capabilities(): which maps the family can give and how to label them, and info_lines()
//    what `dino info` adds for the family, so that callers (eval/visualize.cpp,
//    models/info.cpp) never dispatch on architecture names.
//  - Parameter and buffer names equal the official state_dict keys and are registered in the
//    official order (own parameters, own buffers, then children, recursively).
//  - Masked patches (iBOT, ssl/recipe.h): add_mask_token() registers mask_token, a (1, C)
//    parameter of zeros under dinov2's name (a backbone without it keeps the official keys);
//    then a ProbeRequest's token_mask (B, N) bool replaces those patches' embeddings by it,
//    before the position encoding, so a masked patch keeps its position (dinov2's ViT does
//    the same). On XCiT the LPI convolutions of the blocks then see the mask token among its
//    neighbours on the grid (docs/dino.md, "iBOT on XCiT"). supports_token_mask() says whether
//    the family has patch tokens to mask (ResNets and pixels: no; add_mask_token throws
//    UsageError there). A token_mask without a mask token, or of another shape, throws.
//  - ProbeRequest::final_patch_tokens: the patch rows of the model's last layer after the
//    final norm, (B, N, C): dinov2's x_norm_patchtokens (ViT: the same as patch_tokens; XCiT:
//    after the class-attention blocks, which update every token).
//  - input_conv_weight(): the state_dict key of the convolution that reads the images, shape
//    (out, in_chans(), k, k): the one tensor models::load_pretrained may adapt when a checkpoint
//    has another channel count (models/weights.h); "" where the family has none (pixels).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xdino::models {

// How XCA computes its d x d attention per head (models/xcit_layers.h, docs/flops.md):
//  - kOps: matmul, softmax, matmul, as xcit.py writes it: the reference, and the path of
//    LibTorch 1.13;
//  - kSdpa: one at::scaled_dot_product_attention call on q^ (times the temperature), k^ and v
//    laid out (B, h, d, N) with unit stride along the tokens, so that LibTorch's fused kernels
//    can take it (LibTorch 2.1 and later; core/compat.h);
//  - kAuto: kOps. On an H100 the fused path was 6-15% slower per training step and held
//    1.5 GiB more at XCiT-S12/16 sizes (bench/results/gpu.md, "A GPU user's run"): XCA is a
//    small share of the step, and the transposed copy and padding kSdpa needs cost more than
//    the flash kernel saves.
enum class XcaAttention { kAuto, kOps, kSdpa };

struct QKNorms {
  torch::Tensor q_raw, k_raw;  // ||q_n||, ||k_n|| per head before normalisation, (B, h, N)
  torch::Tensor q_hat, k_hat;  // the same after L2 normalisation over tokens, (B, h, N)
};

// What one forward pass should capture besides the feature.
struct ProbeRequest {
  std::vector<int64_t> blocks;                 // outputs of these blocks, in this order
  bool patch_tokens = false;                   // see Backbone::patch_tokens
  std::optional<int64_t> cls_attention_layer;  // XCiT: class-attention layer; ViT: block
  std::optional<int64_t> qk_block;             // XCA block whose |Q|/|K| norms to capture
  bool feature = true;       // false: stop as soon as every capture is done (feature undefined)
  torch::Tensor token_mask;  // (B, N) bool: patches replaced by the mask token
  bool final_patch_tokens = false;  // see Probe::final_patch_tokens
};

struct Probe {
  torch::Tensor feature;              // forward()'s result
  std::vector<torch::Tensor> blocks;  // one per ProbeRequest::blocks entry
  torch::Tensor patch_tokens;         // (B, N, C)
  torch::Tensor cls_attention;        // (B, heads, N+1)
  QKNorms qk;                         // (B, heads, N) each
  torch::Tensor final_patch_tokens;   // (B, N, C), final-normed
};

// What a backbone can show besides its feature (see probe()).
struct Capabilities {
  // > 0: the CLS attention maps come from this many class-attention layers (XCiT, X-ViT);
  // 0: from the CLS rows of the main blocks' self-attention (ViT), or none (pixels).
  int64_t class_attention_layers = 0;
  bool qk_norms = false;              // qk_norms() works: per-block |Q|/|K| maps
  bool unit_queries = false;          // queries normalised per token (|q^| = 1 by design, no k^)
  std::string block_label = "block";  // the main blocks in captions ("XCA", "XNorm")
};

class Backbone : public torch::nn::Module {
 public:
  virtual Probe probe(torch::Tensor images, const ProbeRequest& request) = 0;

  virtual torch::Tensor forward(torch::Tensor images);
  virtual torch::Tensor linear_features(torch::Tensor images, int64_t n_last_blocks,
                                        bool avgpool_patchtokens);
  std::vector<torch::Tensor> block_outputs(torch::Tensor images,
                                           const std::vector<int64_t>& block_indices);
  torch::Tensor patch_tokens(torch::Tensor images);
  torch::Tensor cls_attention(torch::Tensor images, int64_t layer = -1);
  QKNorms qk_norms(torch::Tensor images, int64_t block = -1);

  virtual const std::string& arch() const = 0;
  virtual int64_t embed_dim() const = 0;  // C, the width of forward()'s feature
  virtual int64_t patch_size() const = 0;
  // Channels of the input images; 3 unless the model was built otherwise.
  virtual int64_t in_chans() const { return 3; }
  virtual std::string input_conv_weight() const { return ""; }
  virtual int64_t num_heads() const = 0;
  virtual int64_t num_blocks() const = 0;                    // main blocks (XCiT: XCA blocks)
  virtual int64_t block_prefix_tokens() const { return 0; }  // leading non-patch tokens
  // Token grid (rows, cols) for an H x W input.
  virtual std::pair<int64_t, int64_t> token_grid(int64_t height, int64_t width) const = 0;
  // Forward FLOPs for one H x W image in eval mode, fvcore convention (one multiply-add = 1
  // FLOP), computed analytically from the layer shapes.
  virtual double flops(int64_t height, int64_t width) const = 0;
  // Number of trainable-parameter elements (BN running statistics excluded).
  int64_t num_parameters() const;
  virtual Capabilities capabilities() const { return {}; }
  // What `dino info` prints for this family beyond the fields every backbone has, one
  // "key: value" line each (models/info.h); none by default.
  virtual std::vector<std::string> info_lines() const { return {}; }

  virtual bool supports_token_mask() const { return false; }
  void add_mask_token();
  bool has_mask_token() const { return mask_token_.defined(); }

 protected:
  // tokens (B, N, C) with the rows `mask` (B, N) sets replaced by the mask token; `tokens`
  // itself when `mask` is undefined.
  torch::Tensor apply_token_mask(const torch::Tensor& tokens, const torch::Tensor& mask) const;

 private:
  torch::Tensor mask_token_;
};

// Resolves a possibly negative block/layer index against `count`; UsageError naming `what`
// when out of range.
int64_t resolve_index(int64_t index, int64_t count, const char* what);
// The same for a list; `last` (if given) becomes max(*last, largest resolved index).
std::vector<int64_t> resolve_indices(const std::vector<int64_t>& indices, int64_t count,
                                     const char* what, int64_t* last = nullptr);

}  // namespace xdino::models
