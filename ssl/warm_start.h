// Continued pretraining: the student starts from a file's weights, and the teacher from the
// student (`dino train --pretrained_weights F --checkpoint_key K`, docs/dino.md "Starting from
// weights").
//
// Contract:
//  - warm_start(student, weights): `weights` is what models::read_pretrained(F, K) returns
//    (key K's sub-dict, or a flat file of weights). The backbone takes every key, once
//    "module." and "backbone." are removed, strictly, through models::load_pretrained: every
//    backbone tensor must be in the file with its shape; a classifier head is dropped as the
//    official loader drops it. When the file also holds a DINO head (head.mlp.*,
//    head.last_layer.*, i.e. a network of a DINO training checkpoint), the head takes it,
//    strictly too; otherwise the head keeps its fresh initialisation.
//  - Returns one line for the log saying what was loaded. Throws xdino::Error naming the file
//    and the first offending key (and both shapes) on a mismatch; the Trainer under
//    construction is then never built, so nothing reaches the output folder.
//  - The caller copies the student into the teacher afterwards (init_teacher), so both start
//    equal to the file, bit for bit.
#pragma once

#include <string>

#include "models/weights.h"
#include "ssl/head.h"

namespace xdino::ssl {

std::string warm_start(MultiCropWrapperImpl& student, const models::PretrainedWeights& weights);

}  // namespace xdino::ssl
