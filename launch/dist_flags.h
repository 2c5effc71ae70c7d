// The --dist_timeout flag of every subcommand that connects processes (train, knn, linear,
// features), bound to dist::DistOptions so its default lives in one place (dist/rendezvous.h).
//
// Contract: declare_dist_flags() adds the flags to `flags`, writing into `options`.
#pragma once

#include "dist/rendezvous.h"
#include "launch/flags.h"

namespace xdino::launch {

void declare_dist_flags(Flags& flags, dist::DistOptions& options);

}  // namespace xdino::launch
