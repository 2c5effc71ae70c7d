// Reading the process layout from torchrun, SLURM and Open MPI environments.
#include <gtest/gtest.h>

#include <map>

#include "core/check.h"
#include "launch/dist_flags.h"
#include "launch/session.h"

using xdino::distributed::dist_config_from_env;
using xdino::distributed::first_slurm_host;

namespace {

xdino::distributed::EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST(Rendezvous, SingleProcessByDefault) {
  const auto c = dist_config_from_env(env_of({}));
  EXPECT_EQ(c.world_size, 1);
  EXPECT_EQ(c.rank, 0);
  EXPECT_EQ(c.launcher, "single");
}

TEST(Rendezvous, TorchrunVariablesComeFirst) {
  const auto c = dist_config_from_env(env_of({{"RANK", "3"},
                                              {"WORLD_SIZE", "8"},
                                              {"LOCAL_RANK", "1"},
                                              {"LOCAL_WORLD_SIZE", "2"},
                                              {"MASTER_ADDR", "10.0.0.5"},
                                              {"MASTER_PORT", "12345"},
                                              {"SLURM_PROCID", "7"}}));
  EXPECT_EQ(c.launcher, "torchrun");
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world_size, 8);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 2);
  EXPECT_EQ(c.master_addr, "10.0.0.5");
  EXPECT_EQ(c.master_port, 12345);
}

// torchrun's agent store outlives a restart: each attempt's keys go under its own prefix, as
// torch.distributed's workers put theirs (tests/cli/multinode/test_torchrun.sh runs torchrun).
TEST(Rendezvous, AnAgentStoreGetsTheAttemptsPrefix) {
  const std::map<std::string, std::string> torchrun{
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RESTART_COUNT", "3"}};
  auto with_agent = torchrun;
  with_agent["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  EXPECT_EQ(dist_config_from_env(env_of(with_agent)).store_prefix, "/worker/attempt_3");
  with_agent.erase("TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(dist_config_from_env(env_of(with_agent)).store_prefix, "/worker/attempt_0");
  // Rank 0 hosts a fresh store each attempt: nothing to keep apart.
  EXPECT_EQ(dist_config_from_env(env_of(torchrun)).store_prefix, "");
  // `dino launch` serves a new store every round, and a host that came back has a launcher
  // counting restarts from 0 beside one at 1: its workers must meet the others' keys.
  auto dino_launch = torchrun;
  dino_launch["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  dino_launch["XDINO_RDZV_ROUND"] = "4";
  EXPECT_EQ(dist_config_from_env(env_of(dino_launch)).store_prefix, "");
}

TEST(Rendezvous, SlurmDerivesMasterFromNodeList) {
  const auto c = dist_config_from_env(env_of({{"SLURM_PROCID", "9"},
                                              {"SLURM_NTASKS", "16"},
                                              {"SLURM_LOCALID", "1"},
                                              {"SLURM_NTASKS_PER_NODE", "8(x2)"},
                                              {"SLURM_JOB_NODELIST", "gpu[017-018]"},
                                              {"SLURM_JOB_ID", "123456"}}));
  EXPECT_EQ(c.launcher, "slurm");
  EXPECT_EQ(c.rank, 9);
  EXPECT_EQ(c.world_size, 16);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_world_size, 8);
  EXPECT_EQ(c.master_addr, "gpu017");
  EXPECT_EQ(c.master_port, 20000 + 123456 % 20000);
}

TEST(Rendezvous, SlurmHostLists) {
  EXPECT_EQ(first_slurm_host("node[01-03,07],gpu5"), "node01");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  EXPECT_EQ(first_slurm_host("rack[1-2]-n[07,9]"), "rack1-n07");
  EXPECT_EQ(first_slurm_host("single"), "single");
  EXPECT_EQ(first_slurm_host("n[3,1]"), "n3");
  EXPECT_THROW(first_slurm_host("broken[1-2"), xdino::UsageError);
}

TEST(Rendezvous, OpenMpi) {
  const auto c = dist_config_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                              {"OMPI_COMM_WORLD_SIZE", "2"},
                                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(c.launcher, "mpi");
  EXPECT_EQ(c.rank, 1);
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  // Across nodes, MASTER_ADDR is required.
  EXPECT_THROW(dist_config_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                                            {"OMPI_COMM_WORLD_SIZE", "4"},
                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}})),
               xdino::UsageError);
}

TEST(Rendezvous, MalformedValuesNameTheVariable) {
  try {
    dist_config_from_env(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
    FAIL();
  } catch (const xdino::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("RANK"), std::string::npos);
  }
  EXPECT_THROW(dist_config_from_env(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}})),
               xdino::UsageError);
}

TEST(Rendezvous, DistTimeoutFlagSetsTheCollectiveTimeout) {
  xdino::distributed::DistOptions o;
  xdino::launch::Flags flags("train");
  xdino::launch::declare_dist_flags(flags, o);
  EXPECT_EQ(o.dist_timeout, 1800);
  ASSERT_TRUE(flags.parse({"--dist_timeout", "2.5"}));
  EXPECT_EQ(dist_config_from_env(o).timeout, std::chrono::milliseconds(2500));
  o.dist_timeout = 0;
  EXPECT_THROW(dist_config_from_env(o), xdino::UsageError);
}

TEST(Rendezvous, AutoReplicasAreTheCoresThatDivideTheBatch) {
  const char* before = std::getenv("OMP_NUM_THREADS");
  const std::string saved = before ? before : "";
  xdino::launch::Session s;
  ::setenv("OMP_NUM_THREADS", "4", 1);
  EXPECT_EQ(xdino::launch::auto_replicas(s, 32), 4);
  EXPECT_EQ(xdino::launch::auto_replicas(s, 6), 3);  // the largest divisor of the batch <= 4
  EXPECT_EQ(xdino::launch::auto_replicas(s, 7), 1);
  EXPECT_EQ(xdino::launch::auto_replicas(s, 2), 2);
  s.device = torch::Device(torch::kCUDA, 0);
  EXPECT_EQ(xdino::launch::auto_replicas(s, 32), 1);  // one process per GPU instead
  if (before)
    ::setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  else
    ::unsetenv("OMP_NUM_THREADS");
}
