#include "ssl/networks.h"

#include <optional>

#include "core/check.h"
#include "core/log.h"
#include "core/paths.h"
#include "distributed/grad_sync.h"
#include "models/batch_norm.h"
#include "ssl/recipe.h"
#include "ssl/teacher.h"
#include "ssl/warm_start.h"

namespace xdino::ssl {
namespace {

// The backbones' options, and the warm start's weights when there are some: a ViT takes the
// file's position-table grid (forward() interpolates it to any crop).
models::BackboneOptions backbone_options(const DinoOptions& o,
                                         std::optional<models::PretrainedWeights>& pretrained) {
  models::BackboneOptions bo;
  bo.patch_size = o.patch_size;
  bo.img_size = o.global_crops_size;
  bo.in_chans = o.in_chans;
  if (!o.pretrained_weights.empty()) {
    // A named pipe or a device would block the read for ever: a regular file only, as the
    // evaluations take it.
    const std::string problem = file_problem(o.pretrained_weights);
    XDINO_CHECK_ARG(problem.empty(), "weights file ", quote(o.pretrained_weights), " ", problem,
                    " (--pretrained_weights)");
    pretrained = models::read_pretrained(o.pretrained_weights, o.checkpoint_key);
    bo.img_size = models::position_table_image_size(
        *pretrained, models::patch_size_of(o.arch, o.patch_size), bo.img_size);
  }
  bo.drop_path_rate = o.drop_path_rate;
  return bo;
}

}  // namespace

DinoNetworks build_networks(const DinoOptions& o, const BackboneFactory& make_backbone,
                            const std::shared_ptr<Communicator>& comm,
                            const torch::Device& device) {
  // main_dino.py order: seed, student backbone, teacher backbone, student head, teacher head.
  torch::manual_seed(static_cast<uint64_t>(o.seed));
  std::optional<models::PretrainedWeights> pretrained;
  models::BackboneOptions bo = backbone_options(o, pretrained);
  auto student_backbone = make_backbone(bo);
  bo.drop_path_rate = 0.0;
  auto teacher_backbone = make_backbone(bo);
  const RecipeOptions& recipe = o.recipe;
  check_recipe(recipe, student_backbone->supports_token_mask(), o.arch);
  XDINO_CHECK_ARG(!recipe.ibot() || !o.head.use_bn,
                  "--use_bn_in_head with iBOT would mix the "
                  "masked patches' BatchNorm statistics into the head; use one of them");
  // A student head and the teacher's (its last layer normalised, as main_dino.py's), in that
  // order: the order the random numbers are drawn in.
  const auto head_pair = [&](int64_t out_dim) {
    DINOHeadOptions ho = o.head;
    ho.in_dim = student_backbone->embed_dim();
    ho.out_dim = out_dim;
    DINOHead student_head(ho);
    ho.norm_last_layer = true;
    return std::make_pair(student_head, DINOHead(ho));
  };
  auto [student_head, teacher_head] = head_pair(o.head.out_dim);
  // iBOT: the mask token in both backbones (the teacher's is EMA-updated and never used, as
  // dinov2's), and the separate head, built after the DINO heads.
  DINOHead student_ibot_head{nullptr}, teacher_ibot_head{nullptr};
  if (recipe.ibot()) {
    student_backbone->add_mask_token();
    teacher_backbone->add_mask_token();
    if (recipe.ibot_separate_head)
      std::tie(student_ibot_head, teacher_ibot_head) =
          head_pair(recipe.ibot_out_dim > 0 ? recipe.ibot_out_dim : o.head.out_dim);
  }
  DinoNetworks n;
  n.student = MultiCropWrapper(student_backbone, student_head, student_ibot_head);
  n.teacher = MultiCropWrapper(teacher_backbone, teacher_head, teacher_ibot_head);
  if (pretrained) log::info(warm_start(*n.student, *pretrained));
  n.student->to(device);
  n.teacher->to(device);
  // DDP: every process starts from rank 0's student; SyncBatchNorm in both networks, over
  // every process and replica.
  distributed::broadcast_module(*n.student, *comm);
  if (o.replicas > 1)
    n.replicas = std::make_unique<distributed::ReplicaGroup>(static_cast<int>(o.replicas), comm);
  n.step_comm = n.replicas ? n.replicas->communicator() : comm;
  models::set_batch_norm_communicator(*n.student, n.step_comm);
  models::set_batch_norm_communicator(*n.teacher, n.step_comm);
  init_teacher(*n.student, *n.teacher);
  n.student->train();
  n.teacher->train();  // never eval: batch statistics, own running stats (docs/dino.md, "Networks")
  n.teacher_ddp_prefix = has_batchnorms(*n.student);
  return n;
}

}  // namespace xdino::ssl
