#include "launch/dist_flags.h"

namespace xdino::launch {

void declare_dist_flags(Flags& f, distributed::DistOptions& o) {
  f.group("Distributed (processes of one run; main_dino.py's --dist_url and --local_rank)");
  f.add("dist_timeout", &o.dist_timeout,
        "seconds a process waits for the others (rendezvous, each collective) before it "
        "names the lost rank and exits 1; a process that dies is noticed at once")
      .add("dist_heartbeat_timeout", &o.dist_heartbeat_timeout,
           "seconds without a peer's heartbeat (an unreachable host, a frozen process) after "
           "which the others name it and exit 1; a peer that is only slow keeps beating")
      .add("dist_url", &o.dist_url, "rendezvous (env:// reads the launcher's variables)")
      .add("local_rank", &o.local_rank, "ignored; the rank comes from the environment");
}

}  // namespace xdino::launch
