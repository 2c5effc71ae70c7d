// `dino export` and the weights of timm, in and out (eval/export.h, models/timm_names.h):
//  - out: a dino train run of XCiT-N12/16 at 32 pixels, exported --format timm, loads in timm
//    (timm.create_model("local-dir:DIR", pretrained=True), which loads strictly) and gives the
//    features `dino features` gives for the checkpoint, to 1e-5 (tests/support/timm_check.py);
//  - round trip: the exported model.safetensors (timm's layout) and the --format safetensors
//    one (the official layout), read back by --pretrained_weights, give the checkpoint's
//    features bit for bit;
//  - in: what timm itself saves (timm.models.save_for_hf: model.safetensors + config.json) for
//    XCiT, ViT and ResNet loads into `dino features` with config.json's mean and std and gives
//    timm's features to 1e-5;
//  - the model card carries the evaluation table and the curves it links; an existing folder
//    is refused without --force and replaced whole with it; what timm cannot build, an
//    unknown --format and a missing file are one line, exit 2, nothing written.
// The Python checks need timm, safetensors and h5py in scripts/setup.sh --tests' environment
// (tests/support/files.h, pyenv_python); without them they skip (fail under XDINO_REQUIRE_ALL).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/json.h"
#include "core/pth.h"
#include "core/safetensors.h"
#include "eval/features_io.h"
#include "models/registry.h"
#include "models/weights.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace fs = std::filesystem;
namespace cli = xdino::testing::cli;
using xdino::testing::count_lines;
using xdino::testing::dino_binary;
using xdino::testing::pyenv_python;
using xdino::testing::python_lacks;
using xdino::testing::repo_file;
using xdino::testing::run_process;

