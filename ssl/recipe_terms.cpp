#include "ssl/recipe_terms.h"

#include "core/check.h"
#include "ssl/koleo.h"

namespace xdino::ssl {

// Where this file writes each term (ssl/recipe.h, kLossTerms); a name not in the table fails here.
constexpr size_t kKoleo = term_index("koleo"), kIbot = term_index("ibot");
static_assert(kKoleo < kTermCount && kIbot < kTermCount, "a term missing from kLossTerms");

RecipeTerms::RecipeTerms(const RecipeOptions& recipe, std::pair<int64_t, int64_t> grid,
                         double max_patches, int64_t ibot_out_dim,
                         std::shared_ptr<Communicator> step_comm,
                         std::shared_ptr<Communicator> process_comm, const torch::Device& device)
    : recipe_(recipe),
      comm_(std::move(step_comm)),
      process_comm_(std::move(process_comm)),
      device_(device) {
  if (!recipe_.ibot()) return;
  BlockMaskOptions mo;
  mo.height = grid.first;
  mo.width = grid.second;
  mo.max_num_patches = max_patches;
  generator_ = std::make_unique<BlockMaskGenerator>(mo);
  IbotLossOptions lo;
  lo.out_dim = ibot_out_dim;
  lo.centering = recipe_.centering_kind();
  lo.sinkhorn_knopp_iterations = recipe_.sinkhorn_knopp_iterations;
  ibot_loss_ = iBOTPatchLoss(lo, comm_);
  ibot_loss_->to(device_);
}

BatchMasks RecipeTerms::draw_masks(int64_t seed, int64_t iteration, int64_t micro_batch,
                                   int64_t rank, int64_t images) const {
  if (!generator_) return {};
  MaskRandom random(seed, iteration, micro_batch, rank);
  const auto& r = recipe_.mask_ratio_min_max;
  return draw_batch_masks(images, *generator_, r[0], r[1], recipe_.mask_sample_probability, random);
}

BatchMasks RecipeTerms::share(const BatchMasks& masks, int64_t replica, int64_t replicas,
                              int64_t samples) const {
  if (!masks.masks.defined()) return {};
  torch::Tensor rows = masks.masks;
  if (replicas > 1) {
    const int64_t n = rows.size(1);
    rows = rows.view({2, -1, n}).narrow(1, replica * samples, samples).reshape({2 * samples, n});
  }
  BatchMasks mine = replicas > 1 ? batch_masks(rows) : masks;
  // To a GPU from pinned memory, without waiting: a pageable copy would sync the step.
  const auto to_device = [&](const torch::Tensor& t) {
    return device_.is_cuda() ? t.pin_memory().to(device_, /*non_blocking=*/true) : t;
  };
  mine.masks = to_device(mine.masks);
  mine.indices = to_device(mine.indices);
  mine.weights = to_device(mine.weights);
  return mine;
}

RecipeLosses RecipeTerms::terms(const CropOutputs& student, const CropOutputs& teacher,
                                const BatchMasks& masks, double teacher_temp,
                                IbotCenterSums& sums) {
  RecipeLosses out;
  if (recipe_.koleo()) {
    const torch::Tensor& cls = student.global_features;
    XDINO_CHECK(cls.defined() && cls.size(0) % 2 == 0, "KoLeo needs the global CLS features");
    const int64_t b = cls.size(0) / 2;
    out[kKoleo] = (koleo_of_view(cls.narrow(0, 0, b)) + koleo_of_view(cls.narrow(0, b, b))) *
                  recipe_.koleo_loss_weight;
  }
  if (recipe_.ibot()) {
    torch::Tensor total = torch::full({1}, static_cast<double>(masks.count()),
                                      torch::TensorOptions(torch::kFloat).device(device_));
    // Sinkhorn-Knopp's batch is every process's masked patches (dinov2 all-reduces them); the
    // count stays on the device. With none anywhere, every process has (0, K) rows, and the
    // targets are (0, K); centering still adds this process's (empty) sums, as its
    // all-reduce needs every process.
    if (recipe_.centering_kind() == Centering::kSinkhornKnopp) comm_->all_reduce_sum(total);
    const torch::Tensor targets =
        ibot_loss_->targets_micro(teacher.patch_logits, teacher_temp, total, sums);
    out[kIbot] = ibot_loss_->forward_masked(student.patch_logits, targets, masks.weights,
                                            masks.masks.size(0)) *
                 recipe_.ibot_loss_weight;
  }
  return out;
}

// KoLeo of one view over the process's batch: this replica's rows live, the others' as
// constants, in the one-replica order (replica after replica). Every replica computes the
// same value; its backward gives the derivative for its own rows alone, and all of them add
// up to the one-replica gradient. The step divides each replica's objective by the replica
// count R (trainer.cpp), so the gradient is carried R times: value + (R - 1) * (value -
// value.detach()) is the value itself, with R times its gradient.
torch::Tensor RecipeTerms::koleo_of_view(const torch::Tensor& rows) const {
  const int replicas = process_comm_ ? process_comm_->world_size() : 1;
  if (replicas == 1) return koleo_loss(rows);
  std::vector<torch::Tensor> all = process_comm_->all_gather(rows.detach());
  all[static_cast<size_t>(process_comm_->rank())] = rows;
  const torch::Tensor k = koleo_loss(torch::cat(all));
  return k + (k - k.detach()) * static_cast<double>(replicas - 1);
}

void RecipeTerms::update_center(IbotCenterSums& sums) {
  if (recipe_.ibot() && recipe_.centering_kind() == Centering::kCentering)
    ibot_loss_->update_center(sums);
}

}  // namespace xdino::ssl
