#include <algorithm>
#include <filesystem>
#include <iostream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "launch/command.h"

namespace xdino::launch {

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> list = {
      {"train", "DINO self-supervised pretraining (main_dino.py flags)", make_train_command},
      {"knn", "weighted k-NN classification on frozen features (eval_knn.py flags)",
       make_knn_command},
      {"linear", "linear probe on a frozen backbone (eval_linear.py flags)", make_linear_command},
      {"features", "extract L2-normalised features of one split to HDF5", make_features_command},
      {"copy_detection", "copy detection mAP on Copydays (eval_copy_detection.py flags)",
       make_copy_detection_command},
      {"retrieval", "image retrieval mAP on revisited Oxford/Paris (eval_image_retrieval.py flags)",
       make_retrieval_command},
      {"video_segmentation",
       "DAVIS 2017 label propagation and J&F (eval_video_segmentation.py flags)",
       make_video_segmentation_command},
      {"visualize",
       "attention maps, masks and |Q|/|K| maps as PNG; attention videos (visualize_attention.py, "
       "video_generation.py)",
       make_visualize_command},
      {"report", "Table 3-style report (#params, FLOPs, Linear, k-NN) from run folders",
       make_report_command},
      {"info", "parameter count and FLOPs of an architecture at a resolution", make_info_command},
      {"export",
       "a trained backbone as timm's folder (config.json + model.safetensors) or as "
       "safetensors",
       make_export_command},
      {"launch", "start N local processes of a multi-process run (like torchrun)",
       make_launch_command},
      {"pipeline", "run the stages a config lists: train, evaluations, report, pictures",
       make_pipeline_command},
      {"pack", "pack an image folder into encoded-image HDF5 shards", make_pack_command},
      {"preview", "PNG of the augmented views of a few images, one row per image",
       make_preview_command},
  };
  return list;
}

void print_usage(std::ostream& os) {
  os << "usage: dino <subcommand> [--config FILE.ini]... [--flag value]...\n\n"
     << "xcit-dino: XCiT backbones trained with DINO self-supervision, and their evaluation.\n\n"
     << "Subcommands:\n";
  for (const CommandInfo& c : commands()) {
    std::string name = "  " + c.name;
    name.resize(std::max<size_t>(name.size() + 2, 18), ' ');
    os << name << c.summary << "\n";
  }
  os << "\n'dino <subcommand> --help' lists every flag with its default.\n";
}

namespace {

const CommandInfo& find_command(const std::string& name) {
  for (const CommandInfo& c : commands())
    if (c.name == name) return c;
  XDINO_FAIL_ARG("unknown subcommand '", name, "' (see 'dino --help')");
}

// Flags and sections that other subcommands own, so a shared INI file can serve them all.
void describe_others(const std::string& self, Flags& flags) {
  std::set<std::string> keys, sections;
  for (const CommandInfo& c : commands()) {
    sections.insert(c.name);
    if (c.name == self) continue;
    Flags other(c.name);
    c.make()->declare(other);
    for (const std::string& k : other.names()) keys.insert(k);
  }
  flags.set_known_elsewhere(std::move(keys));
  flags.set_other_sections(std::move(sections));
}

}  // namespace

PreparedCommand prepare_command(const std::string& name) {
  const CommandInfo& info = find_command(name);
  PreparedCommand p{info.make(), Flags(name), &info};
  p.command->declare(p.flags);
  describe_others(name, p.flags);
  return p;
}

int run_command(const std::string& name, const std::vector<std::string>& args) {
  PreparedCommand p = prepare_command(name);
  if (!p.flags.parse(args)) {
    p.flags.print_help(std::cout, p.info->summary);
    return 0;
  }
  return p.command->run(p.flags);
}

}  // namespace xdino::launch
