// `dino launch --nproc_per_node=2 train ...` (torchrun's spelling, as the official README types
// it; eval_cli tests `--nproc 2 -- knn`) end to end through the binary, on loopback with Gloo and
// a tiny generated IDX dataset (64 random 28x28 images, XCiT-nano at 32/16-pixel crops):
// only rank 0 writes and warns, a 2-process checkpoint resumes with 1 process, and a rank
// killed (SIGKILL) or frozen (SIGSTOP, ended by --dist_timeout) mid-epoch makes the survivor
// exit non-zero naming it, with the checkpoint as it was; rerun, the killed run ends with the
// same files, byte for byte, as a run that was never interrupted.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/pth.h"
#include "distributed/distributed.h"
#include "distributed/launcher_env.h"
#include "distributed/rendezvous/store.h"
#include "tests/support/cli_args.h"
#include "tests/support/files.h"
#include "tests/support/process.h"
#include "tests/support/require.h"

namespace cli = xdino::testing::cli;
namespace fs = std::filesystem;
using xdino::read_file;
using xdino::testing::count_of;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {

std::vector<std::string> dist_train_args(const fs::path& data, const fs::path& out, int epochs,
                                         int batch) {
  return cli::concat({cli::train(data, out, "xcit_nano_12_p16"),
                      {"--out_dim", "64"},
                      cli::multi_crop(32, 16, 2),
                      {"--batch_size_per_gpu", std::to_string(batch)},
                      cli::epochs(epochs, 0),
                      {"--num_workers", "1", "--saveckp_freq", "1", "--device", "cpu"}});
}

std::vector<std::string> launch(int nproc, std::vector<std::string> child,
                                std::vector<std::string> launcher_flags = {}) {
  std::vector<std::string> argv{dino_binary(), "launch",
                                "--nproc_per_node=" + std::to_string(nproc)};
  argv.insert(argv.end(), launcher_flags.begin(), launcher_flags.end());
  argv.insert(argv.end(), child.begin(), child.end());
  return argv;
}

int64_t resume_value(const c10::IValue& checkpoint, const std::string& key) {
  return checkpoint.toGenericDict().at("xdino_resume").toGenericDict().at(key).toInt();
}

// The children of `parent`, by the RANK variable each was started with.
std::map<int, int> ranks_of_children(int parent) {
  std::map<int, int> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // "pid (comm) state ppid ...": comm may hold spaces, so read after its closing paren.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    std::string state;
    int ppid = 0;
    if (!(rest >> state >> ppid) || ppid != parent) continue;
    std::ifstream environ(entry.path() / "environ");
    for (std::string var; std::getline(environ, var, '\0');)
      if (var.rfind("RANK=", 0) == 0) out[std::stoi(var.substr(5))] = std::stoi(name);
  }
  return out;
}

class DistributedCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!xdino::distributed::gloo_available()) XDINO_SKIP_MISSING() << "this LibTorch has no Gloo";
    xdino::testing::write_random_idx(data_, 64);
  }
  // Starts a 2-process run (8 iterations per epoch, 50 epochs by default: far from over when a
  // rank is lost) and waits until it is in its second epoch, checkpoint.pth written.
  void start_run(double dist_timeout, int epochs = 50, double heartbeat_timeout = 60) {
    auto train = dist_train_args(data_, out_, epochs, 4);
    train.insert(train.end(), {"--dist_timeout", std::to_string(dist_timeout),
                               "--dist_heartbeat_timeout", std::to_string(heartbeat_timeout)});
    const auto argv = launch(2, train, {"--grace_seconds", "2"});
    launcher_ = xdino::testing::start_process(argv, (out_ / "launch.out").string(),
                                              (out_ / "launch.err").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!fs::exists(out_ / "checkpoint0000.pth") && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into epoch 1
    ranks_ = ranks_of_children(launcher_);
    ASSERT_TRUE(fs::exists(out_ / "checkpoint0000.pth") && ranks_.size() == 2)
        << ranks_.size() << " ranks; " << read_file(out_ / "launch.err");
    checkpoint_ = read_file(out_ / "checkpoint.pth");
  }

  // Waits for the launcher; every rank must be gone and checkpoint.pth as it was before the
  // rank was lost (nothing can be saved without every rank), and loadable.
  xdino::testing::ProcessResult finish_run() {
    const auto r = xdino::testing::wait_process(launcher_, 90);
    launcher_ = -1;
    for (const auto& [rank, pid] : ranks_) {
      EXPECT_NE(kill(pid, 0), 0) << "rank " << rank << " is still running";
      kill(pid, SIGKILL);  // in case the launcher did not stop it
    }
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(read_file(out_ / "checkpoint.pth") == checkpoint_) << "checkpoint.pth changed";
    const auto ckpt = xdino::load_pth(out_ / "checkpoint.pth");
    EXPECT_GE(ckpt.toGenericDict().at("epoch").toInt(), 1);
    EXPECT_EQ(resume_value(ckpt, "world_size"), 2);
    return r;
  }

  // SIGKILLs rank `victim`: the other rank must stop within seconds (long before the 20 s
  // --dist_timeout), naming the victim.
  void kill_rank(int victim, const std::string& survivor_says) {
    start_run(20);
    if (HasFatalFailure()) return;
    ASSERT_EQ(kill(ranks_.at(victim), SIGKILL), 0);
    const auto r = finish_run();
    const std::string err = read_file(out_ / "launch.err");
    EXPECT_LT(r.seconds, 20) << "the survivor must notice a dead peer before --dist_timeout";
    EXPECT_NE(err.find("rank " + std::to_string(victim) + " (pid " +
                       std::to_string(ranks_.at(victim)) + ") was killed by signal 9"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find(survivor_says), std::string::npos) << err;
    EXPECT_EQ(count_of(err, "error: "), 1u) << "one failure line, from the survivor: " << err;
  }

  // SIGSTOPs rank `victim`, which freezes it without closing its sockets: only --dist_timeout
  // (10 s) ends the other rank's wait, which then exits 1 naming the victim. The launcher
  // resumes and stops the victim.
  void stop_rank(int victim, const std::vector<std::string>& survivor_says) {
    start_run(10);
    if (HasFatalFailure()) return;
    ASSERT_EQ(kill(ranks_.at(victim), SIGSTOP), 0);
    const auto r = finish_run();
    const std::string err = read_file(out_ / "launch.err");
    for (const auto& says : survivor_says) EXPECT_NE(err.find(says), std::string::npos) << err;
    const int survivor = 1 - victim;
    EXPECT_NE(err.find("rank " + std::to_string(survivor) + " (pid " +
                       std::to_string(ranks_.at(survivor)) + ") exited with code 1"),
              std::string::npos)
        << err;
    EXPECT_GT(r.seconds, 10) << "the survivor must wait out --dist_timeout";
    // Bounded by --dist_timeout + the 7.5 s probe + the launcher's 2 s grace and 10 s to stop
    // the victim, plus exits on a loaded machine (measured 24-36 s); a hang hits 90 s.
    EXPECT_LT(r.seconds, 60) << err;
  }

  // SIGSTOPs rank `victim` for longer than --dist_heartbeat_timeout (4 s) in a run whose
  // --dist_timeout (600 s) would wait ten minutes: its heartbeat stops, and the other rank
  // exits 1 within seconds naming it and its host (distributed/peer_monitor.h).
  void freeze_past_heartbeat(int victim, const std::vector<std::string>& survivor_says) {
    start_run(600, 50, 4);
    if (HasFatalFailure()) return;
    ASSERT_EQ(kill(ranks_.at(victim), SIGSTOP), 0);
    const auto r = finish_run();
    const std::string err = read_file(out_ / "launch.err");
    for (const auto& says : survivor_says) EXPECT_NE(err.find(says), std::string::npos) << err;
    // The victim, resumed to be stopped, may add a line of its own about its peer that has
    // gone meanwhile; it must not blame the survivor's store or heartbeat.
    EXPECT_EQ(count_of(err, "has not answered") + count_of(err, "no heartbeat for"), 1u) << err;
    // 4 s + at most 1 s until the check + the launcher's 2 s grace and 10 s to stop the victim
    // (measured ~17 s); --dist_timeout would take 600 s.
    EXPECT_LT(r.seconds, 45) << err;
  }

  void TearDown() override {
    if (launcher_ > 0) {
      kill(launcher_, SIGKILL);
      xdino::testing::wait_process(launcher_, 30);
    }
    for (const auto& [rank, pid] : ranks_) kill(pid, SIGKILL);
    fs::remove_all(data_);
    fs::remove_all(out_);
  }

  int launcher_ = -1;
  std::map<int, int> ranks_;
  std::string checkpoint_;
  fs::path data_ = xdino::testing::fresh_dir("dist_cli_data");
  fs::path out_ = xdino::testing::fresh_dir("dist_cli_out");
};

}  // namespace

