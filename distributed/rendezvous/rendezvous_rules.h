// The launchers' rendezvous rules as pure functions of its state: what a node does next, given
// the state it read, decided without a store (torchrun's dynamic rendezvous keeps its
// _RendezvousJoinOp and _RendezvousExitOp the same way, apart from the one loop that reads and
// writes). node_rendezvous.h's loop reads the state, drops the nodes it finds gone, asks
// decide(), and carries out the answer with compare-and-set; any store keeps the rules alike.
// The round's life they implement is node_rendezvous.h's ("The round's life"); each rule is a
// table test of tests/distributed/test_rendezvous_rules.cpp.
//
// Contract:
//  - RoundState: the state one store key holds, as one JSON blob (dump/parse; parse of ""
//    is the empty state of round 0; of anything else unreadable, xdino::Error naming it).
//    nodes() lists every node it names (participants, waiting, spare).
//  - decide(state, self) is one step of self's next_round: it returns
//      kClosed  the rendezvous is closed (state.reason, state.finished say why);
//      kJoined  self is a participant of the complete round: round_of(state, self.node);
//      kWrite   `next` is the state to compare-and-set (a join, a completion, a leave, a place
//               on the wait or spare list); `leaving`: this write is self's exit step;
//      kWait    nothing to change yet; `holder` names the participant holding self's
//               node_rank, when one does.
//    `left` says whether self has left the round it was in (true once a write with leaving
//    succeeded, or when the state no longer names it): the caller passes it back next step.
//  - drop_nodes(state, gone) removes those nodes from every list; when the last participant
//    of a complete round goes, the next round opens. Returns whether it changed anything.
//  - round_of(state, node): the round `node` is in (its rank, and group rank 0's master);
//    state must be complete with node a participant (xdino::Error otherwise).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xdino::distributed {

struct RoundState {
  struct Participant {
    int64_t want = -1;   // the node_rank it asked for; -1: any
    int64_t rank = -1;   // given at completion
    std::string master;  // "addr:port" of its workers' store, should it be group rank 0
  };
  int64_t round = 0;
  bool complete = false;
  bool closed = false;
  bool finished = false;
  std::string closed_by, reason;
  std::string host;  // the store's host: the first free rank
  std::map<std::string, Participant> participants;
  std::vector<std::string> waiting, spare;

  std::vector<std::string> nodes() const;
  std::string dump() const;
  static RoundState parse(const std::string& text);
  // The last participant of a complete round has gone: the next round opens.
  void advance();
  // Ranks: each its node_rank, the others the free ranks in order, the store's host first.
  void complete_round();
};

// What a node knows of itself.
struct NodeSelf {
  std::string node;        // "<addr>/<pid>/<n>"
  int64_t node_rank = -1;  // the rank it asks for; -1: any
  int64_t nnodes = 1;      // the size of every round
  std::string master;      // its workers' store, published when it joins
  bool left = false;       // it has left the round it was in
};

struct Decision {
  enum class Act { kClosed, kJoined, kWrite, kWait };
  Act act = Act::kWait;
  RoundState next;       // kWrite: the state to write
  bool leaving = false;  // kWrite: the write is self's exit step
  bool left = false;     // self has left (see the contract)
  std::string holder;    // kWait: the participant holding self's node_rank, if any
};

Decision decide(const RoundState& state, const NodeSelf& self);

bool drop_nodes(RoundState& state, const std::vector<std::string>& gone);

struct JoinedRound {
  int64_t round = 0;
  int64_t group_rank = 0;
  std::string master;  // group rank 0's "addr:port"
};
JoinedRound round_of(const RoundState& state, const std::string& node);

}  // namespace xdino::distributed
