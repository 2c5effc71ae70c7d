#include <filesystem>
#include <iostream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "launch/command.h"

namespace xdino::launch {

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> list = {
      {"train", "DINO self-supervised pretraining (main_dino.py flags)", make_train_command, ""},
      {"knn", "weighted k-NN classification on frozen features (eval_knn.py flags)",
       make_knn_command, ""},
      {"linear", "linear probe on a frozen backbone (eval_linear.py flags)", nullptr, "#7"},
      {"features", "extract L2-normalised features of one split to HDF5", make_features_command,
       ""},
      {"visualize", "class-attention, mask and |Q|/|K| maps as PNG (visualize_attention.py flags)",
       make_visualize_command, ""},
      {"report", "Table 3-style report (#params, FLOPs, Linear, k-NN) from run folders",
       make_report_command, ""},
      {"info", "parameter count and FLOPs of an architecture at a resolution", make_info_command,
       ""},
      {"launch", "start N local processes of a multi-process run (like torchrun)",
       make_launch_command, ""},
      {"pipeline", "run the stages a config lists: train, evaluations, report, pictures", nullptr,
       "#9"},
      {"pack", "pack an image folder into encoded-image HDF5 shards", make_pack_command, ""},
      {"preview", "PNG of the augmented views of a few images, one row per image",
       make_preview_command, ""},
  };
  return list;
}

void print_usage(std::ostream& os) {
  os << "usage: dino <subcommand> [--config FILE.ini]... [--flag value]...\n\n"
     << "xcit-dino: XCiT backbones trained with DINO self-supervision, and their evaluation.\n\n"
     << "Subcommands:\n";
  for (const CommandInfo& c : commands()) {
    std::string name = "  " + c.name;
    name.resize(14, ' ');
    os << name << c.summary << (c.make ? "" : " [not implemented yet]") << "\n";
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
    if (c.name == self || c.make == nullptr) continue;
    Flags other(c.name);
    c.make()->declare(other);
    for (const std::string& k : other.names()) keys.insert(k);
  }
  flags.set_known_elsewhere(std::move(keys));
  flags.set_other_sections(std::move(sections));
}

}  // namespace

int run_command(const std::string& name, const std::vector<std::string>& args) {
  const CommandInfo& info = find_command(name);
  if (info.make == nullptr) {
    std::cerr << "dino " << name << ": not implemented yet in this build (tracked in issue "
              << info.pending_issue << ")\n";
    return 1;
  }
  std::unique_ptr<Command> command = info.make();
  Flags flags(name);
  command->declare(flags);
  describe_others(name, flags);
  if (!flags.parse(args)) {
    flags.print_help(std::cout, info.summary);
    return 0;
  }
  return command->run(flags);
}

}  // namespace xdino::launch
