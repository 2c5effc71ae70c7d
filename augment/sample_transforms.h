// The project's transforms as loader SampleTransforms (sample_transform.h).
//
// Contract:
//  - Each returns a writing SampleTransform: the views go straight into the batch tensors'
//    slots (no per-sample allocation or copy). The transform object is shared, immutable,
//    and thread-safe, so one SampleTransform serves every loader thread.
//  - multi_crop_transform: MultiCropAugmentation's views in its order [global 1, global 2,
//    local 1..L], (C, S, S) each. eval_transform: one (C, crop, crop) view; it draws nothing
//    from the Rng. linear_train_transform: one (C, crop, crop) view. C is the options'
//    normalization.channels: 3, or 1 for grayscale (augment/ops/tensor.h).
//  - Bad options throw xdino::UsageError (from the transforms' constructors).
#pragma once

#include "augment/data/sample_transform.h"
#include "augment/eval_transforms.h"
#include "augment/multicrop.h"

namespace xdino::augment {

SampleTransform multi_crop_transform(const MultiCropOptions& options);
SampleTransform eval_transform(const EvalTransformOptions& options);
SampleTransform linear_train_transform(const LinearTrainOptions& options);

}  // namespace xdino::augment
