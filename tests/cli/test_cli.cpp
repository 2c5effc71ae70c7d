// The dino binary: exit codes and one-line messages for good and bad invocations, and the
// official command-line spellings it takes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

using xdino::testing::count_lines;
using xdino::testing::dino_binary;
using xdino::testing::run_process;

namespace {}  // namespace

TEST(Cli, HelpListsEverySubcommand) {
  const auto r = run_process({dino_binary(), "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* sub : {"train", "knn", "linear", "features", "visualize", "report", "info"})
    EXPECT_NE(r.out.find(std::string("  ") + sub), std::string::npos) << sub;
}

TEST(Cli, NoArgumentsIsAUsageError) {
  const auto r = run_process({dino_binary()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("usage: dino"), std::string::npos);
}

TEST(Cli, SubcommandHelpListsFlagsWithDefaults) {
  const auto r = run_process({dino_binary(), "train", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--lr FLOAT"), std::string::npos);
  EXPECT_NE(r.out.find("[default: 0.0005]"), std::string::npos);
  EXPECT_NE(r.out.find("--out_dim INT"), std::string::npos);
  EXPECT_NE(r.out.find("[default: 65536]"), std::string::npos);
}

TEST(Cli, UnknownFlagExitsTwoNamingIt) {
  const auto r = run_process({dino_binary(), "train", "--bogus", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bogus"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
}

TEST(Cli, BadValueExitsTwoNamingFlagAndType) {
  const auto r = run_process({dino_binary(), "train", "--epochs", "ten"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--epochs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("INT"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
}

TEST(Cli, UnknownSubcommandExitsTwo) {
  const auto r = run_process({dino_binary(), "trian"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("trian"), std::string::npos);
}

TEST(Cli, MissingConfigExitsTwo) {
  const auto r = run_process({dino_binary(), "train", "--config", "/no/such/file.ini"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("/no/such/file.ini"), std::string::npos) << r.err;
}

TEST(Cli, AFlagWithItsValueAfterAnEqualsSignIsNamedAlone) {
  const auto r = run_process({dino_binary(), "train", "--epoch=300"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown flag 'epoch' for 'dino train'"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
}

// main_dino.py refuses a bare --use_fp16 too (its bool_flag needs a value); the message names
// it and the fix, wherever it stands, and says "dino train" once.
TEST(Cli, ABareUseFp16IsNamedWithTheFix) {
  for (const std::vector<std::string>& tail :
       {std::vector<std::string>{"--use_fp16", "--epochs", "1"}, {"--epochs", "1", "--use_fp16"}}) {
    std::vector<std::string> argv{dino_binary(), "train"};
    argv.insert(argv.end(), tail.begin(), tail.end());
    const auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err.rfind("dino train: error: --use_fp16 needs a value: --use_fp16 true or "
                          "--use_fp16 false",
                          0),
              0u)
        << r.err;
    EXPECT_EQ(r.err.find("dino train", 1), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  }
}

// --use_cuda (eval_knn.py, eval_copy_detection.py, eval_image_retrieval.py: default True) is
// taken by the three; on a CPU run it changes nothing (test_retrieval_eval runs both values).
TEST(Cli, UseCudaIsTakenWhereTheOfficialEvaluationsTakeIt) {
  for (const char* sub : {"knn", "copy_detection", "retrieval"}) {
    const auto help = run_process({dino_binary(), sub, "--help"});
    EXPECT_NE(help.out.find("--use_cuda BOOL"), std::string::npos) << sub;
    const auto r =
        run_process({dino_binary(), sub, "--use_cuda=false", "--data_path", "/no/such/folder"});
    EXPECT_EQ(r.exit_code, 2) << sub;
    EXPECT_EQ(r.err.find("use_cuda"), std::string::npos) << sub << ": " << r.err;
    EXPECT_NE(r.err.find("/no/such/folder"), std::string::npos) << sub << ": " << r.err;
  }
}

// torchrun's and torch.distributed.launch's spellings, as the official README types them;
// the launched command starts at its name, with or without "--" (test_distributed_cli runs
// two ranks this way).
TEST(Cli, LaunchTakesTorchrunSpellings) {
  const auto help = run_process({dino_binary(), "launch", "--help"});
  EXPECT_NE(help.out.find("--nproc_per_node INT"), std::string::npos) << help.out;
  const auto r = run_process(
      {dino_binary(), "launch", "--use_env", "--nproc_per_node=1", "visualize", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("usage: dino visualize"), std::string::npos) << r.out;
}

// A run refused for a usage error leaves nothing behind: no config.ini, not even the folder
// (a stray config.ini was once committed from a refused run).
TEST(Cli, ARefusedTrainLeavesNoConfigBehind) {
  const std::string dir = (xdino::testing::fresh_dir("refused_train") / "run").string();
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--data_path", "/no/such/folder"},
        {"--data_path", "/usr/share/datasets/fashion-mnist", "--arch", "nosuch"},
        {"--data_path", "/usr/share/datasets/fashion-mnist", "--epochs", "-1"}}) {
    std::vector<std::string> argv{dino_binary(), "train", "--output_dir", dir, "--device", "cpu"};
    argv.insert(argv.end(), bad.begin(), bad.end());
    const auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 2) << bad[1] << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/config.ini")) << bad.back();
  }
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

// Every command that writes config.ini writes it only once everything it was given has been
// checked: a refused evaluation makes no folder, and leaves an earlier result's config.ini as
// it was (knn, linear, features, retrieval, copy detection and video segmentation once wrote
// it first; issue 67).
TEST(Cli, ARefusedEvaluationWritesNothing) {
  const std::filesystem::path root = xdino::testing::fresh_dir("refused_eval");
  const std::string missing = (root / "no_such_data").string();
  struct Case {
    std::vector<std::string> args;
    std::string folder;  // where its config.ini would go
  };
  for (const Case& c : std::vector<Case>{
           {{"knn", "--data_path", missing, "--output_dir", (root / "knn").string()}, "knn"},
           {{"linear", "--data_path", missing, "--output_dir", (root / "linear").string()},
            "linear"},
           {{"features", "--data_path", missing, "--output", (root / "features" / "f.h5").string()},
            "features"},
           {{"retrieval", "--data_path", missing, "--output_dir", (root / "retrieval").string()},
            "retrieval"},
           {{"copy_detection", "--data_path", missing, "--output_dir",
             (root / "copy_detection").string()},
            "copy_detection"},
           {{"video_segmentation", "--data_path", missing, "--output_dir",
             (root / "video_segmentation").string()},
            "video_segmentation"}}) {
    SCOPED_TRACE(c.args[0]);
    std::vector<std::string> argv{dino_binary()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_FALSE(std::filesystem::exists(root / c.folder))
        << "a refused " << c.args[0] << " made its folder";
  }
  // A finished probe's config.ini survives a refused rerun into its folder.
  std::filesystem::create_directories(root / "done");
  std::ofstream(root / "done" / "config.ini") << "the finished probe's\n";
  const auto r = run_process({dino_binary(), "linear", "--data_path", missing, "--num_labels", "0",
                              "--output_dir", (root / "done").string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(xdino::read_file(root / "done" / "config.ini"), "the finished probe's\n");
  std::filesystem::remove_all(root);
}

// torchrun's rendezvous flags (--rdzv_endpoint, --rdzv_backend, --rdzv_id, --rdzv_conf,
// --nnodes MIN:MAX, --standalone) are taken under its names; what does not apply here is one
// line, exit 2, naming the flag and the fix.
TEST(Cli, LaunchTakesTorchrunRendezvousFlags) {
  const auto ok =
      run_process({dino_binary(), "launch", "--standalone", "--rdzv-backend", "c10d", "--rdzv-id",
                   "job7", "--rdzv-conf", "join_timeout=30,keep_alive_interval=1,is_host=true",
                   "--nnodes", "1:1", "--nproc-per-node", "1", "visualize", "--help"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("usage: dino visualize"), std::string::npos) << ok.out;
  struct Bad {
    std::vector<std::string> flags;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{
           {{"--nnodes", "1:4"}, "elastic sizes are not supported"},
           {{"--rdzv_backend", "zookeeper"}, "--rdzv_backend zookeeper is not supported"},
           {{"--rdzv_backend", "etcd"}, "--rdzv_backend etcd needs --rdzv_endpoint"},
           {{"--rdzv_backend", "etcd", "--rdzv_endpoint", "e1:2379,[::1"},
            "an IPv6 address opens with '[' and closes with ']'"},
           {{"--rdzv_backend", "etcd", "--rdzv_endpoint", "e1", "--rdzv_conf",
             "ca_cert=/no/ca.pem"},
            "etcd TLS file '/no/ca.pem' not found"},
           {{"--rdzv_backend", "etcd", "--rdzv_endpoint", "e1", "--rdzv_conf", "is_host=true"},
            "with etcd no launcher serves the store"},
           {{"--rdzv_conf", "ca_cert=/ca.pem"}, "--rdzv_conf ca_cert is for --rdzv_backend etcd"},
           {{"--rdzv_conf", "join_timeout=-3"},
            "--rdzv_conf join_timeout=-3: expected a number of seconds in (0, 1e+06]"},
           {{"--rdzv_conf", "read_timeout=inf"},
            "--rdzv_conf read_timeout=inf: expected a number of seconds in (0, 1e+06]"},
           {{"--rdzv_conf", "heartbeat_timeout=1e300"}, "heartbeat_timeout=1e300: expected"},
           {{"--rdzv_endpoint", "[::1"}, "an IPv6 address opens with '[' and closes with ']'"},
           {{"--rdzv_endpoint", "::1:29400"}, "write an IPv6 address in brackets"},
           {{"--rdzv_endpoint", "[::1]:70000"}, "the port is not a TCP port"},
           {{"--rdzv_conf", "bogus=1"}, "--rdzv_conf: unknown key 'bogus'"},
           {{"--nnodes", "2", "--rdzv_endpoint", "node01:29400", "--master_port", "29500"},
            "give one"},
           {{"--nnodes", "2", "--master_port", "29500"}, "needs --master_addr"},
           {{"--nnodes", "2", "--node_rank", "2", "--rdzv_endpoint", "node01"},
            "--node_rank must be in [0, --nnodes)"},
           {{"--rdzv_id", "a/b"}, "--rdzv_id must be a non-empty name without '/'"}}) {
    std::vector<std::string> argv{dino_binary(), "launch"};
    argv.insert(argv.end(), b.flags.begin(), b.flags.end());
    argv.insert(argv.end(), {"visualize", "--help"});
    const auto r = run_process(argv);
    EXPECT_EQ(r.exit_code, 2) << b.flags[0] << ": " << r.err;
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  }
}
