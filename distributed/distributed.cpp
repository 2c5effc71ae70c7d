#include "distributed/distributed.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/check.h"
#include "core/compat.h"
#include "core/log.h"
#include "distributed/launcher_env.h"
#include "distributed/peer_monitor.h"
#include "distributed/rendezvous/store.h"

#if defined(USE_C10D_GLOO) && __has_include(<gloo/context.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define XDINO_HAVE_GLOO 1
#endif
#if defined(XDINO_WITH_CUDA) && defined(USE_C10D_NCCL) && __has_include(<nccl.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define XDINO_HAVE_NCCL 1
#endif

namespace xdino::distributed {

bool gloo_available() {
#ifdef XDINO_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

namespace {

using Clock = std::chrono::steady_clock;

// Every store this process uses is seen through the config's prefix (torchrun's attempt).
StorePtr make_store(const DistConfig& c, bool server, std::chrono::milliseconds timeout) {
  return with_prefix(make_tcp_store(c.master_addr, c.master_port, server,
                                    static_cast<size_t>(c.world_size), timeout),
                     c.store_prefix);
}

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Rank 0 hosts the store, unless the launcher does (agent_store: it has held the port since it
// chose it); the others connect, waiting out a host that cannot be reached yet (store.h), so a
// run re-forms by itself once the host is back (`dino launch --max_restarts`,
// launch/local_launcher.h).
StorePtr connect_store(const DistConfig& c) {
  if (c.rank == 0 && !c.agent_store) return make_store(c, true, c.timeout);
  return with_prefix(connect_tcp_store(c.master_addr, c.master_port, c.timeout, "rank 0's store"),
                     c.store_prefix);
}

using Backend = compat::C10dBackend;

class C10dCommunicator final : public Communicator {
 public:
  explicit C10dCommunicator(const DistConfig& config) : config_(config) {
    try {
      store_ = connect_store(config_);
      check_in();
    } catch (const xdino::Error&) {
      throw;
    } catch (const std::exception& e) {
      const std::string cause = first_line(e.what());
      const std::string lower = lowercase(cause);
      // LibTorch words it "Address already in use" (1.13) or "EADDRINUSE ... address already in
      // use" (2.x); say it the same way on both.
      if (lower.find("address already in use") != std::string::npos)
        XDINO_FAIL("rendezvous with ", config_.master_addr, ":", config_.master_port,
                   " failed for rank ", config_.rank, ": port ", config_.master_port,
                   " is already in use on this host (Address already in use): another run "
                   "holds it; pick another port (dino launch --master_port, or MASTER_PORT)");
      XDINO_FAIL("rendezvous with ", config_.master_addr, ":", config_.master_port,
                 " failed for rank ", config_.rank, ": ", cause,
                 lower.find("timed out") != std::string::npos && config_.rank != 0
                     ? " (is MASTER_ADDR rank 0's host, and is rank 0 running?)"
                     : "");
    }
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("pg", store_);
    if (config_.device.is_cuda()) {
#ifdef XDINO_HAVE_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = config_.timeout;
      group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, config_.rank,
                                                           config_.world_size, opts);
#else
      XDINO_FAIL("this build has no NCCL; rebuild against a CUDA LibTorch with NCCL");
#endif
    } else {
#ifdef XDINO_HAVE_GLOO
      auto opts = c10d::ProcessGroupGloo::Options::create(config_.timeout);
      opts->devices.push_back(gloo_device(config_.master_addr));
      group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, config_.rank,
                                                           config_.world_size, opts);
#else
      XDINO_FAIL("this LibTorch build has no Gloo; CPU processes cannot talk to each other");
#endif
    }
    monitor_ = std::make_unique<PeerMonitor>(
        config_, [this] { return make_store(config_, false, config_.timeout); });
  }

  ~C10dCommunicator() override {
    if (failed_) {
      // After a lost peer, tearing down can block on connections to it (the group's, and the
      // heartbeat thread's when the store host is stopped); the process is about to exit
      // with an error anyway, so leave all of it to the OS.
      (void)monitor_.release();
      (void)group_.release();
      (void)store_.release();
    }
  }

  int rank() const override { return config_.rank; }
  int world_size() const override { return config_.world_size; }

  using Communicator::all_reduce_sum;
  void all_reduce_sum(std::vector<torch::Tensor>& tensors) override {
    for_each_bucket(tensors, [&](std::vector<torch::Tensor>& flat) {
      run("all_reduce", group_->allreduce(flat));
    });
  }

  void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    for_each_bucket(tensors, [&](std::vector<torch::Tensor>& flat) {
      run("broadcast", group_->broadcast(flat, opts));
    });
  }

  std::vector<torch::Tensor> all_gather(const torch::Tensor& t) override {
    std::vector<torch::Tensor> input{t.to(config_.device).contiguous()};
    std::vector<std::vector<torch::Tensor>> output(1);
    for (int r = 0; r < config_.world_size; ++r) output[0].push_back(torch::empty_like(input[0]));
    run("all_gather", group_->allgather(output, input));
    for (auto& part : output[0]) part = part.to(t.device());
    return output[0];
  }

  std::vector<torch::Tensor> all_gather_varying(const torch::Tensor& t) override {
    auto sizes = all_gather(torch::tensor({t.size(0)}, torch::kLong).to(config_.device));
    int64_t longest = 0;
    for (const auto& s : sizes) longest = std::max(longest, s.item<int64_t>());
    auto shape = t.sizes().vec();
    shape[0] = longest;
    auto padded = torch::zeros(shape, t.options());
    padded.narrow(0, 0, t.size(0)).copy_(t);
    auto parts = all_gather(padded);
    for (size_t r = 0; r < parts.size(); ++r)
      parts[r] = parts[r].narrow(0, 0, sizes[r].item<int64_t>());
    return parts;
  }

  void barrier() override { run("barrier", group_->barrier()); }

  std::unique_ptr<PendingWork> all_reduce_sum_async(torch::Tensor t) override {
    XDINO_CHECK(t.is_contiguous() && t.device() == config_.device,
                "all_reduce_sum_async needs a contiguous tensor on ", config_.device.str(),
                ", got one on ", t.device().str());
    monitor_->entering_collective();
    std::vector<torch::Tensor> list{t};
    struct Pending final : PendingWork {
      C10dCommunicator* self;
      c10::intrusive_ptr<c10d::Work> work;
      void wait() override { self->wait_for("all_reduce", work); }
    };
    auto pending = std::make_unique<Pending>();
    pending->self = this;
    pending->work = group_->allreduce(list);
    return pending;
  }

  void finalize() override {
    barrier();
    store_->add(store_key("done", config_.rank), 1);
    monitor_->stop();
    if (config_.rank == 0) {
      // The store lives in this process: keep it until every rank has stopped using it.
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      for (int r = 1; r < config_.world_size && Clock::now() < deadline;) {
        if (store_->add(store_key("done", r), 0) > 0)
          ++r;
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

 private:
  // A process layout the launcher got wrong: a usage error (exit 2). Rank 0 hosts the store,
  // so it keeps it a moment for the others to read the conflict (they poll every 50 ms).
  [[noreturn]] void fail_launch(const std::string& conflict) {
    if (config_.rank == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    XDINO_FAIL_ARG(conflict);
  }

  // Everyone checks in with its rank and world size, so that a missing process, a rank
  // started twice or a WORLD_SIZE that differs between processes is named by the rendezvous
  // itself (on every process: the one that finds the conflict leaves it in the store), not
  // found later as a collective that times out.
  void check_in() {
    const std::string where = config_.master_addr + ":" + std::to_string(config_.master_port);
    // The launcher's round goes with the world size: a process of an earlier round that met a
    // later round's store on the same port is refused like a wrong WORLD_SIZE.
    const std::string mine =
        std::to_string(config_.world_size) +
        (config_.round >= 0 ? " (launcher round " + std::to_string(config_.round) + ")" : "");
    const auto agreed =
        store_->compareSet("xdino/world_size", {}, std::vector<uint8_t>(mine.begin(), mine.end()));
    const std::string first(agreed.begin(), agreed.end());
    std::string conflict;
    if (first != mine)
      conflict = "rank " + std::to_string(config_.rank) + " has WORLD_SIZE " + mine +
                 " but a process that joined the rendezvous at " + where + " before it has " +
                 first +
                 "; start every process with the same WORLD_SIZE (and, under dino launch, "
                 "in the same round)";
    else if (store_->add(store_key("claimed", config_.rank), 1) > 1)
      conflict = "rank " + std::to_string(config_.rank) +
                 " was started twice (two processes "
                 "joined the rendezvous at " +
                 where + " as rank " + std::to_string(config_.rank) +
                 "); give each process its own rank";
    if (!conflict.empty()) {
      store_->set("xdino/conflict", std::vector<uint8_t>(conflict.begin(), conflict.end()));
      fail_launch(conflict);
    }
    store_->add("xdino/joined", 1);
    const auto deadline = Clock::now() + config_.timeout;
    while (store_->add("xdino/joined", 0) < config_.world_size) {
      if (store_->check({"xdino/conflict"})) {
        const auto text = store_->get("xdino/conflict");
        fail_launch(std::string(text.begin(), text.end()));
      }
      XDINO_CHECK(Clock::now() < deadline, "rendezvous at ", where,
                  " timed out: ", store_->add("xdino/joined", 0), " of ", config_.world_size,
                  " processes joined; start them all (same MASTER_ADDR, MASTER_PORT, "
                  "WORLD_SIZE) or raise --dist_timeout");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

#ifdef XDINO_HAVE_GLOO
  // Like torch.distributed: GLOO_SOCKET_IFNAME picks the interface; a loopback master means
  // one machine; otherwise the address this host's name resolves to.
  static std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master) {
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"))
      return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
    if (master == "127.0.0.1" || master == "localhost")
      return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    return c10d::ProcessGroupGloo::createDefaultDevice();
  }
#endif

  // Flattens runs of tensors of one dtype and device into buckets on config_.device, runs `op`
  // on each, and copies back (to where each tensor lives).
  template <typename Op>
  void for_each_bucket(std::vector<torch::Tensor>& tensors, Op op) {
    size_t i = 0;
    while (i < tensors.size()) {
      size_t j = i;
      int64_t bytes = 0;
      while (
          j < tensors.size() && tensors[j].scalar_type() == tensors[i].scalar_type() &&
          tensors[j].device() == tensors[i].device() &&
          (j == i || bytes + static_cast<int64_t>(tensors[j].nbytes()) <= config_.bucket_bytes)) {
        bytes += tensors[j].nbytes();
        ++j;
      }
      std::vector<torch::Tensor> flat;
      if (j == i + 1 && tensors[i].is_contiguous() && tensors[i].device() == config_.device) {
        flat.push_back(tensors[i]);
        op(flat);
      } else {
        std::vector<torch::Tensor> views;
        for (size_t k = i; k < j; ++k) views.push_back(tensors[k].reshape({-1}));
        flat.push_back(torch::cat(views).to(config_.device));
        op(flat);
        int64_t offset = 0;
        for (size_t k = i; k < j; ++k) {
          const int64_t n = tensors[k].numel();
          tensors[k].copy_(flat[0].narrow(0, offset, n).view(tensors[k].sizes()));
          offset += n;
        }
      }
      i = j;
    }
  }

  void run(const char* what, c10::intrusive_ptr<c10d::Work> work) {
    monitor_->entering_collective();
    wait_for(what, work);
  }

  // Waits for `work`, or for the monitor's verdict that a peer is unreachable, whichever
  // comes first (distributed/peer_monitor.h): a collective with an unreachable peer would
  // otherwise wait out --dist_timeout.
  void wait_for(const char* what, const c10::intrusive_ptr<c10d::Work>& work) {
    try {
      auto future = work->getFuture();
      PeerMonitor* monitor = monitor_.get();
      future->addCallback([monitor](c10::ivalue::Future&) { monitor->wake(); });
      monitor_->wait_until([&] { return future->completed(); });
      if (!future->completed()) {
        failed_ = true;
        XDINO_FAIL(what, " on rank ", config_.rank, " failed: ", monitor_->verdict());
      }
      work->wait();
    } catch (const xdino::Error&) {
      throw;
    } catch (const std::exception& e) {
      failed_ = true;
      const std::string cause = first_line(e.what());
      XDINO_FAIL(what, " on rank ", config_.rank, " failed: ", monitor_->diagnose(),
                 " (c10d: ", cause, ")");
    }
  }

  DistConfig config_;
  StorePtr store_;
  c10::intrusive_ptr<Backend> group_;
  std::unique_ptr<PeerMonitor> monitor_;
  bool failed_ = false;
};

}  // namespace

std::shared_ptr<Communicator> connect(const DistConfig& config) {
  XDINO_CHECK_ARG(config.world_size >= 1 && config.rank >= 0 && config.rank < config.world_size,
                  "bad process layout: rank ", config.rank, " of world size ", config.world_size);
  if (config.world_size == 1) {
    tell_launcher_joined();
    return local_communicator();
  }
  log::set_rank(config.rank, config.world_size);
  auto comm = std::make_shared<C10dCommunicator>(config);
  tell_launcher_joined();
  return comm;
}

}  // namespace xdino::distributed
