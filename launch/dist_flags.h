// The flags of every subcommand that connects processes (train, knn, linear, features):
// --dist_timeout, --dist_heartbeat_timeout and the official --dist_url / --local_rank, bound
// to distributed::DistOptions so their defaults and checks live in one place
// (distributed/launcher_env.h).
//
// Contract: declare_dist_flags() adds the flags to `flags`, writing into `options`.
#pragma once

#include "distributed/launcher_env.h"
#include "launch/flags.h"

namespace xdino::launch {

void declare_dist_flags(Flags& flags, distributed::DistOptions& options);

}  // namespace xdino::launch
