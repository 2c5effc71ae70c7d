#include "models/resnet.h"

#include "core/check.h"

namespace xdino::models {

namespace {

using torch::Tensor;
namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding,
                int64_t groups = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel)
                        .stride(stride)
                        .padding(padding)
                        .groups(groups)
                        .bias(false));
}

// A Bottleneck's inner width, as torchvision's: int(planes * (width_per_group / 64)) * groups.
int64_t bottleneck_width(int64_t planes, int64_t width_per_group, int64_t groups) {
  return planes * width_per_group / 64 * groups;
}

// torchvision's init: conv weights kaiming-normal with fan_out and the ReLU gain (BatchNorm
// starts at weight 1, bias 0 by construction).
void init_convs(nn::Module& root) {
  torch::NoGradGuard no_grad;
  for (const auto& module : root.modules(/*include_self=*/false))
    if (auto* c = dynamic_cast<nn::Conv2dImpl*>(module.get()))
      nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
}

int64_t halve_up(int64_t n) { return (n + 1) / 2; }

}  // namespace

const std::vector<ResNetConfig>& resnet_variants() {
  static const std::vector<ResNetConfig> variants = {
      {"resnet18", "ResNet-18", false, {2, 2, 2, 2}, 64, 1, 0},
      {"resnet34", "ResNet-34", false, {3, 4, 6, 3}, 64, 1, 0},
      {"resnet50", "ResNet-50", true, {3, 4, 6, 3}, 64, 1, 0},
      {"resnet101", "ResNet-101", true, {3, 4, 23, 3}, 64, 1, 0},
      {"resnet152", "ResNet-152", true, {3, 8, 36, 3}, 64, 1, 0},
      {"wide_resnet50_2", "WRN-50-2", true, {3, 4, 6, 3}, 128, 1, 0},
      {"wide_resnet101_2", "WRN-101-2", true, {3, 4, 23, 3}, 128, 1, 0},
      {"resnext50_32x4d", "ResNeXt-50 32x4d", true, {3, 4, 6, 3}, 4, 32, 0},
      {"resnext101_32x8d", "ResNeXt-101 32x8d", true, {3, 4, 23, 3}, 8, 32, 0},
      {"resnext101_64x4d", "ResNeXt-101 64x4d", true, {3, 4, 23, 3}, 4, 64, 0},
  };
  return variants;
}

std::optional<ResNetConfig> find_resnet_variant(const std::string& name) {
  for (const ResNetConfig& c : resnet_variants())
    if (c.name == name) return c;
  return std::nullopt;
}

