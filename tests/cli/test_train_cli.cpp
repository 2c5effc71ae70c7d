// `dino train` end to end through the binary on a tiny generated IDX dataset (64 random
// 28x28 images) with XCiT-nano at 32/16-pixel crops: outputs and resume, SIGTERM -> checkpoint
// + exit 0 + resumable, a non-finite loss -> one line + exit 1 + checkpoint untouched.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/atomic_file.h"
#include "core/ivalue.h"
#include "core/pth.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/train_fixture.h"

namespace fs = std::filesystem;
using xdino::testing::count_lines;
using xdino::testing::dino_binary;
using xdino::testing::run_process;
using xdino::testing::TempDir;

namespace {

std::vector<std::string> train_args(const fs::path& data, const fs::path& out, int epochs) {
  return {dino_binary(), "train", "--data_path", data.string(), "--output_dir", out.string(),
          "--arch", "xcit_nano_12_p16", "--out_dim", "64", "--global_crops_size", "32",
          "--local_crops_size", "16", "--local_crops_number", "2", "--batch_size_per_gpu", "8",
          "--epochs", std::to_string(epochs), "--warmup_epochs", "0", "--num_workers", "1",
          "--saveckp_freq", "1", "--device", "cpu",
          // Two replicas: signals, resume and the non-finite stop through a split step.
          "--replicas", "2"};
}

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override { xdino::testing::write_random_idx(data_.path(), 64); }
  TempDir data_, out_;
};

}  // namespace

