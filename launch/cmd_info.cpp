// `dino info`: parameter count and FLOPs of an architecture at a resolution.
#include <iostream>

#include "launch/command.h"
#include "models/info.h"
#include "models/registry.h"

namespace xdino::launch {
namespace {

class InfoCommand : public Command {
 public:
  void declare(Flags& f) override {
    models::InfoOptions& o = opt_;
    f.add("arch", &o.arch, "backbone: " + models::backbone_list())
        .add("patch_size", &o.patch_size, models::patch_size_help())
        .add("image_size", &o.image_size, "input resolution: S (square) or H W");
  }

  int run(const Flags&) override {
    std::cout << models::format_info(models::describe(opt_));
    return 0;
  }

 private:
  models::InfoOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_info_command() { return std::make_unique<InfoCommand>(); }

}  // namespace xdino::launch
