// `dino retrieval`: eval_image_retrieval.py (eval/retrieval/image_retrieval.h).
#include "eval/retrieval/image_retrieval.h"
#include "launch/command.h"
#include "launch/eval_flags.h"

namespace xdino::launch {
namespace {

class RetrievalCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::retrieval::RetrievalOptions& o = opt_;
    f.add("data_path", &o.data_path, "root holding <dataset>/gnd_<dataset>.pkl and <dataset>/jpg/")
        .add("dataset", &o.dataset, "roxford5k or rparis6k")
        .add("multiscale", &o.multiscale,
             "average the features at scales 1, 1/sqrt(2), 1/2 (utils.multi_scale)")
        .add("imsize", &o.input.image_size, "image size: the longer side of each thumbnail");
    declare_model_flags(f, o.model);
    declare_use_cuda_flag(f, o.use_cuda);
    f.add("num_workers", &o.input.num_workers, "data loading threads per process")
        .add("output_dir", &o.output_dir,
             "where retrieval.json, the feature files and config.ini go");
    declare_dist_flags(f, dist_);
  }

  int run(const Flags& flags) override {
    return run_in_session(flags, dist_, config_record(flags, opt_.output_dir),
                          [&](Communicator& comm, torch::Device device, const auto& checked) {
                            eval::retrieval::run_retrieval(opt_, comm, device, checked);
                          });
  }

 private:
  eval::retrieval::RetrievalOptions opt_;
  distributed::DistOptions dist_;
};

}  // namespace

std::unique_ptr<Command> make_retrieval_command() { return std::make_unique<RetrievalCommand>(); }

}  // namespace xdino::launch
