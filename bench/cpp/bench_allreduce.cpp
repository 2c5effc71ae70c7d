// All-reduce bandwidth through our c10d communicator (Gloo on CPU, NCCL on GPU), for
// gradient-sized buffers. Run without arguments: it starts itself as N local processes.
//   build/bench/bench_allreduce [nproc=2] [max_mb=64]
// Prints, per size: time per all-reduce and the "bus bandwidth" 2(n-1)/n * bytes / time
// (the figure NCCL's tests report: what each link carries in a ring all-reduce). No other
// implementation runs beside it: the figures are read against the gradient bytes of a step
// (bench/results/distributed_and_healing.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "distributed/distributed.h"
#include "distributed/launcher_env.h"
#include "launch/local_launcher.h"

using namespace xdino;

int main(int argc, char** argv) {
  const int nproc = argc > 1 ? std::atoi(argv[1]) : 2;
  const int max_mb = argc > 2 ? std::atoi(argv[2]) : 64;
  if (std::getenv("RANK") == nullptr) {
    launch::LocalLaunchOptions o;
    o.nproc = nproc;
    // launch_local re-executes /proc/self/exe with "dino" as argv[0]; pass our arguments on.
    return launch::launch_local(o, {std::to_string(nproc), std::to_string(max_mb)});
  }
  distributed::DistConfig config = distributed::dist_config_from_env();
  auto comm = distributed::connect(config);
  const int world = comm->world_size();
  if (comm->rank() == 0)
    std::printf("# %d processes, device %s\n%12s %12s %12s\n", world, config.device.str().c_str(),
                "bytes", "ms", "busbw GB/s");
  for (int64_t bytes = 4096; bytes <= int64_t(max_mb) << 20; bytes *= 4) {
    auto t = torch::ones({bytes / 4}, torch::TensorOptions().device(config.device));
    for (int i = 0; i < 3; ++i) comm->all_reduce_sum(t);  // warm-up
    const int reps = bytes < (1 << 20) ? 50 : 10;
    comm->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) comm->all_reduce_sum(t);
    if (config.device.is_cuda()) torch::cuda::synchronize();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    if (comm->rank() == 0)
      std::printf("%12ld %12.3f %12.3f\n", static_cast<long>(bytes), s * 1e3,
                  2.0 * (world - 1) / world * bytes / s / 1e9);
  }
  comm->finalize();
  return 0;
}
