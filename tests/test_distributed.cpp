// Several processes on loopback through c10d/Gloo: collectives, SyncBatchNorm and gradient
// averaging against single-process references, and a lost peer reported by rank within the
// timeout.
#include <gtest/gtest.h>

#include <future>

#include "launch/local_launcher.h"
#include "ssl/distributed.h"
#include "tests/support/process.h"

using xdino::testing::ProcessResult;
using xdino::testing::run_process;

namespace {

std::vector<ProcessResult> run_world(const std::string& scenario, int world,
                                     const std::map<std::string, std::string>& extra = {},
                                     double timeout = 120) {
  const int port = xdino::launch::free_tcp_port();
  std::vector<std::future<ProcessResult>> futures;
  for (int r = 0; r < world; ++r) {
    std::map<std::string, std::string> env = extra;
    env["RANK"] = std::to_string(r);
    env["LOCAL_RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = std::to_string(world);
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = std::to_string(port);
    futures.push_back(std::async(std::launch::async, [=] {
      return run_process({XDINO_DIST_WORKER, scenario}, env, timeout);
    }));
  }
  std::vector<ProcessResult> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

void expect_all_ok(const std::vector<ProcessResult>& results) {
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ": " << results[r].err;
}

}  // namespace

class Distributed : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!xdino::ssl::gloo_available()) GTEST_SKIP() << "this LibTorch has no Gloo";
  }
};

TEST_F(Distributed, CollectivesTwoAndThreeProcesses) {
  expect_all_ok(run_world("collectives", 2));
  expect_all_ok(run_world("collectives", 3));
}

TEST_F(Distributed, SyncBatchNormMatchesBatchNormOnTheWholeBatch) {
  expect_all_ok(run_world("syncbn", 2));
}

TEST_F(Distributed, AveragedGradientsMatchTheWholeBatch) {
  expect_all_ok(run_world("gradsync", 2));
}

TEST_F(Distributed, DeadPeerIsNamed) {
  const auto r = run_world("die", 2, {{"XDINO_TEST_DIST_TIMEOUT_MS", "30000"}});
  EXPECT_EQ(r[1].exit_code, 3);
  EXPECT_EQ(r[0].exit_code, 1) << r[0].err;
  EXPECT_NE(r[0].err.find("lost rank 1: the process died"), std::string::npos) << r[0].err;
  EXPECT_LT(r[0].seconds, 20) << "a dead peer must be noticed well before the 30 s timeout";
}

TEST_F(Distributed, HungPeerIsNamedAfterTheTimeout) {
  // Rank 1 sleeps 40 s inside the run; rank 0 must give up after its 8 s collective timeout
  // (generous, so a loaded machine still connects in time) and name rank 1 long before it
  // would have woken up.
  const auto r = run_world("hang", 2, {{"XDINO_TEST_DIST_TIMEOUT_MS", "8000"}}, 60);
  EXPECT_EQ(r[0].exit_code, 1) << r[0].err;
  EXPECT_NE(r[0].err.find("lost rank 1"), std::string::npos) << r[0].err;
  EXPECT_NE(r[0].err.find("hung"), std::string::npos) << r[0].err;
  EXPECT_GT(r[0].seconds, 8) << "rank 0 must wait out the collective timeout";
  EXPECT_LT(r[0].seconds, 35) << "and then give up instead of waiting for the hung peer";
}
