// Flag parsing: defaults, INI files, override order, sections, errors that name the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/python_format.h"
#include "launch/dist_flags.h"
#include "launch/flags.h"
#include "launch/train_flags.h"
#include "tests/support/files.h"

namespace fs = std::filesystem;
using xdino::launch::Flags;

namespace {

struct Opts {
  double lr = 0.0005;
  int64_t epochs = 100;
  bool use_fp16 = true;
  std::string arch = "vit_small";
  std::vector<double> scale = {0.4, 1.0};
  std::vector<std::string> runs;
};

void declare(Flags& f, Opts& o) {
  f.add("lr", &o.lr, "learning rate")
      .add("epochs", &o.epochs, "epochs")
      .add("use_fp16", &o.use_fp16, "fp16")
      .add("arch", &o.arch, "architecture")
      .add("global_crops_scale", &o.scale, "scale")
      .add("runs", &o.runs, "run folders");
}

// This process's INI files, in one scratch folder that goes when the process ends (they used
// to stay in /tmp, a dozen per run).
std::string write_ini(const std::string& name, const std::string& text) {
  static const fs::path folder = xdino::testing::fresh_dir("flags");
  const fs::path p = folder / (name + ".ini");
  std::ofstream(p) << text;
  return p.string();
}

std::string error_of(Flags& f, const std::vector<std::string>& args) {
  try {
    f.parse(args);
  } catch (const xdino::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Flags, DefaultsComeFromTheFields) {
  Opts o;
  Flags f("train");
  declare(f, o);
  ASSERT_TRUE(f.parse({}));
  EXPECT_DOUBLE_EQ(o.lr, 0.0005);
  EXPECT_FALSE(f.is_set("lr"));
}

TEST(Flags, CommandLineValuesOfEveryType) {
  Opts o;
  Flags f("train");
  declare(f, o);
  ASSERT_TRUE(f.parse({"--lr", "1e-3", "--epochs", "7", "--use_fp16", "false", "--arch",
                       "xcit_small_12_p16", "--global_crops_scale", "0.3", "0.9", "--runs", "a",
                       "b", "c"}));
  EXPECT_DOUBLE_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.epochs, 7);
  EXPECT_FALSE(o.use_fp16);
  EXPECT_EQ(o.arch, "xcit_small_12_p16");
  EXPECT_EQ(o.scale, (std::vector<double>{0.3, 0.9}));
  EXPECT_EQ(o.runs, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(f.is_set("lr"));
}

TEST(Flags, BooleansAcceptOfficialSpellings) {
  for (const auto& [text, value] : std::vector<std::pair<std::string, bool>>{
           {"on", true}, {"1", true}, {"True", true}, {"off", false}, {"0", false}}) {
    Opts o;
    o.use_fp16 = !value;
    Flags f("train");
    declare(f, o);
    f.parse({"--use_fp16", text});
    EXPECT_EQ(o.use_fp16, value) << text;
  }
}

TEST(Flags, OverrideOrderFilesThenCommandLine) {
  const std::string a = write_ini("a", "lr = 0.1\nepochs = 5\narch = from_a\n");
  const std::string b = write_ini("b", "lr = 0.2\nglobal_crops_scale = 0.5, 0.8\n");
  Opts o;
  Flags f("train");
  declare(f, o);
  ASSERT_TRUE(f.parse({"--config", a, "--config", b, "--arch", "from_cli"}));
  EXPECT_DOUBLE_EQ(o.lr, 0.2);    // later file wins
  EXPECT_EQ(o.epochs, 5);         // earlier file still applies where the later is silent
  EXPECT_EQ(o.arch, "from_cli");  // command line wins over every file
  EXPECT_EQ(o.scale, (std::vector<double>{0.5, 0.8}));
  // The command line wins even when it comes before --config.
  Opts o2;
  Flags f2("train");
  declare(f2, o2);
  f2.parse({"--lr", "0.3", "--config", b});
  EXPECT_DOUBLE_EQ(o2.lr, 0.3);
}

TEST(Flags, SectionsSelectTheSubcommand) {
  const std::string ini =
      write_ini("sections", "epochs = 3\n[train]\nlr = 0.01\n[knn]\nlr = 0.5\nnb_knn = 20\n");
  Opts o;
  Flags f("train");
  declare(f, o);
  f.set_other_sections({"knn", "train"});
  ASSERT_TRUE(f.parse({"--config", ini}));
  EXPECT_DOUBLE_EQ(o.lr, 0.01);
  EXPECT_EQ(o.epochs, 3);
}

TEST(Flags, UnknownKeysAreNamed) {
  Opts o;
  Flags f("train");
  declare(f, o);
  EXPECT_NE(error_of(f, {"--bogus", "1"}).find("'bogus'"), std::string::npos);
  const std::string ini = write_ini("unknown", "lrr = 0.1\n");
  const std::string msg = error_of(f, {"--config", ini});
  EXPECT_NE(msg.find("unknown key 'lrr'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(ini), std::string::npos) << msg;
}

TEST(Flags, KeysOfOtherSubcommandsAreIgnoredAtTopLevel) {
  const std::string ini = write_ini("shared", "lr = 0.1\nnb_knn = 10 20\n");
  Opts o;
  Flags f("train");
  declare(f, o);
  f.set_known_elsewhere({"nb_knn"});
  ASSERT_TRUE(f.parse({"--config", ini}));
  EXPECT_DOUBLE_EQ(o.lr, 0.1);
}

TEST(Flags, UnknownSectionIsAnError) {
  const std::string ini = write_ini("badsection", "[trian]\nlr = 0.1\n");
  Opts o;
  Flags f("train");
  declare(f, o);
  EXPECT_NE(error_of(f, {"--config", ini}).find("[trian]"), std::string::npos);
}

TEST(Flags, BadValuesNameFlagAndType) {
  Opts o;
  Flags f("train");
  declare(f, o);
  std::string msg = error_of(f, {"--lr", "fast"});
  EXPECT_NE(msg.find("--lr"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FLOAT"), std::string::npos) << msg;
  msg = error_of(f, {"--epochs", "2.5"});
  EXPECT_NE(msg.find("INT"), std::string::npos) << msg;
  msg = error_of(f, {"--use_fp16", "maybe"});
  EXPECT_NE(msg.find("boolean"), std::string::npos) << msg;
  const std::string ini = write_ini("badvalue", "epochs = many\n");
  msg = error_of(f, {"--config", ini});
  EXPECT_NE(msg.find(ini), std::string::npos) << "a bad value in a file names the file: " << msg;
}

TEST(Flags, MissingConfigFileIsNamed) {
  Opts o;
  Flags f("train");
  declare(f, o);
  EXPECT_NE(error_of(f, {"--config", "/no/such.ini"}).find("/no/such.ini"), std::string::npos);
}

TEST(Flags, HelpStopsParsing) {
  Opts o;
  Flags f("train");
  declare(f, o);
  EXPECT_FALSE(f.parse({"--help"}));
  std::ostringstream os;
  f.print_help(os, "summary");
  EXPECT_NE(os.str().find("--lr FLOAT"), std::string::npos);
  EXPECT_NE(os.str().find("[default: 0.0005]"), std::string::npos);
}

TEST(Flags, EffectiveConfigRoundTrips) {
  Opts o;
  Flags f("train");
  declare(f, o);
  f.parse({"--lr", "0.00123", "--global_crops_scale", "0.25", "1", "--runs", "x", "y"});
  const std::string ini = write_ini("effective", f.to_ini());
  Opts back;
  back.lr = 9;
  back.scale = {};
  Flags g("train");
  declare(g, back);
  ASSERT_TRUE(g.parse({"--config", ini}));
  EXPECT_DOUBLE_EQ(back.lr, 0.00123);
  EXPECT_EQ(back.scale, o.scale);
  EXPECT_EQ(back.runs, o.runs);
  EXPECT_EQ(g.to_ini(), f.to_ini());
}

// Found by fuzz_flags: a stray argument reached the value loop as an option with no name.
TEST(Flags, StrayArgumentsAreNamedNotDereferenced) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"foo"}, {"-"}, {""}, {"--lr", "0.1", "extra"}}) {
    Opts o;
    Flags f("train");
    declare(f, o);
    EXPECT_NE(error_of(f, args).find("unexpected argument for 'dino train'"), std::string::npos)
        << args.back();
  }
}

// boost's INI reader cuts a value at '#', trims it and reads one line, so these strings would be
// recorded in config.ini as other values; they are refused where they are given. (A list splits
// at spaces and line breaks anyway, so for it only '#' is at stake.)
TEST(Flags, ValuesConfigIniCannotHoldAreRefused) {
  for (const std::string bad : {"runs/exp#1", " lead", "trail ", "two\nlines", "#"}) {
    for (const char* name : {"arch", "runs"}) {
      if (std::string(name) == "runs" && bad.find('#') == std::string::npos) continue;
      Opts o;
      Flags f("train");
      declare(f, o);
      const std::string err = error_of(f, {std::string("--") + name, bad});
      EXPECT_NE(err.find("cannot be recorded in config.ini"), std::string::npos) << name << bad;
      EXPECT_EQ(err.find('\n'), std::string::npos);
    }
  }
  Opts o;
  Flags f("train");
  declare(f, o);
  EXPECT_EQ(error_of(f, {"--arch", "in side", "--runs", "a/b.c", "[x]"}), "");
  EXPECT_EQ(o.arch, "in side");
}

TEST(Flags, FormatDoubleMatchesPythonRepr) {
  EXPECT_EQ(xdino::python_repr(0.0005), "0.0005");
  EXPECT_EQ(xdino::python_repr(3.0), "3.0");
  EXPECT_EQ(xdino::python_repr(1e-6), "1e-06");
  EXPECT_EQ(xdino::python_repr(-0.04), "-0.04");
  EXPECT_EQ(xdino::python_repr(65536), "65536.0");
  EXPECT_EQ(xdino::python_repr(1e16), "1e+16");
  EXPECT_EQ(std::stod(xdino::python_repr(0.1 + 0.2)), 0.1 + 0.2);
}

// numpy's rounding and array printing, as eval_image_retrieval.py prints mP@k; the expected
// strings are what numpy 1.24 printed for np.around(np.array(values), 2).
TEST(Flags, NumpyAroundAndArraysPrintAsNumpyDoes) {
  EXPECT_EQ(xdino::numpy_around(78.125, 2), 78.12);  // half to even; C's round gives 78.13
  EXPECT_EQ(xdino::numpy_around(0.78125 * 100, 2), 78.12);
  EXPECT_EQ(xdino::numpy_around(2.675, 2), 2.68);  // 2.675 * 100 rounds to 267.5 first
  EXPECT_EQ(xdino::numpy_around(78.135, 2), 78.14);
  const std::vector<std::pair<std::vector<double>, std::string>> cases{
      {{100., 85.71, 71.43}, "[100.    85.71  71.43]"},
      {{100., 0.05, 0.}, "[1.e+02 5.e-02 0.e+00]"},
      {{78.12, 50., 40.25}, "[78.12 50.   40.25]"},
      {{0., 0., 0.}, "[0. 0. 0.]"},
      {{1.5, -2.25, 3.}, "[ 1.5  -2.25  3.  ]"},
      {{100., 100., 100.}, "[100. 100. 100.]"},
      {{12.34, 0.5, 99.99}, "[12.34  0.5  99.99]"},
      {{0.01, 100, 5}, "[1.e-02 1.e+02 5.e+00]"},
      {{150., 0.05}, "[1.5e+02 5.0e-02]"}};
  for (const auto& [values, numpy] : cases) EXPECT_EQ(xdino::numpy_str(values), numpy);
}

TEST(Flags, VariantSectionsApplyOnTopOfTheirSubcommand) {
  // The variant section comes first in the file and still wins over [train].
  const std::string ini =
      write_ini("variant",
                "epochs = 3\n[train:long]\nepochs = 50\n[train]\nepochs = 10\nlr = 0.1\n"
                "[train:short]\nepochs = 1\n");
  Opts o;
  Flags f("train");
  declare(f, o);
  f.set_other_sections({"train", "knn"});
  ASSERT_TRUE(f.parse({"--config", ini, "--variant", "long"}));
  EXPECT_EQ(o.epochs, 50);
  EXPECT_DOUBLE_EQ(o.lr, 0.1);
  EXPECT_EQ(f.variant(), "long");
  Opts plain;
  Flags g("train");
  declare(g, plain);
  g.set_other_sections({"train", "knn"});
  ASSERT_TRUE(g.parse({"--config", ini}));
  EXPECT_EQ(plain.epochs, 10) << "without --variant, variant sections are skipped";
  Opts cli;
  Flags h("train");
  declare(h, cli);
  h.set_other_sections({"train", "knn"});
  ASSERT_TRUE(h.parse({"--config", ini, "--variant", "long", "--epochs", "7"}));
  EXPECT_EQ(cli.epochs, 7) << "the command line still wins";
}

TEST(Flags, MissingVariantSectionIsNamed) {
  const std::string ini = write_ini("novariant", "[train]\nlr = 0.1\n");
  Opts o;
  Flags f("train");
  declare(f, o);
  f.set_other_sections({"train"});
  const std::string msg = error_of(f, {"--config", ini, "--variant", "lnog"});
  EXPECT_NE(msg.find("[train:lnog]"), std::string::npos) << msg;
}

TEST(Flags, ValueRendersTheCurrentSetting) {
  Opts o;
  Flags f("train");
  declare(f, o);
  f.parse({"--lr", "0.25", "--runs", "a", "b"});
  EXPECT_EQ(f.value("lr"), "0.25");
  EXPECT_EQ(f.value("runs"), "a b");
  EXPECT_TRUE(f.has("epochs"));
  EXPECT_FALSE(f.has("output_dir"));
}

TEST(Flags, SwitchesMayBeGivenBare) {
  bool evaluate = false, other = true;
  Flags f("linear");
  f.add_switch("evaluate", &evaluate, "evaluate only").add_switch("other", &other, "x");
  ASSERT_TRUE(f.parse({"--evaluate", "--other=false"}));
  EXPECT_TRUE(evaluate);
  EXPECT_FALSE(other);
  EXPECT_NE(f.to_ini().find("evaluate = true"), std::string::npos);
  bool from_ini = false;
  Flags g("linear");
  g.add_switch("evaluate", &from_ini, "evaluate only");
  ASSERT_TRUE(g.parse({"--config", write_ini("switch", "evaluate = on\n")}));
  EXPECT_TRUE(from_ini);
}

// argparse reads `--name=value` as `--name value`, for every type; an unknown one is named
// without its value.
TEST(Flags, EqualsFormWorksForEveryTypeAndUnknownNamesOmitTheValue) {
  Opts o;
  bool video_only = false;
  Flags f("train");
  declare(f, o);
  f.add_switch("video_only", &video_only, "switch");
  ASSERT_TRUE(f.parse({"--lr=1e-3", "--epochs=7", "--use_fp16=false", "--arch=vit_tiny",
                       "--global_crops_scale=0.3", "--runs=a", "--video_only=true"}));
  EXPECT_DOUBLE_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.epochs, 7);
  EXPECT_FALSE(o.use_fp16);
  EXPECT_EQ(o.arch, "vit_tiny");
  EXPECT_EQ(o.scale, (std::vector<double>{0.3}));
  EXPECT_EQ(o.runs, (std::vector<std::string>{"a"}));
  EXPECT_TRUE(video_only);
  const std::string msg = error_of(f, {"--epoch=300"});
  EXPECT_NE(msg.find("unknown flag 'epoch'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("300"), std::string::npos) << msg;
}

// main_dino.py's bool_flag takes a value: argparse refuses a bare --use_fp16 ("expected one
// argument") wherever it stands, and so do we, naming it and the fix rather than the next flag.
TEST(Flags, AFlagGivenWithoutItsValueIsNamedWithTheFix) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--use_fp16", "--epochs", "1"}, {"--epochs", "1", "--use_fp16"}}) {
    Opts o;
    Flags f("train");
    declare(f, o);
    const std::string msg = error_of(f, args);
    EXPECT_EQ(msg.rfind("--use_fp16 needs a value: --use_fp16 true or --use_fp16 false", 0), 0u)
        << msg;
    EXPECT_EQ(msg.find("epochs"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("dino train"), std::string::npos) << "main() names the command: " << msg;
  }
  Opts o;
  Flags f("train");
  declare(f, o);
  const std::string msg = error_of(f, {"--arch", "--lr", "0.1"});
  EXPECT_EQ(msg.rfind("--arch needs a value (STR)", 0), 0u) << msg;
  EXPECT_EQ(error_of(f, {"--lr", "-0.5"}), "") << "a negative number is a value";
}

// torchrun's --nproc_per_node beside our --nproc: one field, one help entry, one config key;
// the launched command starts after "--" or at the first argument that is no flag's value.
TEST(Flags, AliasesAndTheLaunchedCommand) {
  struct Case {
    std::vector<std::string> args;
    int64_t nproc;
    std::vector<std::string> trailing;
  };
  for (const Case& c : {Case{{"--nproc_per_node=8", "train", "--arch", "vit_small"},
                             8,
                             {"train", "--arch", "vit_small"}},
                        Case{{"--nproc", "2", "--", "train"}, 2, {"train"}},
                        Case{{"--use_env", "--nproc_per_node=1", "retrieval", "--imsize", "512"},
                             1,
                             {"retrieval", "--imsize", "512"}},
                        Case{{"--nproc_per_node", "3", "--master_port=29500", "knn", "--", "x"},
                             3,
                             {"knn", "--", "x"}}}) {
    int64_t nproc = 1, port = 0;
    bool use_env = false;
    Flags f("launch");
    f.add("nproc_per_node", &nproc, "processes").alias("nproc", "nproc_per_node");
    f.add("master_port", &port, "port").add_switch("use_env", &use_env, "ignored");
    f.allow_trailing();
    ASSERT_TRUE(f.parse(c.args)) << c.args[0];
    EXPECT_EQ(nproc, c.nproc) << c.args[0];
    EXPECT_EQ(f.trailing(), c.trailing) << c.args[0];
    EXPECT_EQ(f.to_ini().find("nproc ="), std::string::npos);
    std::ostringstream help;
    f.print_help(help, "");
    EXPECT_NE(help.str().find("same as --nproc_per_node"), std::string::npos);
  }
}

// `dino train --help` shows its flags under main_dino.py's group titles, in main_dino.py's
// order, ours after them; every flag is in exactly one group, none outside (issue 70).
TEST(Flags, TrainHelpShowsEachGroupUnderItsTitle) {
  xdino::ssl::DinoOptions o;
  xdino::launch::MonitorOptions m;
  xdino::distributed::DistOptions d;
  Flags f("train");
  xdino::launch::declare_train_flags(f, o, m);
  xdino::launch::declare_dist_flags(f, d);
  std::vector<std::string> titles, grouped;
  for (const auto& [title, names] : f.groups()) {
    titles.push_back(title);
    grouped.insert(grouped.end(), names.begin(), names.end());
  }
  EXPECT_EQ(titles, (std::vector<std::string>{
                        "Model parameters", "Temperature teacher parameters",
                        "Training/Optimization parameters", "Multi-crop parameters", "Misc",
                        "Watching the run learn (ours)",
                        "DINOv2's additions (ours, under dinov2's config names; off by default)",
                        "Distributed (processes of one run; main_dino.py's --dist_url and "
                        "--local_rank)"}));
  std::vector<std::string> all = f.names();
  std::sort(all.begin(), all.end());
  std::sort(grouped.begin(), grouped.end());
  EXPECT_EQ(grouped, all) << "every flag in exactly one group";
  std::ostringstream help;
  f.print_help(help, "DINO pretraining");
  size_t at = 0;
  for (const std::string& title : titles) {
    const size_t found = help.str().find("\n" + title + ":\n", at);
    ASSERT_NE(found, std::string::npos) << title << " missing or out of order:\n" << help.str();
    at = found;
  }
  // A group's flags follow its title: --arch under the model, --lr under the optimisation.
  EXPECT_LT(help.str().find("Model parameters:"), help.str().find("--arch"));
  EXPECT_GT(help.str().find("--lr "), help.str().find("Training/Optimization parameters:"));
  EXPECT_LT(help.str().find("--lr "), help.str().find("Multi-crop parameters:"));
}