TEST_F(DistributedCli, OnlyRankZeroWritesAndOneProcessResumesTheRun) {
  // A hot teacher makes near-uniform outputs: the collapse warning, a fact about the run
  // that rank 0 alone must print.
  auto first = dist_train_args(data_, out_, 1, 8);
  first.insert(first.end(), {"--teacher_temp", "5", "--warmup_teacher_temp", "5"});
  auto r = run_process(launch(2, first));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[rank 0] warning: epoch 0: the teacher outputs are nearly uniform"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("[rank 1]"), std::string::npos) << r.err;
  // Exactly what one process writes: no second log line, no stray temporary files.
  // and one TensorBoard file, events.out.tfevents.<time>.<host>.<pid>.0 (rank 0's).
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(out_)) {
    const std::string name = e.path().filename();
    files.insert(name.rfind("events.out.tfevents.", 0) == 0 ? "events" : name);
  }
  EXPECT_EQ(files, (std::set<std::string>{"config.ini", "log.txt", "curves.png", "checkpoint.pth",
                                          "checkpoint0000.pth", "events"}));
  EXPECT_EQ(std::distance(fs::directory_iterator(out_), fs::directory_iterator()), 6);  // one each
  EXPECT_EQ(count_of(read_file(out_ / "log.txt"), "\n"), 1u);
  EXPECT_EQ(count_of(r.out, "Averaged stats"), 1u) << r.out;
  EXPECT_NE(r.out.find("total batch 16"), std::string::npos) << r.out;
  auto ckpt = xdino::load_pth(out_ / "checkpoint.pth");
  EXPECT_EQ(resume_value(ckpt, "world_size"), 2);
  EXPECT_EQ(resume_value(ckpt, "iterations_per_epoch"), 4);  // 64 images / (2 x 8)

  // One process, one more epoch: it resumes at epoch 1 with twice the iterations per epoch.
  auto argv = dist_train_args(data_, out_, 2, 8);
  argv.insert(argv.begin(), dino_binary());
  r = run_process(argv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Found checkpoint"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Starting DINO training at epoch 1, iteration 8"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("written by 2 processes"), std::string::npos) << r.err;
  const std::string log = read_file(out_ / "log.txt");
  EXPECT_EQ(count_of(log, "\n"), 2u) << log;
  EXPECT_NE(log.find("\"epoch\": 1"), std::string::npos) << log;
  ckpt = xdino::load_pth(out_ / "checkpoint.pth");
  EXPECT_EQ(ckpt.toGenericDict().at("epoch").toInt(), 2);
  EXPECT_EQ(resume_value(ckpt, "world_size"), 1);
  EXPECT_EQ(resume_value(ckpt, "iterations_per_epoch"), 8);
}

TEST_F(DistributedCli, KilledRankOneIsNamedByRankZero) {
  kill_rank(1, "lost rank 1: the process died");
}

