// Module state dicts with PyTorch's key order and prefixes, and non-strict loading.
//
// Contract:
//  - state_dict(module, prefix): every parameter and buffer as prefix + dotted name, ordered as
//    torch.nn.Module.state_dict() orders them (per module in pre-order: its own parameters,
//    then its own buffers, then its children). Values are detached tensors moved to the CPU
//    (no copy when already there).
//  - load_state_dict(module, dict, strict): copies every matching entry into the module,
//    after removing a leading "module." from the file's keys when every key has one and the
//    module's do not (DDP checkpoints into a bare model). A shape mismatch always throws
//    xdino::Error naming the key and both shapes (PyTorch does too, even when not strict);
//    missing and unexpected keys throw when strict, else are returned for the caller to report.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "ssl/ivalue_util.h"

namespace xdino::ssl {

IDict state_dict(const torch::nn::Module& module, const std::string& prefix = "");

struct LoadReport {
  std::vector<std::string> missing;     // in the module, not in the file
  std::vector<std::string> unexpected;  // in the file, not in the module
  std::string summary() const;          // "all keys matched" or the first few of each
};

LoadReport load_state_dict(torch::nn::Module& module, const IDict& dict, bool strict,
                           const std::string& what);

}  // namespace xdino::ssl
