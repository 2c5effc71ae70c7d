#include "ssl/step_flops.h"

#include "core/check.h"

namespace xdino::ssl {

double head_macs(const DINOHeadOptions& h) {
  XDINO_CHECK_ARG(h.nlayers >= 1, "the head needs nlayers >= 1, got ", h.nlayers);
  double mlp = 0;
  if (h.nlayers == 1) {
    mlp = static_cast<double>(h.in_dim) * h.bottleneck_dim;
  } else {
    mlp = static_cast<double>(h.in_dim) * h.hidden_dim +
          static_cast<double>(h.nlayers - 2) * h.hidden_dim * h.hidden_dim +
          static_cast<double>(h.hidden_dim) * h.bottleneck_dim;
  }
  return mlp + static_cast<double>(h.bottleneck_dim) * h.out_dim;
}

StepFlops dino_step_flops(const models::Backbone& backbone, const DINOHeadOptions& head,
                          const CropSizes& crops, int64_t batch) {
  XDINO_CHECK_ARG(head.in_dim == backbone.embed_dim(), "the head's in_dim (", head.in_dim,
                  ") is not the backbone's width (", backbone.embed_dim(), ")");
  const double g = crops.global_crops_size, l = crops.local_crops_size;
  const double global = backbone.flops(static_cast<int64_t>(g), static_cast<int64_t>(g));
  const double local = backbone.flops(static_cast<int64_t>(l), static_cast<int64_t>(l));
  const double h = head_macs(head);
  const double n = static_cast<double>(batch);
  const double locals = static_cast<double>(crops.local_crops_number);
  StepFlops f;
  f.batch = batch;
  // One multiply-add is 2 FLOPs; Backbone::flops counts it as 1.
  f.student_forward = 2 * n * (2 * (global + h) + locals * (local + h));
  f.teacher_forward = 2 * n * 2 * (global + h);
  f.student_backward = 2 * f.student_forward;
  return f;
}

}  // namespace xdino::ssl
