// `dino pipeline --config FILE.ini`: runs the stages the config lists, in order, each as its
// subcommand would run with the same files (plus its [subcommand:variant] section), and skips
// the stages already done with the same effective configuration and the same inputs.
// `train_nproc = N` runs the train stage as `dino launch --nproc N -- train ...` would: N
// data-parallel processes on this machine (docs/usage.md, "Configs and `dino pipeline`", for why 2
// on 2 cores).
#include <filesystem>
#include <sstream>

#include "core/atomic_file.h"
#include "core/check.h"
#include "core/log.h"
#include "launch/command.h"
#include "launch/local_launcher.h"
#include "train/stop_signal.h"

namespace fs = std::filesystem;

namespace xdino::launch {
namespace {

struct PipelineOptions {
  std::vector<std::string> stages;
  bool force = false;
  int64_t train_nproc = 1;
};

struct Stage {
  std::string name, subcommand, variant;
};

Stage parse_stage(const std::string& name) {
  const auto colon = name.find(':');
  Stage s{name, name.substr(0, colon), colon == std::string::npos ? "" : name.substr(colon + 1)};
  XDINO_CHECK_ARG(s.subcommand != "pipeline" && s.subcommand != "launch", "stage '", name,
                  "': a pipeline runs subcommands, not ", s.subcommand);
  return s;
}

// Where a stage leaves its results (a folder for --output_dir, a file for --output), and the
// marker beside them that records the configuration they were made with.
struct Output {
  std::string path;
  fs::path marker;
};

Output output_of(const Stage& stage, const Flags& flags) {
  std::string tag = ".pipeline-" + stage.name + ".done";
  for (char& c : tag)
    if (c == ':' || c == '/') c = '-';
  if (flags.has("output_dir")) {
    const std::string dir = flags.value("output_dir");
    return {dir, fs::path(dir) / tag};
  }
  if (flags.has("output")) {
    const std::string file = flags.value("output");
    return {file, fs::path(file + tag)};
  }
  return {};
}

// What a stage depends on besides its flags: the identity (kind, size, modification time) of
// every existing file or folder its flag values name, its own outputs left out. A stage whose
// inputs changed since it ran (a retrained checkpoint, a rewritten knn.json in a run folder,
// another image at the same path) reruns, as a build system rebuilds; the folders written
// with atomic renames (run folders) change their time whenever an entry is replaced.
std::string input_identities(const Flags& flags, const Output& out) {
  std::ostringstream os;
  for (const auto& name : flags.names()) {
    if (name == "output_dir" || name == "output") continue;
    std::istringstream values(flags.value(name));
    for (std::string token; values >> token;) {
      if (token == out.path) continue;
      std::error_code ec;
      const auto status = fs::status(token, ec);
      if (ec || !fs::exists(status)) continue;
      const bool folder = fs::is_directory(status);
      const auto size = folder ? 0 : fs::file_size(token, ec);
      const auto time = fs::last_write_time(token, ec).time_since_epoch().count();
      os << "# input " << name << ": " << token << (folder ? " folder" : " file") << " size "
         << size << " time " << time << "\n";
    }
  }
  return os.str();
}

class PipelineCommand : public Command {
 public:
  void declare(Flags& f) override {
    f.add("stages", &opt_.stages,
          "stages in order: subcommands, or subcommand:variant to also apply the "
          "[subcommand:variant] sections of the config files")
        .add("force", &opt_.force, "rerun stages even when they are done")
        .add("train_nproc", &opt_.train_nproc,
             "processes for the train stage (data parallel on this machine, as dino launch "
             "--nproc; each gets cores / N threads and batch_size_per_gpu images)");
  }

  int run(const Flags& flags) override {
    XDINO_CHECK_ARG(!opt_.stages.empty(), "no stages: set 'stages = ...' under [pipeline]");
    XDINO_CHECK_ARG(opt_.train_nproc >= 1, "--train_nproc must be at least 1, got ",
                    opt_.train_nproc);
    std::vector<Stage> stages;
    for (const auto& s : opt_.stages) stages.push_back(parse_stage(s));
    std::vector<std::pair<std::string, std::string>> outputs;
    for (size_t i = 0; i < stages.size(); ++i) {
      const Stage& stage = stages[i];
      PreparedCommand p = prepare_command(stage.subcommand);
      std::vector<std::string> args;
      for (const auto& file : flags.config_files()) args.insert(args.end(), {"--config", file});
      if (!stage.variant.empty()) args.insert(args.end(), {"--variant", stage.variant});
      p.flags.parse(args);
      const Output out = output_of(stage, p.flags);
      const std::string effective = p.flags.to_ini() + input_identities(p.flags, out);
      const std::string where = out.path.empty() ? "" : " -> " + out.path;
      if (!opt_.force && !out.marker.empty() && fs::exists(out.marker) &&
          read_file(out.marker) == effective) {
        log::info("== stage ", i + 1, "/", stages.size(), " ", stage.name,
                  ": done before with this configuration and these inputs, reused", where);
      } else {
        log::info("== stage ", i + 1, "/", stages.size(), " ", stage.name, where);
        const bool launch = stage.subcommand == "train" && opt_.train_nproc > 1;
        int rc = 0;
        if (launch) {
          std::vector<std::string> child{stage.subcommand};
          child.insert(child.end(), args.begin(), args.end());
          LocalLaunchOptions launch_options;
          launch_options.nproc = opt_.train_nproc;
          rc = launch_local(launch_options, child);
        } else {
          rc = p.command->run(p.flags);
        }
        if (rc != 0) {
          log::error("stage ", stage.name, " failed (exit code ", rc,
                     "); rerun the same "
                     "command to continue from here");
          return rc;
        }
        // SIGTERM/SIGUSR1 during training: the stage saved its checkpoint and returned early.
        // It is not done (no marker), and later stages must not evaluate a partial run.
        if (const int sig = launch ? launch_forwarded_signal() : train::stop_signal()) {
          log::info("stopped by signal ", sig, " during stage ", stage.name,
                    "; rerun the same command to continue from here");
          return 0;
        }
        const fs::path folder = out.marker.parent_path();
        if (!out.marker.empty() && (folder.empty() || fs::is_directory(folder)))
          write_file_atomically(out.marker, effective);  // the inputs as the stage read them
      }
      if (!out.path.empty()) outputs.emplace_back(stage.name, out.path);
    }
    log::info("pipeline done. Results:");
    for (const auto& [name, output] : outputs) log::info("  ", name, ": ", output);
    return 0;
  }

 private:
  PipelineOptions opt_;
};

}  // namespace

std::unique_ptr<Command> make_pipeline_command() { return std::make_unique<PipelineCommand>(); }

}  // namespace xdino::launch
