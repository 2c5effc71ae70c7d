// `dino pipeline`: stages run in order with their [subcommand:variant] sections, finished
// stages are reused on a rerun, and a changed stage reruns alone, from scratch where what it
// would resume was made from other inputs (the linear probe of a retrained backbone).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace fs = std::filesystem;
using xdino::testing::dino_binary;
using xdino::testing::fixture;
using xdino::testing::run_process;

namespace {

void write_config(const fs::path& file, const fs::path& out, double threshold_b) {
  std::ofstream(file) << "# two visualisation runs of one image\n"
                      << "arch = xcit_nano_12_p16\n"
                      << "[pipeline]\nstages = visualize:a visualize:b\n"
                      << "[visualize]\nimage_path = " << fixture("augment/photo_a.png").string()
                      << "\nimage_size = 0\n"
                      << "[visualize:a]\noutput_dir = " << (out / "a").string() << "\n"
                      << "[visualize:b]\noutput_dir = " << (out / "b").string()
                      << "\nthreshold = " << threshold_b << "\n";
}

}  // namespace

TEST(Pipeline, RunsStagesAndReusesFinishedOnes) {
  const fs::path dir = xdino::testing::fresh_dir("pipeline");
  const fs::path ini = dir / "p.ini";
  write_config(ini, dir, 0.5);
  auto r = run_process({dino_binary(), "pipeline", "--config", ini.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "a" / "overview.png"));
  EXPECT_FALSE(fs::exists(dir / "a" / "mask_th0.5_head0.png")) << "[visualize:b] leaked into a";
  EXPECT_TRUE(fs::exists(dir / "b" / "mask_th0.5_head0.png"));
  EXPECT_NE(r.out.find("pipeline done"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find((dir / "b").string()), std::string::npos) << "the summary names outputs";

  r = run_process({dino_binary(), "pipeline", "--config", ini.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t reused = 0;
  for (size_t p = r.out.find("reused"); p != std::string::npos; p = r.out.find("reused", p + 1))
    ++reused;
  EXPECT_EQ(reused, 2u) << r.out;

  write_config(ini, dir, 0.7);  // only stage b changes
  r = run_process({dino_binary(), "pipeline", "--config", ini.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("visualize:a: done before"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("visualize:b: done before"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "b" / "mask_th0.7_head0.png"));
  fs::remove_all(dir);
}

TEST(Pipeline, AStageWhoseInputChangedRunsAgain) {
  // The stage's configuration stays the same; the file it reads is replaced. A marker that
  // records only the configuration reused the stale result.
  const fs::path dir = xdino::testing::fresh_dir("pipeline_inputs");
  const fs::path image = dir / "input.png";
  fs::copy_file(fixture("augment/photo_a.png"), image);
  std::ofstream(dir / "p.ini") << "arch = xcit_nano_12_p16\n[pipeline]\nstages = visualize\n"
                               << "[visualize]\nimage_path = " << image.string()
                               << "\nimage_size = 0\noutput_dir = " << (dir / "v").string() << "\n";
  const std::vector<std::string> cmd = {dino_binary(), "pipeline", "--config",
                                        (dir / "p.ini").string()};
  auto r = run_process(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_process(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("visualize: done before"), std::string::npos) << r.out;

  const auto before = fs::last_write_time(dir / "v" / "overview.png");
  fs::copy_file(fixture("augment/photo_b.png"), image, fs::copy_options::overwrite_existing);
  r = run_process(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("visualize: done before"), std::string::npos) << r.out;
  EXPECT_NE(fs::last_write_time(dir / "v" / "overview.png"), before) << "pictures not redrawn";
  fs::remove_all(dir);
}

// More epochs of pretraining rewrite the checkpoint that the linear stage reads. The stage
// reran, but `dino linear` resumed the probe in its output folder (eval_linear.py's restart),
// found its epochs done and reported the old backbone's accuracy as the new one's (seen on a
// GPU, bench/results/gpu.md "The main job on a GPU").
TEST(Pipeline, ALinearStageOnRetrainedWeightsTrainsItsProbeAgain) {
  const fs::path dir = xdino::testing::fresh_dir("pipeline_linear");
  fs::create_directories(dir / "data");
  xdino::testing::write_random_idx(dir / "data", 64);
  for (const char* kind : {"images-idx3", "labels-idx1"})  // the val split: the same images
    fs::copy_file(dir / "data" / ("train-" + std::string(kind) + "-ubyte"),
                  dir / "data" / ("t10k-" + std::string(kind) + "-ubyte"));
  const fs::path ini = dir / "p.ini";
  const auto write = [&](int epochs) {
    std::ofstream(ini) << "arch = xcit_nano_12_p16\ndata_path = " << (dir / "data").string()
                       << "\nnum_workers = 1\n[pipeline]\nstages = train linear\n"
                       << "[train]\noutput_dir = " << (dir / "run").string() << "\n"
                       << "out_dim = 64\nglobal_crops_size = 32\nlocal_crops_size = 16\n"
                       << "local_crops_number = 2\nbatch_size_per_gpu = 16\nepochs = " << epochs
                       << "\nwarmup_epochs = 0\ndevice = cpu\n"
                       << "[linear]\npretrained_weights = " << (dir / "run/checkpoint.pth").string()
                       << "\ncached_features = true\nimage_size = 32\nepochs = 1\nnum_labels = 10"
                       << "\nbatch_size_per_gpu = 16\noutput_dir = " << (dir / "linear").string()
                       << "\n";
  };
  const auto probe_epochs = [&] {
    const std::string log = xdino::read_file(dir / "linear" / "log.txt");
    return std::count(log.begin(), log.end(), '\n');
  };
  write(1);
  auto r = run_process({dino_binary(), "pipeline", "--config", ini.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(probe_epochs(), 1);
  const std::string first_config = xdino::read_file(dir / "linear" / "config.ini");
  const auto event_files = [](const fs::path& d) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d))
      if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
        names.push_back(e.path().filename().string());
    return names;
  };
  const auto first_events = event_files(dir / "linear");
  ASSERT_FALSE(first_events.empty()) << "the probe wrote its TensorBoard events";

  write(2);  // training resumes at epoch 1 and replaces run/checkpoint.pth
  r = run_process({dino_binary(), "pipeline", "--config", ini.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE((r.out + r.err).find("holds a probe trained on other features"), std::string::npos)
      << r.out << r.err;
  EXPECT_EQ(probe_epochs(), 1) << "the probe was not trained afresh on the new weights";
  // The finished probe of the old weights is kept beside, never overwritten: its whole record,
  // its config.ini and its TensorBoard events (unpruned) with it.
  for (const char* name : {"checkpoint.pth", "log.txt", "linear.json", "config.ini"})
    EXPECT_TRUE(fs::is_regular_file(dir / "linear" / "replaced" / "1" / name)) << name;
  EXPECT_EQ(xdino::read_file(dir / "linear" / "replaced" / "1" / "config.ini"), first_config);
  EXPECT_EQ(event_files(dir / "linear" / "replaced" / "1"), first_events);
  EXPECT_TRUE(fs::is_regular_file(dir / "linear" / "config.ini"));  // the new probe's own

  // The same weights again: the probe resumes, as eval_linear.py's does, and has nothing to do;
  // so it does when they are named by a relative path (weights are known by their content).
  r = run_process({dino_binary(), "linear", "--config", ini.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Resuming from"), std::string::npos) << r.out;
  r = run_process({"/bin/bash", "-c",
                   "cd '" + dir.string() + "' && '" + dino_binary() + "' linear --config '" +
                       ini.string() + "' --pretrained_weights run/checkpoint.pth"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Resuming from"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(probe_epochs(), 1);
  EXPECT_FALSE(fs::exists(dir / "linear" / "replaced" / "2"));
  fs::remove_all(dir);
}

TEST(Pipeline, AFailingStageStopsWithItsExitCode) {
  const fs::path dir = xdino::testing::fresh_dir("pipeline_fail");
  std::ofstream(dir / "p.ini") << "[pipeline]\nstages = visualize\n[visualize]\narch = nosuch\n"
                               << "image_path = " << fixture("augment/photo_a.png").string()
                               << "\noutput_dir = " << (dir / "v").string() << "\n";
  const auto r = run_process({dino_binary(), "pipeline", "--config", (dir / "p.ini").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
  const auto none = run_process({dino_binary(), "pipeline"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("stages"), std::string::npos) << none.err;
  fs::remove_all(dir);
}

// Before: the stopped train stage returned 0, the next stages evaluated the partial
// checkpoint and the train marker made a rerun skip the rest of the training. With
// train_nproc = 2 the signal reaches the pipeline's launcher, which forwards it to both ranks.
static void expect_a_signal_stops_training(int train_nproc) {
  const fs::path dir = xdino::testing::fresh_dir("pipeline_signal_" + std::to_string(train_nproc));
  fs::create_directories(dir / "data");
  xdino::testing::write_random_idx(dir / "data", 64);
  const fs::path ini = dir / "p.ini";
  std::ofstream(ini) << "arch = xcit_nano_12_p16\ndata_path = " << (dir / "data").string() << "\n"
                     << "[pipeline]\nstages = train visualize\ntrain_nproc = " << train_nproc
                     << "\n"
                     << "[train]\noutput_dir = " << (dir / "run").string() << "\n"
                     << "out_dim = 64\nglobal_crops_size = 32\nlocal_crops_size = 16\n"
                     << "local_crops_number = 2\nbatch_size_per_gpu = 8\nepochs = 200\n"
                     << "warmup_epochs = 0\nnum_workers = 1\nsaveckp_freq = 1\ndevice = cpu\n"
                     << "[visualize]\npretrained_weights = "
                     << (dir / "run/checkpoint.pth").string()
                     << "\nimage_path = " << fixture("augment/photo_a.png").string()
                     << "\noutput_dir = " << (dir / "pictures").string() << "\n";
  const int pid =
      xdino::testing::start_process({dino_binary(), "pipeline", "--config", ini.string()},
                                    (dir / "out.txt").string(), (dir / "err.txt").string());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!fs::exists(dir / "run" / "checkpoint0000.pth") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(dir / "run" / "checkpoint0000.pth"));
  kill(pid, SIGTERM);
  const auto r = xdino::testing::wait_process(pid, 120);
  EXPECT_EQ(r.exit_code, 0);
  std::ifstream in(dir / "out.txt");
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(out.find("stopped by signal 15 during stage train"), std::string::npos) << out;
  EXPECT_EQ(out.find("stage 2/2"), std::string::npos) << "visualize ran on a partial run\n" << out;
  EXPECT_FALSE(fs::exists(dir / "pictures"));
  EXPECT_FALSE(fs::exists(dir / "run" / ".pipeline-train.done")) << "train marked done";
  if (train_nproc > 1) {
    EXPECT_NE(out.find("launched " + std::to_string(train_nproc) + " processes"), std::string::npos)
        << out;
  }
  fs::remove_all(dir);
}

TEST(Pipeline, ASignalDuringTrainingStopsThePipelineWithoutMarkingTheStageDone) {
  expect_a_signal_stops_training(1);
}

TEST(Pipeline, ASignalReachesTheRanksOfALaunchedTrainStage) { expect_a_signal_stops_training(2); }
