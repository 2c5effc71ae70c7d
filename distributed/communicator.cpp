#include "distributed/communicator.h"

namespace xdino {

std::unique_ptr<PendingWork> Communicator::all_reduce_sum_async(torch::Tensor t) {
  struct Done final : PendingWork {
    void wait() override {}
  };
  all_reduce_sum(t);
  return std::make_unique<Done>();
}

namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  using Communicator::all_reduce_sum;
  void all_reduce_sum(std::vector<torch::Tensor>&) override {}
  void broadcast(std::vector<torch::Tensor>&, int) override {}
  std::vector<torch::Tensor> all_gather(const torch::Tensor& t) override { return {t}; }
  std::vector<torch::Tensor> all_gather_varying(const torch::Tensor& t) override { return {t}; }
  void barrier() override {}
};

}  // namespace

std::shared_ptr<Communicator> local_communicator() {
  static const auto instance = std::make_shared<LocalCommunicator>();
  return instance;
}

}  // namespace xdino
