// The work of one DINO training step, counted once, for every MFU figure the project quotes
// (docs/flops.md: the count, checked against a per-layer count of XCiT-S12/16 done by hand).
//
// Contract:
//  - dino_step_flops(backbone, head, crops, batch) counts the FLOPs (one multiply-add = 2 FLOPs)
//    of the matrix products and convolutions of one step over `batch` images:
//      student forward: the backbone on 2 global crops and local_crops_number local crops,
//                       and the head on each crop's feature;
//      teacher forward: the backbone and the head on the 2 global crops;
//      student backward: 2x the student forward (the gradients of the inputs and of the
//                       weights of every product; the first conv's input gradient, which
//                       autograd skips, is 0.1% of it at XCiT-S/16 sizes and is left in).
//    The backbone's forward is its own count, Backbone::flops (models/, per module, fvcore's
//    convention of one multiply-add = 1, doubled here); the head's is head_macs. Elementwise
//    work (norms, softmax, the loss, the optimiser, the EMA) is not counted: it is bound by
//    memory, not by the matrix units MFU is read against.
//  - head_macs(head): multiply-adds of DINOHead on one feature: the MLP's Linear layers (1 or
//    nlayers of them) and the weight-normalised last layer, bottleneck_dim x out_dim.
//  - Pure arithmetic on the options; nothing runs. head.in_dim must be the backbone's width.
#pragma once

#include <cstdint>

#include "core/crop_sizes.h"
#include "models/backbone.h"
#include "ssl/head.h"

namespace xdino::ssl {

struct StepFlops {
  double student_forward = 0, teacher_forward = 0, student_backward = 0;
  int64_t batch = 0;
  double total() const { return student_forward + teacher_forward + student_backward; }
  double per_image() const { return batch > 0 ? total() / static_cast<double>(batch) : 0.0; }
};

double head_macs(const DINOHeadOptions& head);

StepFlops dino_step_flops(const models::Backbone& backbone, const DINOHeadOptions& head,
                          const CropSizes& crops, int64_t batch);

}  // namespace xdino::ssl
