// The INI + command-line fuzz entry point (see targets.h): launch/flags on Boost.Program_options.
// LibTorch-free, like the flags code itself.
#include <string>
#include <vector>

#include "fuzz/targets.h"
#include "launch/flags.h"

namespace xdino::fuzz {
namespace {

// One field of every type Flags supports, under names an INI file or a command line can reach.
struct Fields {
  bool flag = false, bare = false;
  int small = 3;
  int64_t big = 4;
  double real = 0.5;
  std::string text = "runs/a";
  std::vector<int64_t> ints{1, 2};
  std::vector<double> reals{0.4, 1.0};
  std::vector<std::string> texts{"a", "b"};
};

launch::Flags declare(Fields& f) {
  launch::Flags flags("train");
  flags.add("flag", &f.flag, "")
      .add_switch("bare", &f.bare, "")
      .add("small", &f.small, "")
      .add("big", &f.big, "")
      .add("real", &f.real, "")
      .add("text", &f.text, "")
      .add("ints", &f.ints, "")
      .add("reals", &f.reals, "")
      .add("texts", &f.texts, "");
  flags.set_known_elsewhere({"arch", "data_path"});
  flags.set_other_sections({"knn", "pipeline"});
  flags.allow_trailing();
  return flags;
}

}  // namespace

void fuzz_flags(const uint8_t* data, size_t size) {
  // The bytes up to the first NUL are the INI file; the NUL-separated rest are arguments,
  // given after `--config <that file>`.
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t end = std::min(input.find('\0'), input.size());
  TempInput ini(data, end, ".ini");
  std::vector<std::string> args{"--config", ini.path().string()};
  for (size_t at = end; at < input.size();) {
    const size_t next = std::min(input.find('\0', at + 1), input.size());
    args.push_back(input.substr(at + 1, next - at - 1));
    at = next;
  }
  Fields fields;
  launch::Flags flags = declare(fields);
  if (!flags.parse(args)) return;  // --help
  // What was accepted is what config.ini records: reading that file back gives the same values.
  const std::string written = flags.to_ini();
  TempInput copy(reinterpret_cast<const uint8_t*>(written.data()), written.size(), ".ini");
  Fields again_fields;
  launch::Flags again = declare(again_fields);
  again.parse({"--config", copy.path().string()});
  if (again.to_ini() != written)
    invariant_broken("a configuration did not survive to_ini() + parse()");
}

}  // namespace xdino::fuzz