TEST_F(TrainCli, WritesOutputsAndResumesWhenRerun) {
  auto r = run_process(train_args(data_.path(), out_.path(), 2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f :
       {"config.ini", "log.txt", "checkpoint.pth", "checkpoint0000.pth", "checkpoint0001.pth"})
    EXPECT_TRUE(fs::exists(out_.path() / f)) << f;
  EXPECT_EQ(count_lines(xdino::read_file(out_.path() / "log.txt")), 2u);
  EXPECT_NE(xdino::read_file(out_.path() / "config.ini").find("arch = xcit_nano_12_p16"),
            std::string::npos);
  EXPECT_NE(r.out.find("BLAS"), std::string::npos) << r.out;

  auto args = train_args(data_.path(), out_.path(), 3);  // one more epoch
  r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Found checkpoint"), std::string::npos) << r.out;
  EXPECT_EQ(count_lines(xdino::read_file(out_.path() / "log.txt")), 3u);
}

// config.ini records how checkpoint.pth was made (launch/session.h, config_record): a
// resume that is refused, or that stops before it saves, leaves it as it was, and so do the
// other commands pointed at the run's folder: knn writes config.knn.ini beside it, features
// its own record beside its file, and features never replace a checkpoint, even with
// --force. Before, each of these rewrote config.ini (features: also checkpoint.pth).
TEST_F(TrainCli, TheRunsConfigIsWrittenOnlyByTheRunThatMadeItsCheckpoint) {
  const fs::path out = out_.path();
  ASSERT_EQ(run_process(train_args(data_.path(), out, 1)).exit_code, 0);
  const std::string config = xdino::read_file(out / "config.ini");
  const std::string checkpoint = xdino::read_file(out / "checkpoint.pth");
  const auto expect_kept = [&](const std::string& after) {
    EXPECT_EQ(xdino::read_file(out / "config.ini"), config) << "after " << after;
    EXPECT_EQ(xdino::read_file(out / "checkpoint.pth"), checkpoint) << "after " << after;
  };
  auto refused = train_args(data_.path(), out, 2);
  refused.insert(refused.end(), {"--koleo_loss_weight", "0.1"});  // not the checkpoint's recipe
  auto r = run_process(refused);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  expect_kept("a refused resume");
  auto nan = train_args(data_.path(), out, 2);
  nan.insert(nan.end(), {"--lr", "1e30"});  // stops at its first step, before any save
  r = run_process(nan);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  expect_kept("a resume stopped by a non-finite loss");

  const fs::path images = out_.path().parent_path() / (out.filename().string() + "_img");
  xdino::testing::write_ppm_folder(images, 2, 32, 32);
  const std::vector<std::string> model{"--arch",
                                       "xcit_nano_12_p16",
                                       "--image_size",
                                       "32",
                                       "--pretrained_weights",
                                       (out / "checkpoint.pth").string(),
                                       "--num_workers",
                                       "1"};
  const auto dino = [&](std::vector<std::string> args) {
    args.insert(args.begin(), dino_binary());
    args.insert(args.end(), model.begin(), model.end());
    return run_process(args);
  };
  r = dino({"knn", "--data_path", images.string(), "--nb_knn", "1", "--output_dir", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  expect_kept("knn");
  EXPECT_NE(xdino::read_file(out / "config.knn.ini").find("[knn]"), std::string::npos);
  EXPECT_TRUE(fs::exists(out / "knn.json"));

  const auto features = [&](const fs::path& file, bool force) {
    std::vector<std::string> args{"features", "--data_path", images.string(), "--split",
                                  "val",      "--output",    file.string()};
    if (force) args.push_back("--force");
    return dino(args);
  };
  for (bool force : {false, true}) {
    r = features(out / "checkpoint.pth", force);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("features never replace it, even with --force"), std::string::npos)
        << r.err;
    expect_kept(force ? "features --force onto checkpoint.pth" : "features onto checkpoint.pth");
  }
  std::ofstream(out / "notes.dat") << "mine";
  r = features(out / "notes.dat", false);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("exists and is not a feature file"), std::string::npos) << r.err;
  EXPECT_EQ(xdino::read_file(out / "notes.dat"), "mine");
  EXPECT_EQ(features(out / "notes.dat", true).exit_code, 0);
  r = features(out / "val.h5", false);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(features(out / "val.h5", false).exit_code, 0) << "an earlier feature file is replaced";
  EXPECT_NE(xdino::read_file(out / "val.config.ini").find("[features]"), std::string::npos);
  expect_kept("features into the run's folder");

  // The run itself, resumed for good, records its new flags once it has saved.
  r = run_process(train_args(data_.path(), out, 2));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(xdino::read_file(out / "config.ini").find("epochs = 2"), std::string::npos);
  fs::remove_all(images);
}

TEST_F(TrainCli, SigtermSavesACheckpointExitsZeroAndResumes) {
  const auto args = train_args(data_.path(), out_.path(), 200);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  // Let it finish an epoch and get into the next one, then ask it to stop.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!fs::exists(out_.path() / "checkpoint0000.pth") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal instead of exiting";
  EXPECT_EQ(WEXITSTATUS(status), 0);

  const auto ckpt = xdino::load_pth(out_.path() / "checkpoint.pth").toGenericDict();
  const int64_t next = ckpt.at("xdino_resume").toGenericDict().at("iteration").toInt();
  EXPECT_GT(next, 8);  // past epoch 0 (8 iterations per epoch)
  EXPECT_LT(next, 200 * 8);
  // Rerun with fewer epochs than were planned so that it ends soon: it resumes from `next`.
  auto again = train_args(data_.path(), out_.path(), static_cast<int>(next / 8) + 1);
  const auto r = run_process(again);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Starting DINO training at epoch " + std::to_string(next / 8) +
                       ", iteration " + std::to_string(next)),
            std::string::npos)
      << r.out;
}

TEST_F(TrainCli, NonFiniteLossExitsOneAndKeepsTheCheckpoint) {
  ASSERT_EQ(run_process(train_args(data_.path(), out_.path(), 1)).exit_code, 0);
  const std::string before = xdino::read_file(out_.path() / "checkpoint.pth");
  auto args = train_args(data_.path(), out_.path(), 2);
  args.insert(args.end(), {"--lr", "1e30"});  // the first step blows the weights up
  const auto r = run_process(args);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("non-finite"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("iteration"), std::string::npos) << r.err;
  EXPECT_EQ(xdino::read_file(out_.path() / "checkpoint.pth"), before);
  EXPECT_FALSE(fs::exists(out_.path() / "checkpoint0001.pth"));
}

