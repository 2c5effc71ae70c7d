// A module's tensors by name, in PyTorch's state_dict() order: the one alias every reader and
// writer of weights in models/ shares (models/weights.h builds and loads them,
// models/timm_names.h renames them). The same type as core/safetensors.h's TensorDict.
#pragma once

#include <torch/torch.h>

#include <string>

namespace xdino::models {

using StateDict = torch::OrderedDict<std::string, torch::Tensor>;

}  // namespace xdino::models
