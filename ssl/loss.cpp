#include "ssl/loss.h"

#include <cmath>
#include <limits>

#include "core/check.h"
#include "ssl/sinkhorn_knopp.h"
#include "train/schedules.h"

namespace xdino::ssl {

std::vector<double> teacher_temp_schedule(double warmup_temp, double final_temp,
                                          int64_t warmup_epochs, int64_t epochs) {
  XDINO_CHECK_ARG(warmup_epochs >= 0 && warmup_epochs <= epochs, "warmup_teacher_temp_epochs (",
                  warmup_epochs, ") must be in [0, epochs=", epochs, "]");
  std::vector<double> out = train::linspace(warmup_temp, final_temp, warmup_epochs);
  out.resize(static_cast<size_t>(epochs), final_temp);
  return out;
}

DINOLossImpl::DINOLossImpl(const DINOLossOptions& o, std::shared_ptr<Communicator> comm)
    : options_(o),
      comm_(comm ? std::move(comm) : local_communicator()),
      teacher_temps_(teacher_temp_schedule(o.warmup_teacher_temp, o.teacher_temp,
                                           o.warmup_teacher_temp_epochs, o.epochs)) {
  XDINO_CHECK_ARG(o.ncrops >= 2, "DINO needs at least the 2 global crops, got ncrops=", o.ncrops);
  XDINO_CHECK_ARG(o.out_dim > 0, "out_dim must be positive, got ", o.out_dim);
  center = register_buffer("center", torch::zeros({1, o.out_dim}));
}

void DINOLossImpl::set_epoch(int64_t epoch, const torch::Device& device) {
  const double temp = teacher_temp(epoch);
  if (!temp_.defined() || temp_.device() != device) {
    temp_ = torch::empty({}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    temp_epoch_ = -1;
  }
  if (temp_epoch_ != epoch) temp_.fill_(temp);  // a kernel on a GPU: no wait for the host
  temp_epoch_ = epoch;
}

double DINOLossImpl::teacher_temp(int64_t epoch) const {
  XDINO_CHECK(epoch >= 0 && epoch < static_cast<int64_t>(teacher_temps_.size()), "epoch ", epoch,
              " is outside the teacher-temperature schedule of ", teacher_temps_.size(), " epochs");
  return teacher_temps_[static_cast<size_t>(epoch)];
}

torch::Tensor DINOLossImpl::forward(const torch::Tensor& student, const torch::Tensor& teacher,
                                    int64_t epoch) {
  CenterSums sums;
  auto loss = forward_micro(student, teacher, epoch, sums);
  update_center(sums);
  return loss;
}

torch::Tensor DINOLossImpl::forward_micro(const torch::Tensor& student,
                                          const torch::Tensor& teacher, int64_t epoch,
                                          CenterSums& sums) {
  const int64_t K = options_.out_dim, ncrops = options_.ncrops;
  XDINO_CHECK(teacher.dim() == 2 && teacher.size(1) == K && teacher.size(0) % 2 == 0,
              "teacher output must be (2B, ", K, "), got ", teacher.sizes());
  const int64_t B = teacher.size(0) / 2;
  XDINO_CHECK(student.dim() == 2 && student.size(0) == ncrops * B && student.size(1) == K,
              "student output must be (", ncrops, "*", B, ", ", K, ") for teacher output ",
              teacher.sizes(), ", got ", student.sizes());
  const double temp = teacher_temp(epoch);

  // As under autocast: the division happens in the input dtype, log_softmax in fp32.
  const auto log_s = torch::log_softmax((student / options_.student_temp).to(torch::kFloat), -1)
                         .view({ncrops, B, K});
  torch::Tensor p, log_p;
  {
    torch::NoGradGuard no_grad;
    if (options_.centering == Centering::kSinkhornKnopp) {
      const double rows = static_cast<double>(2 * B * comm_->world_size());
      p = sinkhorn_knopp(teacher, temp, rows, options_.sinkhorn_knopp_iterations, *comm_);
      // An underflowed 0 has no log: its term in the entropy is 0 either way.
      log_p = torch::log(p.clamp_min(std::numeric_limits<float>::min()));
      p = p.view({2, B, K});
    } else {
      const auto centred = teacher.to(torch::kFloat) - center;
      const bool on_device = temp_epoch_ == epoch && temp_.device() == teacher.device();
      const auto logits = on_device ? centred / temp_ : centred / temp;
      log_p = torch::log_softmax(logits, -1);
      p = log_p.exp().view({2, B, K});
    }
  }

  // sum_q sum_{v != q} <p_q, log_s_v>: crop 0 meets p_1, crop 1 meets p_0, every local crop
  // meets p_0 + p_1. Equal to the official 18 separate pair means, with fewer passes over K.
  auto cross = (p[1] * log_s[0]).sum() + (p[0] * log_s[1]).sum();
  if (ncrops > 2) cross = cross + ((p[0] + p[1]) * log_s.slice(0, 2).sum(0)).sum();
  const int64_t n_terms = 2 * (ncrops - 1);
  auto loss = -cross / static_cast<double>(n_terms * B);

  {
    // What the center update and the statistics need: the raw teacher rows' sum (center),
    // the softmax rows' sum and the summed row entropies.
    torch::NoGradGuard no_grad;
    auto part = torch::cat({teacher.to(torch::kFloat).sum(0), p.view({2 * B, K}).sum(0),
                            -(p.view({2 * B, K}) * log_p).sum().view({1})});
    sums.values = sums.values.defined() ? sums.values + part : part;
    sums.rows += 2 * B;
  }
  return loss;
}

void DINOLossImpl::update_center(CenterSums& sums) {
  torch::NoGradGuard no_grad;
  const int64_t K = options_.out_dim;
  XDINO_CHECK(sums.values.defined() && sums.rows > 0,
              "DINOLoss::update_center needs the sums of at least one forward_micro");
  // One all-reduce: statistics of every micro-batch, process and replica since the last update.
  auto all = sums.values;
  comm_->all_reduce_sum(all);
  const double rows = static_cast<double>(sums.rows * comm_->world_size());
  sums = CenterSums{};
  // Replicas share this module: one writes (the values are the same on all of them).
  if (!comm_->owns_module_state()) return;
  const auto batch_center = all.narrow(0, 0, K).view({1, K}) / rows;
  const auto mean_p = all.narrow(0, K, K) / rows;
  stats_.teacher_entropy = all[2 * K] / rows;
  stats_.kl_uniform = std::log(static_cast<double>(K)) + torch::xlogy(mean_p, mean_p).sum();
  if (options_.centering != Centering::kCentering) return;
  const double m = options_.center_momentum;
  center.copy_(center * m + batch_center * (1.0 - m));
}

}  // namespace xdino::ssl