ResidualBlockImpl::ResidualBlockImpl(const ResidualBlockOptions& o) : options(o) {
  const int64_t in = o.in_channels(), planes = o.planes(), stride = o.stride();
  if (o.bottleneck()) {
    const int64_t width = bottleneck_width(planes, o.width_per_group(), o.groups());
    conv1 = register_module("conv1", conv(in, width, 1, 1, 0));
    bn1 = register_module("bn1", BatchNorm(width));
    conv2 = register_module("conv2", conv(width, width, 3, stride, 1, o.groups()));
    bn2 = register_module("bn2", BatchNorm(width));
    conv3 = register_module("conv3", conv(width, planes * 4, 1, 1, 0));
    bn3 = register_module("bn3", BatchNorm(planes * 4));
  } else {
    conv1 = register_module("conv1", conv(in, planes, 3, stride, 1));
    bn1 = register_module("bn1", BatchNorm(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2 = register_module("bn2", BatchNorm(planes));
  }
  if (stride != 1 || in != out_channels()) {
    downsample = register_module(
        "downsample",
        nn::Sequential(conv(in, out_channels(), 1, stride, 0), BatchNorm(out_channels())));
  }
}

int64_t ResidualBlockImpl::out_channels() const {
  return options.planes() * (options.bottleneck() ? 4 : 1);
}

Tensor ResidualBlockImpl::forward(const Tensor& x) {
  Tensor y = torch::relu(bn1->forward(conv1->forward(x)));
  y = bn2->forward(conv2->forward(y));
  if (options.bottleneck()) y = bn3->forward(conv3->forward(torch::relu(y)));
  const Tensor identity = downsample ? downsample->forward(x) : x;
  return torch::relu(y + identity);
}

ResNet::ResNet(ResNetConfig config) : config_(std::move(config)) {
  XDINO_CHECK_ARG(config_.layers.size() == 4, config_.name, ": a ResNet has 4 stages, got ",
                  config_.layers.size());
  XDINO_CHECK_ARG(config_.num_classes >= 0, "num_classes must be >= 0, got ", config_.num_classes);
  XDINO_CHECK_ARG(config_.in_chans >= 1, "--in_chans must be at least 1, got ", config_.in_chans);
  conv1_ = register_module("conv1", conv(config_.in_chans, 64, 7, 2, 3));
  bn1_ = register_module("bn1", BatchNorm(64));
  int64_t in = 64;
  for (int64_t s = 0; s < 4; ++s) {
    XDINO_CHECK_ARG(config_.layers[s] >= 1, config_.name, ": every stage needs a block");
    nn::ModuleList list;
    std::vector<ResidualBlock> blocks;
    for (int64_t b = 0; b < config_.layers[s]; ++b) {
      ResidualBlock block(ResidualBlockOptions(in, int64_t{64} << s)
                              .stride(s > 0 && b == 0 ? 2 : 1)
                              .bottleneck(config_.bottleneck)
                              .width_per_group(config_.width_per_group)
                              .groups(config_.groups));
      in = block->out_channels();
      list->push_back(block);
      blocks.push_back(block);
    }
    register_module("layer" + std::to_string(s + 1), list);
    stages_.push_back(std::move(blocks));
  }
  feature_dim_ = in;
  if (config_.num_classes > 0) fc_ = register_module("fc", nn::Linear(in, config_.num_classes));
  init_convs(*this);
}

int64_t ResNet::num_blocks() const {
  int64_t n = 0;
  for (int64_t count : config_.layers) n += count;
  return n;
}

std::pair<int64_t, int64_t> ResNet::token_grid(int64_t height, int64_t width) const {
  for (int i = 0; i < 5; ++i) {  // stem conv, max pool, layer2..layer4
    height = halve_up(height);
    width = halve_up(width);
  }
  return {height, width};
}

Probe ResNet::probe(Tensor images, const ProbeRequest& request) {
  XDINO_CHECK_ARG(request.blocks.empty() && !request.patch_tokens && !request.cls_attention_layer &&
                      !request.qk_block,
                  config_.name,
                  " is a convolutional network: it has no block tokens, patch tokens or "
                  "attention maps to show");
  XDINO_CHECK(images.dim() == 4 && images.size(1) == config_.in_chans, config_.name,
              " expects images (B, ", config_.in_chans, ", H, W), got ", images.sizes());
  Tensor x = torch::relu(bn1_->forward(conv1_->forward(images)));
  x = torch::max_pool2d(x, /*kernel_size=*/{3}, /*stride=*/{2}, /*padding=*/{1});
  for (auto& stage : stages_)
    for (auto& block : stage) x = block->forward(x);
  x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
  if (fc_) x = fc_->forward(x);
  Probe out;
  out.feature = x;
  return out;
}

double resnet_flops(const ResNetConfig& c, int64_t height, int64_t width) {
  // conv + eval BN over an output of `channels` x h x w: weight elements times output
  // pixels, plus 2 per BN output element.
  const auto conv_bn = [](double in, double out, double kernel, int64_t h, int64_t w,
                          double groups = 1) {
    const double pixels = static_cast<double>(h * w);
    return out * in / groups * kernel * kernel * pixels + 2 * out * pixels;
  };
  int64_t h = halve_up(height), w = halve_up(width);
  double flops = conv_bn(static_cast<double>(c.in_chans), 64, 7, h, w);
  h = halve_up(h);  // max pool
  w = halve_up(w);
  double in = 64;
  for (int64_t s = 0; s < 4; ++s) {
    const double planes = static_cast<double>(int64_t{64} << s);
    for (int64_t b = 0; b < c.layers[s]; ++b) {
      const bool strided = s > 0 && b == 0;
      const int64_t h_in = h, w_in = w;
      if (strided) {
        h = halve_up(h);
        w = halve_up(w);
      }
      double out;
      if (c.bottleneck) {
        const double inner =
            static_cast<double>(bottleneck_width(int64_t{64} << s, c.width_per_group, c.groups));
        out = planes * 4;
        flops += conv_bn(in, inner, 1, h_in, w_in) +
                 conv_bn(inner, inner, 3, h, w, static_cast<double>(c.groups)) +
                 conv_bn(inner, out, 1, h, w);
      } else {
        out = planes;
        flops += conv_bn(in, out, 3, h, w) + conv_bn(out, out, 3, h, w);
      }
      if (strided || in != out) flops += conv_bn(in, out, 1, h, w);
      in = out;
    }
  }
  flops += in * static_cast<double>(h * w);  // adaptive average pooling
  flops += in * static_cast<double>(c.num_classes);
  return flops;
}

double ResNet::flops(int64_t height, int64_t width) const {
  return resnet_flops(config_, height, width);
}

}  // namespace xdino::models
