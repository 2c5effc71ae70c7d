// What the evaluation subcommands (features, knn, linear) share on the command-line side.
//
// Contract:
//  - declare_backbone_flags() binds the official model flags (--arch, --patch_size,
//    --pretrained_weights, --checkpoint_key) and our --image_size to a BackboneSpec.
//  - start_session(options) reads the process layout from the launcher's environment
//    (launch/rendezvous.h), connects the processes (one process: no networking) and picks the
//    device (the local GPU when CUDA is available). It prints the BLAS in use on rank 0.
//  - write_config() creates output_dir and writes the effective flags to
//    <output_dir>/config.ini atomically, on rank 0 only.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "core/dist.h"
#include "eval/extract.h"
#include "eval/frozen_backbone.h"
#include "launch/flags.h"
#include "launch/rendezvous.h"

namespace xdino::launch {

void declare_backbone_flags(Flags& flags, eval::BackboneSpec& spec);
// --max_train_samples, --max_val_samples (ours): class-balanced subsets for quick runs.
void declare_subset_flags(Flags& flags, eval::EvalSubset& subset);

struct EvalSession {
  std::shared_ptr<Communicator> comm;
  torch::Device device = torch::kCPU;
};

EvalSession start_session(const DistOptions& options);

void write_config(const Flags& flags, const std::string& output_dir, const Communicator& comm);

}  // namespace xdino::launch
