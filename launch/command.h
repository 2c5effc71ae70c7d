// Subcommands of `dino` and their registry.
//
// Contract:
//  - A Command binds its flags to its own option structs in declare(), then run() does the
//    work with the parsed values and returns the process exit code. Failures throw
//    xdino::Error (exit 1) or xdino::UsageError (exit 2); main() prints them as one line.
//  - commands() is the one place where subcommands are registered (launch/commands.cpp).
//  - A Command whose implementation is not there yet reports so and exits 1; it never
//    pretends to have worked.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launch/flags.h"

namespace xdino::launch {

class Command {
 public:
  virtual ~Command() = default;
  virtual void declare(Flags& flags) = 0;
  virtual int run(const Flags& flags) = 0;
};

struct CommandInfo {
  std::string name;
  std::string summary;
  std::unique_ptr<Command> (*make)();
};

const std::vector<CommandInfo>& commands();

// Parses `args` (everything after the subcommand name) and runs the subcommand.
int run_command(const std::string& name, const std::vector<std::string>& args);

// A subcommand with its flags declared (and the other subcommands' keys and sections made
// known, so shared INI files parse); parse the flags, then run.
struct PreparedCommand {
  std::unique_ptr<Command> command;
  Flags flags;
  const CommandInfo* info;
};
PreparedCommand prepare_command(const std::string& name);

void print_usage(std::ostream& os);

// Factories, one per file launch/cmd_<name>.cpp.
std::unique_ptr<Command> make_train_command();
std::unique_ptr<Command> make_pipeline_command();
std::unique_ptr<Command> make_visualize_command();
std::unique_ptr<Command> make_pack_command();
std::unique_ptr<Command> make_preview_command();
std::unique_ptr<Command> make_info_command();
std::unique_ptr<Command> make_launch_command();
std::unique_ptr<Command> make_report_command();
std::unique_ptr<Command> make_export_command();
std::unique_ptr<Command> make_features_command();
std::unique_ptr<Command> make_copy_detection_command();
std::unique_ptr<Command> make_retrieval_command();
std::unique_ptr<Command> make_video_segmentation_command();
std::unique_ptr<Command> make_knn_command();
std::unique_ptr<Command> make_linear_command();

}  // namespace xdino::launch