TEST_F(DistributedCli, KilledRankZeroIsNamedByRankOne) {
  // The workers' store is the launcher's (TORCHELASTIC_USE_AGENT_STORE): it outlives rank 0.
  kill_rank(0, "lost rank 0");
}

TEST_F(DistributedCli, AKilledRankThenARerunEqualsAnUninterruptedRun) {
  // The uninterrupted 2-process run, made in the same folder (its path is in the checkpoints).
  constexpr int kEpochs = 3;
  auto train = dist_train_args(data_, out_, kEpochs, 4);
  train.insert(train.end(), {"--dist_timeout", std::to_string(20.0)});  // as start_run
  const auto ref = run_process(launch(2, train), {}, 300);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const fs::path ref_dir = xdino::testing::fresh_dir("dist_cli_ref");
  fs::remove(ref_dir);
  fs::rename(out_, ref_dir);
  fs::create_directories(out_);

  // Rank 1 dies in epoch 1; the same command again finishes the run from checkpoint.pth.
  start_run(20, kEpochs);
  if (HasFatalFailure()) return;
  ASSERT_EQ(kill(ranks_.at(1), SIGKILL), 0);
  finish_run();
  const auto rerun = run_process(launch(2, train), {}, 300);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_NE(rerun.out.find("Starting DINO training at epoch 1"), std::string::npos) << rerun.out;
  EXPECT_EQ(xdino::testing::differences_from(ref_dir, out_), "");
  fs::remove_all(ref_dir);
}

TEST_F(DistributedCli, FrozenRankIsNamedAfterTheDistTimeout) {
  stop_rank(1, {"all_reduce on rank 0 failed: lost rank 1: the process died or is stopped"});
}

// Under dino launch the workers' store is the launcher's (TORCHELASTIC_USE_AGENT_STORE): a
// stopped rank 0 leaves it answering, and rank 1 names rank 0 itself. A rank 0 that hosts the
// store (torchrun without its agent store, SLURM, mpirun) is LaunchMistakes'
// ARankZeroThatHostsTheStoreAndStopsIsNamedByItsSilentStore below.
TEST_F(DistributedCli, FrozenRankZeroIsNamedAfterTheDistTimeout) {
  stop_rank(0, {"on rank 1 failed: lost rank 0: the process died or is stopped"});
}

TEST_F(DistributedCli, FrozenRankIsNamedByItsSilentHeartbeat) {
  freeze_past_heartbeat(1, {"all_reduce on rank 0 failed: lost rank 1 on host ",
                            ": no heartbeat for 4 s (the host is unreachable, or the process "
                            "died or is stopped)"});
}

TEST_F(DistributedCli, FrozenRankZeroIsNamedByItsSilentHeartbeat) {
  freeze_past_heartbeat(0, {"on rank 1 failed: lost rank 0 on host ",
                            ": no heartbeat for 4 s (the host is unreachable, or the process "
                            "died or is stopped)"});
}

