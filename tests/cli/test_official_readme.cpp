// Every command line of the official DINO README (facebookresearch/dino at 7c446df), replayed by
// a shell as typed there, after the rename README.md's "Coming from the official code" gives:
// `python -m torch.distributed.launch` -> `dino launch`, `python <script>.py` -> `dino <command>`.
// The README's placeholder paths (/path/to/imagenet, $HOME/davis-2017/DAVIS/, ...) lead to small
// sets in the layouts each script reads, and each line gets the limits written beside it in the
// table below, so that CI can hold them: one epoch, a small batch and 2 local crops, 2 processes
// where it asks for 8, k-NN's k below the 8 training images, copy detection at 64 px on a
// Copydays of 4 originals. A limit is appended, so it overrides a flag of the line as argparse
// does, and nothing else of the line changes. A line the official script refuses here must be
// refused: offline, `eval_linear.py --evaluate` and a bare `visualize_attention.py` must
// download weights or an image, and so fail; ours stop with one line and exit 2. Two kinds of
// lines are not replayed here, for these reasons:
//  - video_generation.py's three lines: Visualize.TheOfficialReadmeVideoCommandLinesRunAsTyped
//    (test_visualize.cpp) replays them with checks of the frames and videos they write;
//  - davis2017-evaluation's evaluation_method.py: another project's tool. `dino
//    video_segmentation` computes J&F itself.
// run_with_submitit.py's launcher flags (--nodes, --ngpus, --use_volta32) are SLURM's business
// here (launch/slurm/dino_train.sbatch); the training flags of those lines are replayed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "eval/retrieval/image_retrieval.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"
#include "tests/support/retrieval_fixture.h"

namespace fs = std::filesystem;
using xdino::testing::kPython;
using xdino::testing::last_line;
using xdino::testing::run_process;

