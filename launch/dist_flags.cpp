#include "launch/dist_flags.h"

namespace xdino::launch {

void declare_dist_flags(Flags& f, distributed::DistOptions& o) {
  f.add("dist_timeout", &o.dist_timeout,
        "seconds a process waits for the others (rendezvous, each collective) before it "
        "names the lost rank and exits 1; a process that dies is noticed at once");
}

}  // namespace xdino::launch