// The learning monitor's measurements before training (the initial teacher, a copy of it with
// the data's BatchNorm statistics, raw pixels; launch/learning_monitor.h) and after each epoch
// only read the teacher: the networks a run trains are the same, tensor for tensor, with and
// without --knn_every (the copy draws initial weights from the global generator, which drop
// path then reads: that draw must not show).
TEST(TrainCliMonitor, TrainsTheSameNetworksWithAndWithoutTheMonitor) {
  TempDir data, with, without;
  xdino::testing::write_ppm_folder(data.path(), 12, 32, 32);  // 2 classes, 24 train, 24 val
  auto args = train_args(data.path() / "train", with.path(), 1);
  args.insert(args.end(), {"--knn_every", "1", "--knn_data_path", data.path().string(),
                           "--knn_train_samples", "24", "--knn_val_samples", "8"});
  auto r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string reference = xdino::read_file(with.path() / "knn_reference.json");
  EXPECT_NE(reference.find("\"knn_top1_random_bn\": "), std::string::npos) << reference;
  EXPECT_EQ(reference.find("\"knn_top1_random_bn\": null"), std::string::npos)
      << "XCiT has BatchNorm: " << reference;
  r = run_process(train_args(data.path() / "train", without.path(), 1));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(without.path() / "knn_reference.json"));

  const auto a = xdino::as_dict(xdino::load_pth(with.path() / "checkpoint.pth"), "checkpoint");
  const auto b = xdino::as_dict(xdino::load_pth(without.path() / "checkpoint.pth"), "checkpoint");
  for (const char* net : {"student", "teacher"}) {
    const auto x = xdino::as_dict(xdino::get(a, net, "checkpoint"), net);
    const auto y = xdino::as_dict(xdino::get(b, net, "checkpoint"), net);
    ASSERT_EQ(x.size(), y.size()) << net;
    ASSERT_GT(x.size(), 0u) << net;
    for (const auto& item : x) {
      const std::string key = item.key().toStringRef();
      EXPECT_TRUE(item.value().toTensor().equal(xdino::get(y, key, net).toTensor()))
          << net << " " << key;
    }
  }
}

// DINOv2's options through the binary (ssl/recipe.h): the online k-NN copies a teacher that
// has a mask token, log.txt and TensorBoard get each term, config.ini the flags, and the
// evaluations read the checkpoint as any other (its mask token and iBOT head set aside).
TEST(TrainCliRecipe, Dinov2OptionsReachEveryOutput) {
  TempDir data, out, knn;
  xdino::testing::write_ppm_folder(data.path(), 12, 32, 32);
  auto args = train_args(data.path() / "train", out.path(), 1);
  args.insert(args.end(),
              {"--knn_every", "1", "--knn_data_path", data.path().string(), "--knn_train_samples",
               "24", "--knn_val_samples", "8", "--koleo_loss_weight", "0.1", "--centering",
               "sinkhorn_knopp", "--ibot_loss_weight", "1", "--ibot_separate_head", "true"});
  auto r = run_process(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Recipe: DINO + KoLeo 0.1 + Sinkhorn-Knopp + iBOT 1.0 (separate head)"),
            std::string::npos)
      << r.out;
  const std::string log = xdino::read_file(out.path() / "log.txt");
  for (const char* key : {"train_dino_loss", "train_koleo_loss", "train_ibot_loss", "knn_top1"})
    EXPECT_NE(log.find(key), std::string::npos) << key << " in " << log;
  const std::string ini = xdino::read_file(out.path() / "config.ini");
  EXPECT_NE(ini.find("ibot_loss_weight = 1"), std::string::npos) << ini;
  r = run_process({dino_binary(), "knn", "--arch", "xcit_nano_12_p16", "--data_path",
                   data.path().string(), "--pretrained_weights",
                   (out.path() / "checkpoint.pth").string(), "--image_size", "32", "--nb_knn", "5",
                   "--output_dir", knn.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(knn.path() / "knn.json"));
  EXPECT_NE(r.out.find("ignored"), std::string::npos) << r.out;
}
