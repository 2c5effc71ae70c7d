// The student and the teacher of a DINO run, built as main_dino.py builds them (docs/dino.md,
// "Networks"): the step (ssl/dino_step.h) trains them, the Trainer saves them.
//
// Contract:
//  - build_networks(options, make_backbone, comm, device) seeds torch with options.seed and
//    draws in main_dino.py's order: student backbone (with options.drop_path_rate), teacher
//    backbone (without), student head, teacher head (its last layer normalised); with iBOT the
//    mask token in both backbones and, with a separate head, the iBOT heads after the DINO
//    heads (so a run without iBOT draws what it always drew). options.pretrained_weights warm-
//    starts the student (ssl/warm_start.h; a file that is not a regular file is a UsageError).
//    Then: both on `device`, the student broadcast from rank 0 (DDP's start), options.replicas
//    > 1 CPU replicas (distributed/replicas.h), every BatchNorm a SyncBatchNorm over every
//    process and replica, the teacher a copy of the student, both in train mode (the teacher
//    keeps batch statistics: main_dino.py never calls eval on it).
//  - check_recipe's refusals (ssl/recipe.h) and iBOT with --use_bn_in_head throw UsageError.
//  - step_comm is what the step's collectives run over: comm, or the replicas' communicator.
#pragma once

#include <functional>
#include <memory>

#include "distributed/communicator.h"
#include "distributed/replicas.h"
#include "models/registry.h"
#include "ssl/dino_options.h"
#include "ssl/head.h"

namespace xdino::ssl {

using BackboneFactory =
    std::function<std::shared_ptr<models::Backbone>(const models::BackboneOptions&)>;

struct DinoNetworks {
  MultiCropWrapper student{nullptr}, teacher{nullptr};
  std::unique_ptr<distributed::ReplicaGroup> replicas;  // null for one replica
  std::shared_ptr<Communicator> step_comm;              // comm, or the replicas' (BatchNorm, loss)
  bool teacher_ddp_prefix = true;  // the teacher's checkpoint keys carry "module."

  int replica_count() const { return replicas ? replicas->count() : 1; }
};

DinoNetworks build_networks(const DinoOptions& options, const BackboneFactory& make_backbone,
                            const std::shared_ptr<Communicator>& comm, const torch::Device& device);

}  // namespace xdino::ssl
