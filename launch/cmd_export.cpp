// `dino export --pretrained_weights CKPT [--checkpoint_key teacher] --format timm|safetensors
// --output DIR [--runs RUN...] [--with_head] [--force]`: the backbone as a folder that timm and
// the Hugging Face hub load, or as safetensors in the official layout (eval/export.h).
#include "core/log.h"
#include "eval/export.h"
#include "launch/command.h"
#include "launch/eval_flags.h"
#include "models/registry.h"

namespace xdino::launch {
namespace {

class ExportCommand : public Command {
 public:
  void declare(Flags& f) override {
    eval::ExportOptions& o = opt_;
    declare_weights_flags(f, o.model, "empty: the checkpoint's --arch");
    f.add("format", &o.format,
          "timm (model.safetensors in timm's layout + config.json: timm.create_model("
          "\"local-dir:DIR\", pretrained=True)) or safetensors (the official layout)")
        .add("output", &o.output, "the folder to write (refused if it exists, unless --force)")
        .add_switch("force", &o.force, "replace an existing --output folder whole")
        .add_switch("with_head", &o.with_head, "also write the DINO head, to dino_head.safetensors")
        .add("image_size", &o.image_size,
             "the input size config.json states (0: the run's --global_crops_size, else 224; "
             "a ViT's is its position table's)")
        .add("runs", &o.runs,
             "evaluation run folders (as dino report takes them) whose table goes into the "
             "model card, README.md");
  }

  int run(const Flags&) override {
    log::info(eval::export_weights(opt_));
    return 0;
  }

 private:
  eval::ExportOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_export_command() { return std::make_unique<ExportCommand>(); }

}  // namespace xdino::launch
