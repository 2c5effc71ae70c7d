// DINOv2's terms of the training step beside DINO's loss (ssl/recipe.h; docs/dino.md, "Beyond
// DINO's recipe"): the iBOT masks of each micro-batch, and the KoLeo and iBOT losses of each
// replica's rows. The trainer (ssl/trainer.cpp) runs the forwards and adds the terms.
//
// Contract:
//  - RecipeTerms(recipe, grid, max_patches, ibot_out_dim, step_comm, process_comm, device) for
//    a recipe with KoLeo or iBOT; `grid` is the global crops' token grid; process_comm joins
//    this process's CPU replicas (ReplicaGroup::process_communicator; null: one replica).
//  - draw_masks(seed, iteration, micro_batch, rank, images): the process's masks for `images`
//    global-crop rows (ssl/masking.h), a pure function of its arguments (a resume draws the
//    same); empty BatchMasks without iBOT.
//  - share(masks, replica, replicas, samples): replica `replica`'s rows of the process's masks
//    (samples per replica, of each of the two views), with its indices and weights, on the
//    device.
//  - terms(student, teacher, masks, temp, sums): the weighted terms, 0-d, undefined when off:
//    koleo = w * sum over the two views of koleo_loss(the student's global CLS features of the
//    view), over the whole process's batch whatever the number of replicas (each replica
//    gathers the others' rows, and its backward carries the gradient of its own rows, so 1,
//    2 or 4 replicas train alike, and the objective is dinov2's per GPU); ibot = w * iBOT's
//    masked-patch loss (ssl/ibot_loss.h) over the replica's 2B global rows, its targets from the
//    teacher's patch logits. Call it outside autocast: both compute in float32. With Sinkhorn-Knopp
//    every replica and process all-reduces its count of masked patches first.
//  - update_center(sums): iBOT's centre, after a step's last micro-batch.
#pragma once

#include <torch/torch.h>

#include <array>
#include <memory>
#include <utility>

#include "distributed/communicator.h"
#include "ssl/head.h"
#include "ssl/ibot_loss.h"
#include "ssl/masking.h"
#include "ssl/recipe.h"

namespace xdino::ssl {

// The recipe's terms at their kLossTerms indices (ssl/recipe.h): weighted; undefined when off.
using RecipeLosses = std::array<torch::Tensor, kTermCount>;

class RecipeTerms {
 public:
  RecipeTerms(const RecipeOptions& recipe, std::pair<int64_t, int64_t> grid, double max_patches,
              int64_t ibot_out_dim, std::shared_ptr<Communicator> step_comm,
              std::shared_ptr<Communicator> process_comm, const torch::Device& device);

  BatchMasks draw_masks(int64_t seed, int64_t iteration, int64_t micro_batch, int64_t rank,
                        int64_t images) const;
  BatchMasks share(const BatchMasks& masks, int64_t replica, int64_t replicas,
                   int64_t samples) const;
  RecipeLosses terms(const CropOutputs& student, const CropOutputs& teacher,
                     const BatchMasks& masks, double teacher_temp, IbotCenterSums& sums);
  void update_center(IbotCenterSums& sums);

  // null without iBOT (the checkpoint's ibot_patch_loss)
  iBOTPatchLoss& ibot_loss() { return ibot_loss_; }

 private:
  torch::Tensor koleo_of_view(const torch::Tensor& rows) const;

  RecipeOptions recipe_;
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Communicator> process_comm_;
  torch::Device device_;
  std::unique_ptr<BlockMaskGenerator> generator_;
  iBOTPatchLoss ibot_loss_{nullptr};
};

}  // namespace xdino::ssl
