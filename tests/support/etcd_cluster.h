// Real etcd members on loopback for the etcd rendezvous' tests (Debian's etcd-server, which
// scripts/setup.sh --tests installs): EtcdCluster(n) starts n members of one new cluster, each
// on two free 127.0.0.1 ports (client, peer) with a data folder of its own, and waits until the
// cluster writes (at most 20 s). kill(i) ends member i at once (SIGKILL: a host that dies);
// start(i) starts it again on its data folder, so it rejoins with what it had; pause(i) and
// resume(i) stop and continue it (SIGSTOP: it holds its port and never answers). The destructor
// kills every member and removes the folders. Nothing listens beyond 127.0.0.1.
// etcd_binary() is "" where etcd is not installed (the tests skip, or fail under
// XDINO_REQUIRE_ALL).
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "distributed/rendezvous/etcd.h"
#include "distributed/rendezvous/store.h"

namespace xdino::testing {

inline std::string etcd_binary() {
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"})
    if (std::filesystem::exists(p)) return p;
  return "";
}

class EtcdCluster {
 public:
  explicit EtcdCluster(int members) {
    static int clusters = 0;
    const std::string token =
        "xdino-test-" + std::to_string(getpid()) + "-" + std::to_string(clusters++);
    dir_ = std::filesystem::temp_directory_path() / ("xdino_etcd." + token);
    std::filesystem::create_directories(dir_);
    std::string initial;
    for (int i = 0; i < members; ++i) {
      Member m;
      m.name = "m" + std::to_string(i);
      m.client = distributed::free_tcp_port();
      m.peer = distributed::free_tcp_port();
      initial += (i ? "," : "") + m.name + "=http://127.0.0.1:" + std::to_string(m.peer);
      members_.push_back(m);
    }
    for (auto& m : members_) {
      const std::string client = "http://127.0.0.1:" + std::to_string(m.client);
      const std::string peer = "http://127.0.0.1:" + std::to_string(m.peer);
      m.args = {etcd_binary(),
                "--name",
                m.name,
                "--data-dir",
                (dir_ / m.name).string(),
                "--listen-client-urls",
                client,
                "--advertise-client-urls",
                client,
                "--listen-peer-urls",
                peer,
                "--initial-advertise-peer-urls",
                peer,
                "--initial-cluster",
                initial,
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                token};
    }
    for (size_t i = 0; i < members_.size(); ++i) start(static_cast<int>(i));
    wait_until_it_writes(std::chrono::seconds(20));
  }
  ~EtcdCluster() {
    for (size_t i = 0; i < members_.size(); ++i) kill(static_cast<int>(i));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  void start(int i) {
    Member& m = members_.at(i);
    if (m.pid > 0) return;
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : m.args) argv.push_back(a.data());
      argv.push_back(nullptr);
      std::freopen("/dev/null", "w", stdout);
      std::freopen((dir_ / (m.name + ".stderr")).c_str(), "a", stderr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    m.pid = pid;
  }
  void kill(int i) {
    Member& m = members_.at(i);
    if (m.pid <= 0) return;
    ::kill(m.pid, SIGKILL);
    waitpid(m.pid, nullptr, 0);
    m.pid = 0;
  }
  // Member i stops answering without closing its port (SIGSTOP: a hung host), or goes on.
  void pause(int i) { ::kill(members_.at(i).pid, SIGSTOP); }
  void resume(int i) { ::kill(members_.at(i).pid, SIGCONT); }
  // "127.0.0.1:port" of member i's client URL.
  std::string endpoint(int i) const { return "127.0.0.1:" + std::to_string(members_.at(i).client); }
  std::vector<std::string> endpoints() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < members_.size(); ++i) out.push_back(endpoint(static_cast<int>(i)));
    return out;
  }
  distributed::EtcdOptions options() const {
    distributed::EtcdOptions o;
    o.endpoints = endpoints();
    return o;
  }
  // Until a put through any member succeeds (a leader exists and a quorum answers).
  void wait_until_it_writes(std::chrono::milliseconds within) {
    distributed::EtcdClient client(options());
    const auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
      try {
        client.put("/xdino-test/ready", "1", 0, std::chrono::milliseconds(2000));
        return;
      } catch (const std::exception& e) {
        if (std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error(std::string("the test's etcd cluster never wrote: ") + e.what() +
                                   " (logs in " + dir_.string() + ")");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }

 private:
  struct Member {
    std::string name;
    int client = 0, peer = 0;
    pid_t pid = 0;
    std::vector<std::string> args;
  };
  std::filesystem::path dir_;
  std::vector<Member> members_;
};

}  // namespace xdino::testing
