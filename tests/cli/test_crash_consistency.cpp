// Crash consistency of `dino train`, through the real binary.
//  - SIGKILL at random moments, at least 20 times, the same command rerun after each: the
//    files of the finished run equal those of an uninterrupted run byte for byte, log.txt
//    and checkpoints included, and once checkpoint.pth exists it is never missing or partial.
//    XDINO_TEST_WRITE_DELAY_MS widens the window between writing a file and renaming it into
//    place (core/atomic_file.cpp), so that many kills land inside checkpoint writes.
//  - A write that fails (a file-size limit gives EFBIG, as a full disk gives ENOSPC): one line
//    naming the file and the error, exit 1, the previous checkpoint untouched.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/atomic_file.h"
#include "core/pth.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace cli = xdino::testing::cli;
namespace fs = std::filesystem;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

std::vector<std::string> train_argv(const fs::path& data, const fs::path& out, int epochs) {
  return cli::concat(
      {{dino_binary(), "train", "--arch", "xcit_nano_12_p16", "--data_path",
        (data / "train").string()},
       cli::epochs(epochs, 1),
       {"--batch_size_per_gpu", "4"},
       cli::dino_head(64, 32, 16),
       cli::multi_crop(32, 16, 1),
       {"--num_workers", "1", "--device", "cpu", "--use_fp16", "false", "--saveckp_freq", "2",
        "--knn_every", "1", "--knn_data_path", data.string(), "--output_dir", out.string()}});
}

std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos)
      found.push_back(e.path().filename().string());
  return found;
}

TEST(CrashConsistency, KilledAtRandomAndRerunEqualsAnUninterruptedRun) {
  const fs::path root = xdino::testing::fresh_dir("crash_kill");
  xdino::testing::write_ppm_folder(root / "img", 6, 32, 32);
  constexpr int kEpochs = 8;

  // The uninterrupted run, made in the same folder (its path is in the checkpoint's args).
  const auto ref = run_process(train_argv(root / "img", root / "run", kEpochs), {}, 600);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  fs::rename(root / "run", root / "ref");

  // Kills spread over the whole killed run (slower than `ref` by the write delays): startup,
  // resume, training steps, the online k-NN and checkpoint writes. A run that finishes is
  // compared with `ref`, then started again from nothing, until 20 kills have landed. Every
  // other kill waits for checkpoint.pth first, so that resumes (and kills during later
  // checkpoint writes) do not depend on how the random delays fall against a loaded machine's
  // speed (a CI run once had 4 of 20).
  std::mt19937 rng(2026);
  std::uniform_real_distribution<double> delay(0.05, std::max(2.0, 1.5 * ref.seconds));
  std::uniform_real_distribution<double> after_checkpoint(0.05, std::max(1.0, 0.5 * ref.seconds));
  const std::map<std::string, std::string> env{{"XDINO_TEST_WRITE_DELAY_MS", "200"}};
  const fs::path ckpt = root / "run" / "checkpoint.pth";
  int kills = 0, kills_with_checkpoint = 0, starts = 0, completed = 0;
  while (kills < 20 && starts < 200) {
    bool seen_checkpoint = false;
    for (;;) {
      ++starts;
      const int pid = xdino::testing::start_process(train_argv(root / "img", root / "run", kEpochs),
                                                    (root / "out.txt").string(),
                                                    (root / "err.txt").string(), env);
      if (kills < 20) {
        if (kills % 2 == 1) {
          // Until a checkpoint exists; a finished process stays a zombie until waited for, so
          // its pid cannot be reused meanwhile (and a run always ends with a checkpoint).
          const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
          while (!fs::exists(ckpt) && std::chrono::steady_clock::now() < give_up)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
          std::this_thread::sleep_for(std::chrono::duration<double>(after_checkpoint(rng)));
        } else {
          std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng)));
        }
        ::kill(pid, SIGKILL);
      }
      const auto r = xdino::testing::wait_process(pid, 600);
      ASSERT_FALSE(r.timed_out);
      if (r.exit_code != 128 + SIGKILL) {
        ASSERT_EQ(r.exit_code, 0) << xdino::read_file(root / "err.txt");
        break;
      }
      ++kills;
      // Once written, checkpoint.pth is always there and whole (every record's CRC checked).
      if (seen_checkpoint) {
        ASSERT_TRUE(fs::exists(ckpt)) << "after kill " << kills;
      }
      if (fs::exists(ckpt)) {
        seen_checkpoint = true;
        ++kills_with_checkpoint;  // the rerun resumes
        ASSERT_NO_THROW(xdino::load_pth(ckpt)) << "after kill " << kills;
      }
    }
    ++completed;
    EXPECT_EQ(xdino::testing::differences_from(root / "ref", root / "run"), "");
    if (HasFailure()) break;
    fs::remove_all(root / "run");
  }
  std::cout << kills << " kills (" << kills_with_checkpoint << " with a checkpoint to resume) in "
            << starts << " starts, " << completed << " completed runs compared; uninterrupted run "
            << ref.seconds << " s\n";
  EXPECT_GE(kills, 20);
  EXPECT_GE(kills_with_checkpoint, 10);
  fs::remove_all(root);
}

TEST(CrashConsistency, AFailedCheckpointWriteLeavesThePreviousOne) {
  const fs::path root = xdino::testing::fresh_dir("crash_efbig");
  xdino::testing::write_ppm_folder(root / "img", 2, 32, 32);
  auto argv = train_argv(root / "img", root / "run", 1);
  const auto first = run_process(argv, {}, 600);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string before = xdino::read_file(root / "run" / "checkpoint.pth");

  // The second epoch's checkpoint meets a 200 KiB file-size limit (checkpoints are ~45 MB).
  argv = train_argv(root / "img", root / "run", 2);
  std::string command = "ulimit -f 200 && exec";
  for (const std::string& a : argv) command += " '" + a + "'";
  const auto r = run_process({"/bin/sh", "-c", command}, {}, 600);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_NE(last.find("dino train: error: cannot write '" +
                      (root / "run" / "checkpoint.pth").string() + "': File too large"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_TRUE(xdino::read_file(root / "run" / "checkpoint.pth") == before);
  EXPECT_TRUE(temporaries(root / "run").empty()) << temporaries(root / "run").front();
  fs::remove_all(root);
}

}  // namespace
