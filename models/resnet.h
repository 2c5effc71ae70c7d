// torchvision's ResNets as the official DINO scripts build them (main_dino.py, eval_knn.py,
// eval_linear.py: `torchvision_models[arch]()` with `fc` replaced by an identity):
// resnet18/34/50/101/152, wide_resnet50_2/wide_resnet101_2 and resnext50_32x4d,
// resnext101_32x8d, resnext101_64x4d (docs/architecture.md, "ResNet").
//
// Contract:
//  - Built exactly as torchvision (>= 0.13, checked against Debian's 0.14.1): a 7x7 stride-2
//    stem conv (no bias), BN, ReLU, 3x3 stride-2 max pool, four stages of BasicBlocks
//    (resnet18/34) or Bottlenecks (the others), the stride of a stage's first block on its
//    3x3 conv, a 1x1 conv + BN `downsample` branch where the shape changes, global average
//    pooling. wide_* double the Bottleneck's inner width; resnext<depth>_<G>x<W>d make it
//    G x W channels, the 3x3 conv grouped G ways.
//  - Keys equal torchvision's state_dict keys, in its order: conv1.weight, bn1.*,
//    layer{1..4}.i.{conv1,bn1,conv2,bn2[,conv3,bn3]}.*, layer{1..4}.0.downsample.{0,1}.*,
//    then fc.{weight,bias} only when num_classes > 0. With num_classes == 0 there is no fc
//    (DINO's nn.Identity): forward gives the (B, C) average-pooled feature, C = 512 for
//    resnet18/34 and 2048 for the others. Every BatchNorm is models::BatchNorm, so
//    set_batch_norm_communicator makes it a SyncBatchNorm (main_dino.py's
//    convert_sync_batchnorm).
//  - Init as torchvision: conv weights kaiming-normal (fan_out, ReLU gain), BN weight 1 and
//    bias 0, no zero-init of the last BN of a block; fc keeps LibTorch's Linear default.
//  - Input (B, in_chans, H, W) (conv1 takes in_chans channels, torchvision's 3 by default), any
//    H, W >= 1 (every stride-2 stage rounds up). float32, float64,
//    bfloat16 and autocast. drop_path_rate is ignored (main_dino.py builds torchvision models
//    without it).
//  - probe(): the feature only; blocks, patch tokens and attention maps throw UsageError
//    (capabilities() declares none). patch_size() is the output stride 32 and token_grid()
//    the final feature map, ceil(H/32) x ceil(W/32); num_heads() is 0, num_blocks() the
//    number of residual blocks. linear_features is forward (eval_linear.py feeds the
//    average-pooled feature; n_last_blocks and avgpool_patchtokens do not apply).
//  - resnet_flops: eval-mode forward in fvcore's convention (convs and fc: one multiply-add =
//    1; eval BatchNorm 2 per element; adaptive average pooling 1 per input element; ReLU,
//    max pool and the residual add are free). resnet50 at 224: 4.11e9.
//  - Unknown names: find_resnet_variant returns nullopt.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/backbone.h"
#include "models/batch_norm.h"

namespace xdino::models {

struct ResNetConfig {
  std::string name = "resnet50";
  std::string paper_name = "ResNet-50";
  bool bottleneck = true;                      // Bottleneck (x4 expansion) or BasicBlock
  std::vector<int64_t> layers = {3, 4, 6, 3};  // residual blocks per stage
  int64_t width_per_group = 64;                // 128: wide_resnet*_2; W of resnext*_GxWd
  int64_t groups = 1;                          // G of resnext*_GxWd: the 3x3 conv's groups
  int64_t num_classes = 0;                     // 0: no fc, forward gives the pooled feature
  int64_t in_chans = 3;                        // channels of the input images (conv1)
};

// resnet18, resnet34, resnet50, resnet101, resnet152, wide_resnet50_2, wide_resnet101_2,
// resnext50_32x4d, resnext101_32x8d, resnext101_64x4d.
const std::vector<ResNetConfig>& resnet_variants();
std::optional<ResNetConfig> find_resnet_variant(const std::string& name);

double resnet_flops(const ResNetConfig& config, int64_t height, int64_t width);

// One residual block: the torchvision BasicBlock or Bottleneck. x (B, Cin, H, W) ->
// (B, planes * expansion, ceil(H / stride), ceil(W / stride)).
struct ResidualBlockOptions {
  ResidualBlockOptions(int64_t in_channels, int64_t planes)
      : in_channels_(in_channels), planes_(planes) {}
  TORCH_ARG(int64_t, in_channels);
  TORCH_ARG(int64_t, planes);                // output width before the expansion
  TORCH_ARG(int64_t, stride) = 1;            // on conv1 (BasicBlock) or conv2 (Bottleneck)
  TORCH_ARG(bool, bottleneck) = false;       // Bottleneck: 1x1, 3x3, 1x1 and expansion 4
  TORCH_ARG(int64_t, width_per_group) = 64;  // Bottleneck inner width = planes * this / 64
  TORCH_ARG(int64_t, groups) = 1;            //   ... times this; the 3x3 conv's groups
};

struct ResidualBlockImpl : torch::nn::Module {
  explicit ResidualBlockImpl(const ResidualBlockOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  int64_t out_channels() const;

  ResidualBlockOptions options;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};  // conv3: Bottleneck only
  BatchNorm bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  torch::nn::Sequential downsample{nullptr};  // [conv1x1, BatchNorm] or none
};
TORCH_MODULE(ResidualBlock);

class ResNet : public Backbone {
 public:
  explicit ResNet(ResNetConfig config);

  Probe probe(torch::Tensor images, const ProbeRequest& request) override;

  const std::string& arch() const override { return config_.name; }
  int64_t embed_dim() const override { return feature_dim_; }
  int64_t patch_size() const override { return 32; }
  int64_t in_chans() const override { return config_.in_chans; }
  std::string input_conv_weight() const override { return "conv1.weight"; }
  int64_t num_heads() const override { return 0; }
  int64_t num_blocks() const override;
  std::pair<int64_t, int64_t> token_grid(int64_t height, int64_t width) const override;
  double flops(int64_t height, int64_t width) const override;
  const ResNetConfig& config() const { return config_; }

 private:
  ResNetConfig config_;
  int64_t feature_dim_ = 0;
  torch::nn::Conv2d conv1_{nullptr};
  BatchNorm bn1_{nullptr};
  std::vector<std::vector<ResidualBlock>> stages_;  // layer1..layer4
  torch::nn::Linear fc_{nullptr};                   // num_classes > 0 only
};

}  // namespace xdino::models
