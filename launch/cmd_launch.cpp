// `dino launch --nproc_per_node N [--nnodes M --node_rank R --master_addr A --master_port P]
// [--max_restarts K --rdzv_timeout S] [--] <subcommand ...>`: N local processes, like torchrun, on
// one node or on each of M. The flags are torchrun's (and torch.distributed.launch's --use_env, a
// no-op: the rank always travels in the environment); --nproc is our older spelling of
// --nproc_per_node.
#include "launch/command.h"
#include "launch/local_launcher.h"

namespace xdino::launch {
namespace {

class LaunchCommand : public Command {
 public:
  void declare(Flags& f) override {
    f.add("nproc_per_node", &opt_.nproc, "processes to start on this machine")
        .alias("nproc", "nproc_per_node")
        .alias("nproc-per-node", "nproc_per_node")
        .add("nnodes", &opt_.nnodes,
             "machines of the run, each running this command with its own --node_rank")
        .add("node_rank", &opt_.node_rank,
             "this machine's index in [0, nnodes): its ranks are node_rank * nproc + 0..nproc-1")
        .add("master_addr", &opt_.master_addr,
             "address of rank 0's rendezvous store (node 0's, as the other nodes reach it)")
        .add("master_port", &opt_.master_port,
             "port of the rendezvous store (0: a free one; with --nnodes > 1: required)")
        .add("grace_seconds", &opt_.grace_seconds,
             "after one process fails, how long the others get to exit on their own")
        .add("max_restarts", &opt_.max_restarts,
             "when a process fails or a peer is lost, start this node's processes again up to "
             "this many times; they resume from the last checkpoint (torchrun's flag)")
        .alias("max-restarts", "max_restarts")
        .add("rdzv_timeout", &opt_.rdzv_timeout,
             "with --max_restarts: seconds each start has to form its rendezvous before the "
             "launcher gives up (torchrun's --rdzv_conf join_timeout)")
        .alias("rdzv-timeout", "rdzv_timeout")
        .add_switch("use_env", &use_env_,
                    "ignored (torch.distributed.launch's): the processes always read their rank "
                    "from the environment");
    f.allow_trailing();
  }

  int run(const Flags& f) override { return launch_local(opt_, f.trailing()); }

 private:
  LocalLaunchOptions opt_;
  bool use_env_ = false;
};

}  // namespace

std::unique_ptr<Command> make_launch_command() { return std::make_unique<LaunchCommand>(); }

}  // namespace xdino::launch
