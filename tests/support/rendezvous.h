// The launchers' rendezvous in the tests (tests/distributed): a node's next round, waited for
// without a stop request.
#pragma once

#include <stdexcept>

#include "distributed/rendezvous/node_rendezvous.h"

namespace xdino::testing {

// The round `r` joins; throws std::runtime_error where next_round gives none (it was stopped),
// and what next_round throws (a timeout, a closed rendezvous) otherwise.
inline distributed::NodeRound join_round(distributed::NodeRendezvous& r) {
  const auto round = r.next_round([] { return false; });
  if (!round) throw std::runtime_error("next_round returned no round");
  return *round;
}

}  // namespace xdino::testing