TEST_F(DistributedCli, ASlowRankIsWaitedForNotLost) {
  // Rank 1 gets a fifth of a core for 20 s (stopped 1 s, running 0.25 s, over and over): its
  // steps crawl and rank 0 waits in collectives for far longer than the 6 s heartbeat timeout
  // in all, but its heartbeat thread beats in every running slice, so the run must finish.
  start_run(600, 4, 6);
  if (HasFatalFailure()) return;
  const int slow = ranks_.at(1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int slices = 0;
  while (std::chrono::steady_clock::now() < until && kill(slow, SIGSTOP) == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    kill(slow, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    ++slices;
  }
  kill(slow, SIGCONT);
  const auto r = xdino::testing::wait_process(launcher_, 240);
  launcher_ = -1;
  const std::string err = read_file(out_ / "launch.err");
  EXPECT_GE(slices, 8) << "the run ended before the slow period: " << err;
  EXPECT_EQ(r.exit_code, 0) << err;
  EXPECT_EQ(err.find("lost rank"), std::string::npos) << err;
  EXPECT_EQ(xdino::load_pth(out_ / "checkpoint.pth").toGenericDict().at("epoch").toInt(), 4);
}

// Launch mistakes, each named in one line by the rendezvous itself on every process that
// took part, well within --dist_timeout (20 s here), never a hang.
class LaunchMistakes : public DistributedCli {
 protected:
  std::map<std::string, std::string> env(int rank, int world_size, int port) const {
    return {{"RANK", std::to_string(rank)},
            {"WORLD_SIZE", std::to_string(world_size)},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", std::to_string(port)}};
  }
  std::vector<std::string> train(const std::string& name) const {
    auto argv = dist_train_args(data_, out_ / name, 1, 4);
    argv.insert(argv.begin(), dino_binary());
    argv.insert(argv.end(), {"--dist_timeout", "20"});
    return argv;
  }
  // Starts a background process that the test then waits for.
  int start(const std::string& name, const std::map<std::string, std::string>& vars) {
    const int pid = xdino::testing::start_process(train(name), (out_ / (name + ".out")).string(),
                                                  (out_ / (name + ".err")).string(), vars);
    background_.push_back(pid);
    return pid;
  }
  void TearDown() override {
    for (int pid : background_) kill(pid, SIGKILL);
    DistributedCli::TearDown();
  }
  std::vector<int> background_;
};

// Started without dino launch, rank 0 hosts the workers' store itself: stopped, it still
// accepts requests there and never answers them (c10d sets no receive timeout). Rank 1's
// diagnosis gives up on it within --dist_heartbeat_timeout (4 s; --dist_timeout is 600 s) and
// names the silent store.
TEST_F(LaunchMistakes, ARankZeroThatHostsTheStoreAndStopsIsNamedByItsSilentStore) {
  const int port = xdino::distributed::free_tcp_port();
  auto args = dist_train_args(data_, out_ / "hosted", 50, 4);
  args.insert(args.begin(), dino_binary());
  args.insert(args.end(), {"--dist_timeout", "600", "--dist_heartbeat_timeout", "4"});
  const auto start_rank = [&](int rank) {
    auto vars = env(rank, 2, port);
    vars["LOCAL_RANK"] = std::to_string(rank);
    vars["LOCAL_WORLD_SIZE"] = "2";
    const std::string log = (out_ / ("hosted" + std::to_string(rank))).string();
    const int pid = xdino::testing::start_process(args, log + ".out", log + ".err", vars);
    background_.push_back(pid);
    return pid;
  };
  const int rank0 = start_rank(0);
  ASSERT_TRUE(xdino::testing::wait_until_listening(rank0, port, 60))  // rank 0 hosts the store
      << read_file(out_ / "hosted0.err");
  const int rank1 = start_rank(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!fs::exists(out_ / "hosted" / "checkpoint0000.pth") &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(out_ / "hosted" / "checkpoint0000.pth"))
      << read_file(out_ / "hosted1.err");
  ASSERT_EQ(kill(rank0, SIGSTOP), 0);
  const auto r1 = xdino::testing::wait_process(rank1, 60);
  kill(rank0, SIGKILL);
  const std::string err1 = read_file(out_ / "hosted1.err");
  EXPECT_EQ(r1.exit_code, 1) << err1;
  EXPECT_NE(err1.find("lost rank 0 on host "), std::string::npos) << err1;
  EXPECT_NE(err1.find(": rank 0's rendezvous store at 127.0.0.1:" + std::to_string(port) +
                      " has not answered for 4 s (that host is unreachable from here, or rank 0 "
                      "is stopped)"),
            std::string::npos)
      << err1;
  EXPECT_LT(r1.seconds, 45) << "named by the heartbeat, not by --dist_timeout";
}

TEST_F(LaunchMistakes, AWorldSizeThatDiffersIsNamedByEveryProcess) {
  const int port = xdino::distributed::free_tcp_port();
  const int first = start("first", env(0, 2, port));
  ASSERT_TRUE(xdino::testing::wait_until_listening(first, port, 60))  // rank 0 hosts the store
      << read_file(out_ / "first.err");
  const auto second = run_process(train("second"), env(1, 3, port), 60);
  const auto r0 = xdino::testing::wait_process(first, 60);
  const std::string says =
      "rank 1 has WORLD_SIZE 3 but a process that joined the rendezvous at "
      "127.0.0.1:" +
      std::to_string(port) +
      " before it has 2; start every "
      "process with the same WORLD_SIZE";
  EXPECT_EQ(second.exit_code, 2) << second.err;
  EXPECT_NE(second.err.find(says), std::string::npos) << second.err;
  EXPECT_EQ(r0.exit_code, 2);
  const std::string err0 = read_file(out_ / "first.err");
  EXPECT_NE(err0.find(says), std::string::npos) << err0;
  EXPECT_LT(r0.seconds, 15) << "named by the rendezvous, not by --dist_timeout";
}

TEST_F(LaunchMistakes, ARankStartedTwiceIsNamed) {
  const int port = xdino::distributed::free_tcp_port();
  const int rank0 = start("rank0", env(0, 3, port));
  ASSERT_TRUE(xdino::testing::wait_until_listening(rank0, port, 60))
      << read_file(out_ / "rank0.err");
  const int rank1 = start("rank1", env(1, 3, port));
  // A head start for the first rank 1, not a condition: if the second claims rank 1 first, the
  // first finds the conflict instead, and every process reads the same line.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto again = run_process(train("again"), env(1, 3, port), 60);
  const std::string says =
      "rank 1 was started twice (two processes joined the rendezvous at "
      "127.0.0.1:" +
      std::to_string(port) +
      " as rank 1); give each process "
      "its own rank";
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_NE(again.err.find(says), std::string::npos) << again.err;
  // The others were waiting for rank 2: they read the conflict instead of timing out.
  for (const auto& [pid, name] : {std::pair{rank0, "rank0"}, {rank1, "rank1"}}) {
    const auto r = xdino::testing::wait_process(pid, 60);
    const std::string err = read_file(out_ / (std::string(name) + ".err"));
    EXPECT_EQ(r.exit_code, 2) << name << ": " << err;
    EXPECT_NE(err.find(says), std::string::npos) << name << ": " << err;
    EXPECT_LT(r.seconds, 15) << name;
  }
}

TEST_F(LaunchMistakes, APortAlreadyTakenIsNamed) {
  const int port = xdino::distributed::free_tcp_port();
  const int rank0 = start("holder", env(0, 2, port));  // holds the port, waits for rank 1
  // Not a fixed pause: loading LibTorch 2.x's CUDA libraries under CI's load once took longer
  // than 500 ms, the second process bound the port first and waited out --dist_timeout.
  ASSERT_TRUE(xdino::testing::wait_until_listening(rank0, port, 60))
      << read_file(out_ / "holder.err");
  const auto r = run_process(train("second"), env(0, 2, port), 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(
      r.err.find("rendezvous with 127.0.0.1:" + std::to_string(port) + " failed for rank 0: "),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("Address already in use"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--master_port"), std::string::npos) << r.err;  // the fix
  EXPECT_LT(r.seconds, 10);
  kill(rank0, SIGKILL);
}

TEST_F(LaunchMistakes, AMasterAddrWhereNothingListensIsNamedWithinTheRendezvousTimeout) {
  const int port = xdino::distributed::free_tcp_port();  // nothing listens there
  auto argv = train("lonely");
  argv.back() = "5";  // --dist_timeout 5
  const auto r = run_process(argv, env(1, 2, port), 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(
      r.err.find("rendezvous with 127.0.0.1:" + std::to_string(port) + " failed for rank 1: "),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(is MASTER_ADDR rank 0's host, and is rank 0 running?)"), std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 30);
}