namespace {

struct Line {
  std::string official;  // as the official README prints it
  std::string limits;    // appended for CI
  int exit_code;         // 0, or 2 where the official script fails offline too
};

const std::string kTrain =
    " --epochs 1 --warmup_epochs 0 --batch_size_per_gpu 2 --local_crops_number 2 --num_workers 1";

// In the order of the official README.
const std::vector<Line>& readme_lines() {
  static const std::vector<Line> lines = {
      {"python main_dino.py --help", "", 0},
      {"python -m torch.distributed.launch --nproc_per_node=8 main_dino.py --arch vit_small "
       "--data_path /path/to/imagenet/train --output_dir /path/to/saving_dir",
       kTrain, 0},
      {"python run_with_submitit.py --nodes 2 --ngpus 8 --arch vit_small --data_path "
       "/path/to/imagenet/train --output_dir /path/to/saving_dir",
       kTrain, 0},
      {"python run_with_submitit.py --nodes 2 --ngpus 8 --use_volta32 --arch vit_base  "
       "--data_path /path/to/imagenet/train --output_dir /path/to/saving_dir",
       kTrain, 0},
      {"python run_with_submitit.py --arch vit_small --epochs 300 --teacher_temp 0.07 "
       "--warmup_teacher_temp_epochs 30 --norm_last_layer false --data_path "
       "/path/to/imagenet/train --output_dir /path/to/saving_dir",
       kTrain + " --warmup_teacher_temp_epochs 0", 0},
      {"python -m torch.distributed.launch --nproc_per_node=8 main_dino.py --arch resnet50 "
       "--optimizer sgd --lr 0.03 --weight_decay 1e-4 --weight_decay_end 1e-4 "
       "--global_crops_scale 0.14 1 --local_crops_scale 0.05 0.14 --data_path "
       "/path/to/imagenet/train --output_dir /path/to/saving_dir",
       kTrain, 0},
      {"python visualize_attention.py", "", 2},
      {"python -m torch.distributed.launch --nproc_per_node=1 eval_knn.py --data_path "
       "/path/to/imagenet",
       " --nb_knn 5 --num_workers 1", 0},
      {"python -m torch.distributed.launch --nproc_per_node=1 eval_knn.py --pretrained_weights "
       "/path/to/checkpoint.pth --checkpoint_key teacher --data_path /path/to/imagenet ",
       " --nb_knn 5 --num_workers 1", 0},
      {"python -m torch.distributed.launch --nproc_per_node=8 eval_linear.py --data_path "
       "/path/to/imagenet",
       " --epochs 1 --batch_size_per_gpu 4 --num_workers 1", 0},
      {"python eval_linear.py --evaluate --arch vit_small --patch_size 16 --data_path "
       "/path/to/imagenet/train",
       "", 2},
      {"python eval_linear.py --evaluate --arch vit_small --patch_size 8 --data_path "
       "/path/to/imagenet/train",
       "", 2},
      {"python eval_linear.py --evaluate --arch vit_base --patch_size 16 --n_last_blocks 1 "
       "--avgpool_patchtokens true --data_path /path/to/imagenet/train",
       "", 2},
      {"python eval_linear.py --evaluate --arch vit_base --patch_size 8 --n_last_blocks 1 "
       "--avgpool_patchtokens true --data_path /path/to/imagenet/train",
       "", 2},
      {"python eval_linear.py --evaluate --arch resnet50 --data_path /path/to/imagenet/train", "",
       2},
      {"python eval_video_segmentation.py --data_path $HOME/davis-2017/DAVIS/ --output_dir "
       "/path/to/saving_dir",
       "", 0},
      {"python -m torch.distributed.launch --use_env --nproc_per_node=1 eval_image_retrieval.py "
       "--imsize 512 --multiscale 1 --data_path /path/to/revisited_paris_oxford/ --dataset "
       "rparis6k",
       " --num_workers 1", 0},
      {"python -m torch.distributed.launch --use_env --nproc_per_node=1 eval_image_retrieval.py "
       "--imsize 224 --multiscale 0 --data_path /path/to/revisited_paris_oxford/ --dataset "
       "roxford5k",
       " --num_workers 1", 0},
      {"python -m torch.distributed.launch --use_env --nproc_per_node=1 eval_copy_detection.py "
       "--data_path /path/to/copydays/ --whitening_path /path/to/whitening_data/ "
       "--distractors_path /path/to/distractors/",
       " --imsize 64 --num_workers 1", 0},
  };
  return lines;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// The rename of README.md's "Coming from the official code"; run_with_submitit.py keeps its
// training flags (see the top of this file).
std::string renamed(std::string line) {
  replace_all(line, "python -m torch.distributed.launch ", "dino launch ");
  replace_all(line, "python run_with_submitit.py --nodes 2 --ngpus 8 --use_volta32 ",
              "dino train ");
  replace_all(line, "python run_with_submitit.py --nodes 2 --ngpus 8 ", "dino train ");
  replace_all(line, "python run_with_submitit.py ", "dino train ");
  const std::pair<const char*, const char*> scripts[] = {
      {"main_dino.py", "train"},
      {"eval_knn.py", "knn"},
      {"eval_linear.py", "linear"},
      {"eval_video_segmentation.py", "video_segmentation"},
      {"eval_image_retrieval.py", "retrieval"},
      {"eval_copy_detection.py", "copy_detection"},
      {"visualize_attention.py", "visualize"}};
  for (const auto& [script, command] : scripts) {
    replace_all(line, std::string("python ") + script, std::string("dino ") + command);
    replace_all(line, std::string(" ") + script, std::string(" ") + command);
  }
  return line;
}

class OfficialReadme : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = xdino::testing::fresh_dir("official_readme");
    for (const char* m : {"PIL", "numpy", "skimage"})
      if (!xdino::testing::python_has(m)) {
        missing_ = std::string(kPython) + " cannot import " + m;
        return;
      }
    // ImageNet's layout: 2 classes, 4 images each in train/ and val/.
    xdino::testing::write_ppm_folder(root_ / "imagenet", 4, 48, 40);
    const auto make = [](const std::string& script, const std::vector<std::string>& args) {
      std::vector<std::string> argv = {
          kPython, (fs::path(xdino::testing::test_data_dir()) / script).string()};
      argv.insert(argv.end(), args.begin(), args.end());
      const auto r = run_process(argv);
      ASSERT_EQ(r.exit_code, 0) << script << ": " << r.err;
    };
    make("video/make_davis.py", {(root_ / "davis-2017" / "DAVIS").string(), "4"});
    // 4 of its 12 originals: ViT-B/8's features of the 286 images of the whole set took 40 s,
    // and this test checks that the line runs, not what it finds.
    make("retrieval/make_sets.py", {"copydays", (root_ / "copydays").string(), "--originals", "4"});
    make("retrieval/make_sets.py", {"revisited", (root_ / "revisited").string()});
    // The sets' revisited Oxford, pickled as the official gnd files, under both names.
    const auto ground = xdino::testing::ground_from_json(root_ / "revisited" / "ground.json");
    const fs::path paris = root_ / "revisited" / "rparis6k";
    fs::create_directories(paris);
    fs::copy(root_ / "revisited" / "roxford5k" / "jpg", paris / "jpg");
    xdino::eval::retrieval::write_revisited_ground(
        root_ / "revisited" / "roxford5k" / "gnd_roxford5k.pkl", ground);
    xdino::eval::retrieval::write_revisited_ground(paris / "gnd_rparis6k.pkl", ground);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // The line renamed, its paths leading to the sets, its limits appended; run by /bin/sh in
  // the sets' folder with HOME there (the DAVIS line reads $HOME).
  static xdino::testing::ProcessResult replay(const Line& line, size_t index) {
    std::string command = renamed(line.official) + line.limits;
    const fs::path out = root_ / ("run" + std::to_string(index));
    replace_all(command, "/path/to/saving_dir", out.string());
    replace_all(command, "/path/to/imagenet", (root_ / "imagenet").string());
    replace_all(command, "/path/to/checkpoint.pth", (root_ / "run1" / "checkpoint.pth").string());
    replace_all(command, "/path/to/revisited_paris_oxford/", (root_ / "revisited/").string());
    replace_all(command, "/path/to/copydays/", (root_ / "copydays/").string());
    replace_all(command, "/path/to/whitening_data/", (root_ / "copydays" / "whitening/").string());
    replace_all(command, "/path/to/distractors/", (root_ / "copydays" / "distractors/").string());
    replace_all(command, "--nproc_per_node=8", "--nproc_per_node=2");
    EXPECT_EQ(command.find("/path/to"), std::string::npos) << command;
    command.replace(0, std::string("dino").size(), xdino::testing::dino_binary());
    std::printf("replaying: %s\n", command.c_str());
    return run_process({"/bin/sh", "-c", "cd '" + root_.string() + "' && " + command},
                       {{"HOME", root_.string()}}, 900);
  }

  static fs::path root_;
  static std::string missing_;
};
fs::path OfficialReadme::root_;
std::string OfficialReadme::missing_;

}  // namespace

