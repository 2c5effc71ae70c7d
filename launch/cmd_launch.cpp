// `dino launch --nproc N -- <subcommand ...>`: N local processes, like torchrun.
#include "launch/command.h"
#include "launch/local_launcher.h"

namespace xdino::launch {
namespace {

class LaunchCommand : public Command {
 public:
  void declare(Flags& f) override {
    f.add("nproc", &opt_.nproc, "processes to start on this machine")
        .add("master_addr", &opt_.master_addr, "address of rank 0's rendezvous store")
        .add("master_port", &opt_.master_port, "port of the rendezvous store (0: a free one)")
        .add("grace_seconds", &opt_.grace_seconds,
             "after one process fails, how long the others get to exit on their own");
    f.allow_trailing();
  }

  int run(const Flags& f) override { return launch_local(opt_, f.trailing()); }

 private:
  LocalLaunchOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_launch_command() { return std::make_unique<LaunchCommand>(); }

}  // namespace xdino::launch