namespace {

// One small run per architecture for the whole suite: 8 + 8 PPM images of 32 pixels, one
// epoch at 32-pixel global crops.
struct Fixture {
  fs::path root, data, checkpoint;
};

std::vector<std::string> train_args(const std::string& arch, const fs::path& data,
                                    const fs::path& out) {
  return cli::concat(
      {{dino_binary()},
       cli::train(data, out, arch),
       cli::epochs(1, 0),
       cli::multi_crop(32, 16, 2),
       {"--batch_size_per_gpu", "4", "--out_dim", "64", "--num_workers", "1", "--device", "cpu",
        "--use_fp16", "false", "--replicas", "1", "--tensorboard", "false"}});
}

const Fixture& trained(const std::string& arch = "xcit_nano_12_p16") {
  static const fs::path root = [] {
    const fs::path r = xdino::testing::fresh_dir("export");
    xdino::testing::write_ppm_folder(r / "img", 4, 32, 32);
    return r;
  }();
  static std::map<std::string, Fixture> runs;
  if (const auto it = runs.find(arch); it != runs.end()) return it->second;
  Fixture f{root, root / "img", root / ("run_" + arch) / "checkpoint.pth"};
  const auto r = run_process(train_args(arch, f.data / "train", f.checkpoint.parent_path()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return runs.emplace(arch, f).first->second;
}

xdino::testing::ProcessResult dino(std::vector<std::string> args) {
  args.insert(args.begin(), dino_binary());
  return run_process(args);
}

// `dino features` of the val split at `size` pixels; extra: --arch, --mean, ... as needed.
fs::path features(const fs::path& weights, const fs::path& out, const std::string& size,
                  const std::vector<std::string>& extra) {
  std::vector<std::string> args{"features",
                                "--pretrained_weights",
                                weights.string(),
                                "--data_path",
                                trained().data.string(),
                                "--split",
                                "val",
                                "--image_size",
                                size,
                                "--output",
                                out.string(),
                                "--num_workers",
                                "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = dino(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

std::vector<std::string> val_images() {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(trained().data / "val"))
    if (e.is_regular_file()) out.push_back(fs::absolute(e.path()).string());
  std::sort(out.begin(), out.end());
  return out;
}

// timm_check.py's verdict on a timm folder against a features file.
xdino::Json timm_verdict(const fs::path& folder, const fs::path& features_h5) {
  std::vector<std::string> argv{pyenv_python(), repo_file("tests/support/timm_check.py"),
                                folder.string(), features_h5.string()};
  for (const std::string& p : val_images()) argv.push_back(p);
  const auto r = run_process(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return xdino::Json::parse(r.exit_code == 0 ? r.out : "{}");
}

std::string timm_missing() {
  return python_lacks({"timm", "safetensors", "h5py", "torchvision"}, pyenv_python());
}

torch::Tensor features_of(const fs::path& h5) { return xdino::eval::read_features(h5).features; }

}  // namespace

TEST(Export, TimmLoadsTheExportAndComputesOurFeatures) {
  if (const std::string why = timm_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  struct Case {
    const char *ours, *timm, *size;  // size: the run's global crops (a ViT's position table)
    int dim;
  };
  for (const Case& c : {Case{"xcit_nano_12_p16", "xcit_nano_12_p16_224", "32", 128},
                        Case{"vit_tiny", "vit_tiny_patch16_224", "32", 192},
                        Case{"resnet18", "resnet18", "32", 512}}) {
    SCOPED_TRACE(c.ours);
    const Fixture& f = trained(c.ours);
    const fs::path out = f.root / (std::string("timm_") + c.ours);
    const auto r =
        dino({"export", "--pretrained_weights", f.checkpoint.string(), "--output", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find(std::string("as timm's ") + c.timm), std::string::npos) << r.out;
    const xdino::Json config = xdino::Json::parse(xdino::read_file(out / "config.json"));
    EXPECT_EQ(config["pretrained_cfg"]["input_size"][1].dump(), c.size);
    EXPECT_EQ(config.value("num_features", 0), c.dim);
    const fs::path ours = features(f.checkpoint, f.root / "ours.h5", c.size, {"--arch", c.ours});
    const xdino::Json v = timm_verdict(out, ours);
    EXPECT_EQ(v.value("architecture", ""), c.timm);
    EXPECT_EQ(v["missing"], xdino::Json::array()) << v.dump();
    EXPECT_EQ(v["unexpected"], xdino::Json::array()) << v.dump();
    EXPECT_EQ(v.value("feature_dim", 0), c.dim);
    EXPECT_LE(v.value("max_difference", 1.0), 1e-5) << v.dump();
  }
}

TEST(Export, BothFormatsReadBackBitForBit) {
  const Fixture& f = trained();
  const fs::path timm_dir = f.root / "rt_timm", ours_dir = f.root / "rt_ours";
  ASSERT_EQ(
      dino({"export", "--pretrained_weights", f.checkpoint.string(), "--output", timm_dir.string()})
          .exit_code,
      0);
  const auto r = dino({"export", "--pretrained_weights", f.checkpoint.string(), "--format",
                       "safetensors", "--output", ours_dir.string(), "--with_head"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The two layouts differ where timm's XCiT differs: pos_embed, and q/k/v split.
  const auto timm_keys = xdino::read_safetensors(timm_dir / "model.safetensors").tensors.keys();
  const auto ours = xdino::read_safetensors(ours_dir / "model.safetensors");
  EXPECT_NE(std::find(timm_keys.begin(), timm_keys.end(), "cls_attn_blocks.0.attn.q.weight"),
            timm_keys.end());
  EXPECT_TRUE(ours.tensors.contains("cls_attn_blocks.0.attn.qkv.weight"));
  EXPECT_EQ(ours.metadata.at("arch"), "xcit_nano_12_p16");
  const auto head = xdino::read_safetensors(ours_dir / "dino_head.safetensors").tensors;
  EXPECT_EQ(head.size(), 8u);  // mlp.0, mlp.2, mlp.4 weight and bias, last_layer's g and v
  EXPECT_TRUE(head.contains("head.last_layer.weight_v"));

  const std::vector<std::string> arch{"--arch", "xcit_nano_12_p16"};
  const torch::Tensor reference =
      features_of(features(f.checkpoint, f.root / "ref.h5", "32", arch));
  EXPECT_TRUE(torch::equal(
      features_of(features(timm_dir / "model.safetensors", f.root / "t.h5", "32", arch)),
      reference));
  EXPECT_TRUE(torch::equal(
      features_of(features(ours_dir / "model.safetensors", f.root / "o.h5", "32", arch)),
      reference));
}

TEST(Export, ReadsWhatTimmSaves) {
  if (const std::string why = timm_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  const Fixture& f = trained();
  struct Case {
    const char *timm, *ours, *size;
  };
  for (const Case& c :
       {Case{"xcit_nano_12_p16_224", "xcit_nano_12_p16", "224"},
        Case{"vit_tiny_patch16_224", "vit_tiny", "224"}, Case{"resnet18", "resnet18", "224"}}) {
    SCOPED_TRACE(c.timm);
    const fs::path dir = f.root / (std::string("saved_") + c.timm);
    const auto saved = run_process(
        {pyenv_python(), repo_file("tests/support/timm_save.py"), c.timm, dir.string()});
    ASSERT_EQ(saved.exit_code, 0) << saved.err;
    // As a user would: the normalisation config.json states (ViT's augreg weights use 0.5).
    const xdino::Json cfg =
        xdino::Json::parse(xdino::read_file(dir / "config.json"))["pretrained_cfg"];
    std::vector<std::string> extra{"--arch", c.ours, "--mean"};
    for (double m : cfg["mean"]) extra.push_back(std::to_string(m));
    extra.push_back("--std");
    for (double s : cfg["std"]) extra.push_back(std::to_string(s));
    const fs::path h5 = features(dir / "model.safetensors", f.root / "in.h5", c.size, extra);
    const xdino::Json v = timm_verdict(dir, h5);
    EXPECT_LE(v.value("max_difference", 1.0), 1e-5) << v.dump();
  }
}

TEST(Export, TimmWeightsWarmStartTrainingAsThePthDoes) {
  if (const std::string why = timm_missing(); !why.empty()) XDINO_SKIP_MISSING() << why;
  const Fixture& f = trained();
  const fs::path dir = f.root / "warm", pth = f.root / "warm.pth";
  const auto saved = run_process({pyenv_python(), repo_file("tests/support/timm_save.py"),
                                  "xcit_nano_12_p16_224", dir.string(), pth.string()});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  std::vector<std::string> logs;
  std::vector<xdino::models::StateDict> students;
  for (const fs::path& weights : {dir / "model.safetensors", pth}) {
    const fs::path out = f.root / ("warm_run_" + weights.extension().string().substr(1));
    auto args = train_args("xcit_nano_12_p16", f.data / "train", out);
    args.insert(args.end(), {"--pretrained_weights", weights.string()});
    const auto r = run_process(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE((r.out + r.err).find("381 tensors loaded"), std::string::npos) << r.out << r.err;
    logs.push_back(xdino::read_file(out / "log.txt"));
    students.push_back(xdino::models::from_ivalue(
        xdino::load_pth(out / "checkpoint.pth").toGenericDict().at("student")));
  }
  EXPECT_EQ(logs[0], logs[1]);
  ASSERT_EQ(students[0].size(), students[1].size());
  for (const auto& item : students[0])
    EXPECT_TRUE(torch::equal(item.value(), students[1][item.key()])) << item.key();
}

TEST(Export, ModelCardCarriesTheEvaluationAndItsCurves) {
  const Fixture& f = trained();
  const fs::path knn = f.root / "knn", out = f.root / "card";
  const auto k =
      dino({"knn", "--arch", "xcit_nano_12_p16", "--pretrained_weights", f.checkpoint.string(),
            "--data_path", f.data.string(), "--image_size", "32", "--nb_knn", "2", "4",
            "--output_dir", knn.string(), "--num_workers", "1", "--tensorboard", "false"});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  const auto r = dino({"export", "--pretrained_weights", f.checkpoint.string(), "--output",
                       out.string(), "--runs", knn.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string card = xdino::read_file(out / "README.md");
  EXPECT_NE(card.find("library_name: timm"), std::string::npos) << card;
  EXPECT_NE(card.find("timm.create_model(\"local-dir:card\", pretrained=True)"), std::string::npos)
      << card;
  EXPECT_NE(card.find("| DINO | XCiT-N12/16"), std::string::npos) << card;
  EXPECT_NE(card.find("](curves.png)"), std::string::npos) << card;
  EXPECT_EQ(xdino::read_file(out / "curves.png"),
            xdino::read_file(f.checkpoint.parent_path() / "curves.png"));
  EXPECT_NE(card.find("| out_dim | `64` |"), std::string::npos) << card;
  EXPECT_EQ(card.find("| `` |"), std::string::npos) << "an empty flag as empty code: " << card;
  EXPECT_NE(card.find("| mean | (not set) |"), std::string::npos) << card;
}

TEST(Export, RefusesWithoutForceAndReplacesWholeWithIt) {
  const Fixture& f = trained();
  const fs::path out = f.root / "force";
  ASSERT_EQ(
      dino({"export", "--pretrained_weights", f.checkpoint.string(), "--output", out.string()})
          .exit_code,
      0);
  const std::string before = xdino::read_file(out / "model.safetensors");

  const auto refused = dino({"export", "--pretrained_weights", f.checkpoint.string(), "--format",
                             "safetensors", "--output", out.string()});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(count_lines(refused.err), 1u) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(xdino::read_file(out / "model.safetensors"), before);

  // Tab completion's trailing slash names the same folder.
  const auto forced = dino({"export", "--pretrained_weights", f.checkpoint.string(), "--format",
                            "safetensors", "--output", out.string() + "/", "--force"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_FALSE(fs::exists(out / "config.json"));  // the timm export's, gone with the folder
  EXPECT_TRUE(xdino::read_safetensors(out / "model.safetensors").metadata.count("arch"));
  for (const auto& e : fs::directory_iterator(f.root)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
    EXPECT_EQ(e.path().filename().string().find(".old-"), std::string::npos) << e.path();
  }
}

// --force replaces an earlier export, never anything else: a folder with a file an export
// does not write, a run folder holding the very checkpoint, a file. Each is one line naming
// what it holds, and keeps every byte.
TEST(Export, ForceReplacesOnlyAnEarlierExport) {
  const Fixture& f = trained();
  const fs::path mixed = f.root / "mixed";
  ASSERT_EQ(
      dino({"export", "--pretrained_weights", f.checkpoint.string(), "--output", mixed.string()})
          .exit_code,
      0);
  std::ofstream(mixed / "notes.txt") << "mine";
  const fs::path file = f.root / "a_file";
  std::ofstream(file) << "x";
  const fs::path run = f.checkpoint.parent_path();
  const std::string checkpoint = xdino::read_file(f.checkpoint);
  struct Case {
    fs::path output;
    std::string needle;
  };
  for (const Case& c : {Case{mixed, "was not written by dino export (it holds 'notes.txt')"},
                        Case{run, "was not written by dino export (it holds '"},
                        Case{fs::path(run.string() + "/"), "was not written by dino export"},
                        Case{file, "is not a folder"}}) {
    SCOPED_TRACE(c.output.string());
    const auto r = dino({"export", "--pretrained_weights", f.checkpoint.string(), "--output",
                         c.output.string(), "--force"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
  }
  EXPECT_EQ(xdino::read_file(mixed / "notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(mixed / "model.safetensors"));
  EXPECT_EQ(xdino::read_file(f.checkpoint), checkpoint);
  EXPECT_EQ(xdino::read_file(file), "x");
}

// A new folder named with a trailing slash is made beside its parent's other entries, not
// inside itself.
TEST(Export, ATrailingSlashNamesTheFolder) {
  const Fixture& f = trained();
  const fs::path out = f.root / "slash";
  const auto r = dino(
      {"export", "--pretrained_weights", f.checkpoint.string(), "--output", out.string() + "/"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(out / "model.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(out / "README.md"));
}

// A model of any channel count exports (the loaders' 4-channel limit is theirs): its
// normalisation comes from the checkpoint's args, and travels in the safetensors metadata, so
// the export exports again and evaluates without --mean/--std.
TEST(Export, ModelsOfFourAndFiveChannelsExportAndTheirStatisticsTravel) {
  const Fixture& f = trained();
  for (const int64_t channels : {int64_t{4}, int64_t{5}}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    xdino::models::BackboneOptions bo;
    bo.num_classes = 0;
    bo.img_size = 32;
    bo.in_chans = channels;
    torch::manual_seed(0);
    const auto model = xdino::models::create_backbone("xcit_nano_12_p16", bo);
    auto args = c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
    args.insert("arch", std::string("xcit_nano_12_p16"));
    args.insert("in_chans", channels);
    c10::impl::GenericList mean(c10::FloatType::get()), std(c10::FloatType::get());
    for (int64_t c = 0; c < channels; ++c) {
      mean.push_back(0.1 * static_cast<double>(c + 1));
      std.push_back(0.2);
    }
    args.insert("mean", mean);
    args.insert("std", std);
    auto file = c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
    file.insert("teacher", xdino::models::to_ivalue(xdino::models::state_dict(*model)));
    file.insert("args", args);
    const fs::path ckpt = f.root / ("chans" + std::to_string(channels) + ".pth");
    xdino::save_pth(ckpt, file);

    const fs::path once = f.root / ("chans_once_" + std::to_string(channels));
    const fs::path twice = f.root / ("chans_twice_" + std::to_string(channels));
    auto r = dino({"export", "--pretrained_weights", ckpt.string(), "--format", "safetensors",
                   "--output", once.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto meta = xdino::read_safetensors(once / "model.safetensors").metadata;
    EXPECT_EQ(meta.at("in_chans"), std::to_string(channels));
    EXPECT_EQ(meta.at("std"), channels == 4 ? "0.2 0.2 0.2 0.2" : "0.2 0.2 0.2 0.2 0.2");
    r = dino({"export", "--pretrained_weights", (once / "model.safetensors").string(), "--format",
              "safetensors", "--output", twice.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(xdino::read_safetensors(twice / "model.safetensors").metadata, meta);
  }
}

// A curves.png that is a link is not copied into the folder a user uploads, wherever it
// points; the card then leaves the curves out.
TEST(Export, ALinkedCurvesPngIsNotCopied) {
  const Fixture& f = trained();
  const fs::path run = f.root / "linked_run";
  fs::create_directories(run);
  fs::copy_file(f.checkpoint, run / "checkpoint.pth", fs::copy_options::overwrite_existing);
  std::ofstream(f.root / "secret.txt") << "not for the card";
  fs::remove(run / "curves.png");
  fs::create_symlink(f.root / "secret.txt", run / "curves.png");
  const fs::path knn = f.root / "linked_knn", out = f.root / "linked_card";
  const auto k = dino({"knn", "--arch", "xcit_nano_12_p16", "--pretrained_weights",
                       (run / "checkpoint.pth").string(), "--data_path", f.data.string(),
                       "--image_size", "32", "--nb_knn", "2", "--output_dir", knn.string(),
                       "--num_workers", "1", "--tensorboard", "false"});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  const auto r = dino({"export", "--pretrained_weights", (run / "checkpoint.pth").string(),
                       "--output", out.string(), "--runs", knn.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("is not a regular file (a link?)"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out / "curves.png"));
  EXPECT_EQ(xdino::read_file(out / "README.md").find("curves.png"), std::string::npos);
}

TEST(Export, BadRequestsAreOneLineAndWriteNothing) {
  const Fixture& f = trained();
  struct Case {
    std::vector<std::string> args;
    const char* needle;
  };
  const std::string ckpt = f.checkpoint.string();
  for (const Case& c : {
           Case{{"--pretrained_weights", ckpt, "--arch", "xcit_nano_4_p4"}, "--format safetensors"},
           Case{{"--pretrained_weights", ckpt, "--format", "onnx"}, "not one of timm, safetensors"},
           Case{{"--pretrained_weights", (f.root / "none.pth").string()}, "none.pth"},
           Case{{"--pretrained_weights", ckpt, "--arch", "xvit_tiny"}, "timm"},
           Case{{"--pretrained_weights", ckpt, "--image_size", "-5"}, "--image_size must be 0"},
       }) {
    const fs::path out = f.root / "refused";
    std::vector<std::string> args{"export", "--output", out.string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = dino(args);
    EXPECT_EQ(r.exit_code, 2) << c.needle << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.needle;
  }
}