TEST(OfficialReadmeRename, NamesEveryScriptOfTheReadme) {
  EXPECT_EQ(renamed("python -m torch.distributed.launch --nproc_per_node=1 eval_knn.py --x 1"),
            "dino launch --nproc_per_node=1 knn --x 1");
  EXPECT_EQ(renamed("python run_with_submitit.py --nodes 2 --ngpus 8 --use_volta32 --arch a"),
            "dino train --arch a");
  EXPECT_EQ(renamed("python visualize_attention.py"), "dino visualize");
  for (const Line& line : readme_lines()) {
    const std::string r = renamed(line.official);
    EXPECT_EQ(r.find("python"), std::string::npos) << r;
    EXPECT_EQ(r.find(".py"), std::string::npos) << r;
    EXPECT_EQ(r.rfind("dino ", 0), 0u) << r;
  }
}

// Each line in the README's order; a refused line must say why in one line. The k-NN line with
// --pretrained_weights reads the checkpoint that the second line's training wrote.
TEST_F(OfficialReadme, EveryCommandLineRunsAsTyped) {
  if (!missing_.empty()) XDINO_SKIP_MISSING() << missing_;
  const auto& lines = readme_lines();
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i].official);
    const auto r = replay(lines[i], i);
    EXPECT_EQ(r.exit_code, lines[i].exit_code) << r.out << r.err;
    if (lines[i].exit_code == 2) {
      EXPECT_NE(last_line(r.err).find("error:"), std::string::npos) << r.err;
      std::printf("  refused, as offline there: %s\n", last_line(r.err).c_str());
    } else if (lines[i].official.find("--help") == std::string::npos) {
      std::printf("  ok in %.1f s: %s\n", r.seconds, last_line(r.out).c_str());
    }
  }
  // What the runs left where the official scripts leave it.
  EXPECT_TRUE(fs::exists(root_ / "run1" / "checkpoint.pth"));
  EXPECT_TRUE(fs::exists(root_ / "run5" / "checkpoint.pth"));
  EXPECT_FALSE(fs::is_empty(root_ / "run15"));
}
