// The launchers' rendezvous rules (distributed/rendezvous/rendezvous_rules.h) as tables, without a
// store: each rule of node_rendezvous.h's "round's life" is a state, a node, and the decision it
// must get (join, completion with its ranks, a late node's wait list and spare list, a node_rank
// held by another, a node gone, closing, the exit step), then whole lives: nodes taking turns
// on one in-memory state, as launchers do on the store, through a host that restarts.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "distributed/rendezvous/rendezvous_rules.h"

namespace xdino::distributed {
namespace {

using Act = Decision::Act;

RoundState::Participant participant(int64_t want, int64_t rank = -1,
                                    const std::string& master = "") {
  return {want, rank, master};
}

NodeSelf node(const std::string& name, int64_t rank = -1, int64_t nnodes = 2, bool left = true) {
  return {name, rank, nnodes, name + ":7000", left};
}

struct Rule {
  std::string what;
  RoundState state;
  NodeSelf self;
  Act act;
  // What the decision's state must hold (kWrite) and its flags.
  std::vector<std::string> participants = {}, waiting = {}, spare = {};
  bool complete = false;
  int64_t round = 0;
  bool leaving = false;
  std::string holder = "";
};

TEST(RendezvousRules, EachRuleIsOneDecision) {
  RoundState empty;
  empty.host = "a";
  RoundState one_joined = empty;
  one_joined.participants["a"] = participant(-1, -1, "a:7000");
  RoundState complete = one_joined;
  complete.participants["b"] = participant(-1, -1, "b:7000");
  complete.complete_round();
  RoundState complete_one_left = complete;
  complete_one_left.participants.erase("b");
  RoundState rank_held = empty;
  rank_held.participants["old"] = participant(1);
  RoundState closed = complete;
  closed.closed = true;
  closed.reason = "node b gave up: a test";

  const std::vector<Rule> rules = {
      {"a node joins an open round", empty, node("a"), Act::kWrite, {"a"}},
      {"the node that makes nnodes completes the round",
       one_joined,
       node("b"),
       Act::kWrite,
       {"a", "b"},
       {},
       {},
       true},
      {"a participant of a complete round has joined it", complete, node("b"), Act::kJoined},
      {"a participant of an open round waits for the others", one_joined, node("a"), Act::kWait},
      {"the exit step: a participant leaves the round it was in",
       complete,
       node("b", -1, 2, /*left=*/false),
       Act::kWrite,
       {"a"},
       {},
       {},
       true,
       0,
       true},
      {"the last participant of a complete round leaves: the next round opens",
       complete_one_left,
       node("a", -1, 2, false),
       Act::kWrite,
       {},
       {},
       {},
       false,
       1,
       true},
      {"a late node, the round short of a node: the wait list",
       complete_one_left,
       node("c"),
       Act::kWrite,
       {"a"},
       {"c"},
       {},
       true},
      {"a late node, the round full: spare",
       complete,
       node("c"),
       Act::kWrite,
       {"a", "b"},
       {},
       {"c"},
       true},
      {"a node_rank another participant holds: wait, naming it",
       rank_held,
       node("new", 1),
       Act::kWait,
       {},
       {},
       {},
       false,
       0,
       false,
       "old"},
      {"a closed rendezvous", closed, node("c"), Act::kClosed},
  };
  for (const Rule& r : rules) {
    SCOPED_TRACE(r.what);
    const Decision d = decide(r.state, r.self);
    EXPECT_EQ(d.act, r.act);
    EXPECT_EQ(d.leaving, r.leaving);
    EXPECT_EQ(d.holder, r.holder);
    if (r.act != Act::kWrite) continue;
    std::vector<std::string> participants;
    for (const auto& [n, p] : d.next.participants) participants.push_back(n);
    EXPECT_EQ(participants, r.participants);
    EXPECT_EQ(d.next.waiting, r.waiting);
    EXPECT_EQ(d.next.spare, r.spare);
    EXPECT_EQ(d.next.complete, r.complete);
    EXPECT_EQ(d.next.round, r.round);
  }
}

// Ranks at completion: each its node_rank, the others the free ranks in order, the store's
// host first; round_of names group rank 0's workers' store.
TEST(RendezvousRules, CompletionGivesNodeRanksThenTheHostFirst) {
  RoundState s;
  s.host = "h";
  s.participants["x"] = participant(-1, -1, "x:1");
  s.participants["y"] = participant(2, -1, "y:1");
  s.participants["h"] = participant(-1, -1, "h:1");
  const Decision d = decide(s, node("z", -1, 4));
  ASSERT_EQ(d.act, Act::kWrite);
  const auto& p = d.next.participants;
  EXPECT_EQ(p.at("h").rank, 0);
  EXPECT_EQ(p.at("x").rank, 1);
  EXPECT_EQ(p.at("y").rank, 2);
  EXPECT_EQ(p.at("z").rank, 3);
  const JoinedRound r = round_of(d.next, "y");
  EXPECT_EQ(r.group_rank, 2);
  EXPECT_EQ(r.master, "h:1");
  EXPECT_THROW(round_of(s, "y"), xdino::Error) << "not complete";
}

// A node that is gone (left, or no heartbeat) is dropped from every list; the last
// participant of a complete round gone opens the next round, whose waiting nodes then join.
TEST(RendezvousRules, GoneNodesAreDroppedAndTheLastOpensTheNextRound) {
  RoundState s;
  s.participants["a"] = participant(-1);
  s.participants["b"] = participant(-1);
  s.complete_round();
  s.waiting = {"c"};
  s.spare = {"d"};
  EXPECT_FALSE(drop_nodes(s, {"nobody"}));
  EXPECT_TRUE(drop_nodes(s, {"b", "d"}));
  EXPECT_EQ(s.participants.size(), 1u);
  EXPECT_TRUE(s.spare.empty());
  EXPECT_TRUE(s.complete) << "a participant is left";
  EXPECT_TRUE(drop_nodes(s, {"a"}));
  EXPECT_FALSE(s.complete);
  EXPECT_EQ(s.round, 1);
  EXPECT_EQ(s.waiting, std::vector<std::string>{"c"});
  const Decision d = decide(s, node("c"));
  EXPECT_EQ(d.act, Act::kWrite);
  EXPECT_EQ(d.next.participants.count("c"), 1u);
  EXPECT_TRUE(d.next.waiting.empty());
}

// Whole lives: launchers take turns on one state, each step one decide() whose kWrite is
// kept (a compare-and-set that won), as on the store. Returns the round each joined.
struct Launcher {
  explicit Launcher(NodeSelf s) : self(std::move(s)) {}
  NodeSelf self;
  bool joined = false;
  JoinedRound round;
};

void run(RoundState& state, std::vector<Launcher*> launchers, int max_steps = 50) {
  for (int step = 0; step < max_steps; ++step) {
    bool all = true;
    for (Launcher* l : launchers) {
      if (l->joined) continue;
      all = false;
      const Decision d = decide(state, l->self);
      l->self.left = d.left;
      if (d.act == Act::kWrite) {
        state = d.next;
        if (d.leaving) l->self.left = true;
      } else if (d.act == Act::kJoined) {
        l->joined = true;
        l->round = round_of(state, l->self.node);
      }
      ASSERT_NE(d.act, Act::kClosed);
    }
    if (all) return;
  }
  FAIL() << "the launchers did not all join within " << max_steps << " steps";
}

TEST(RendezvousRules, AHostRestartedWholeRejoinsTheNextRoundWithItsRank) {
  RoundState state;
  state.host = "hostA/1/0";
  Launcher a{node("hostA/1/0", 0)}, b{node("hostB/1/0", 1)};
  run(state, {&b, &a});
  EXPECT_EQ(a.round.round, 0);
  EXPECT_EQ(a.round.group_rank, 0);
  EXPECT_EQ(b.round.group_rank, 1);
  EXPECT_EQ(b.round.master, "hostA/1/0:7000");

  // Host A dies whole and its launcher starts again: a new node, while its predecessor still
  // fills the round. It waits as a spare.
  Launcher a2{node("hostA/2/0", 0)};
  Decision d = decide(state, a2.self);
  ASSERT_EQ(d.act, Act::kWrite);
  state = d.next;
  EXPECT_EQ(state.spare, std::vector<std::string>{"hostA/2/0"}) << "the round is full";
  // The predecessor's heartbeats stop: dropped, the round is short of a node, and the new one
  // moves to the wait list.
  EXPECT_TRUE(drop_nodes(state, {"hostA/1/0"}));
  d = decide(state, a2.self);
  ASSERT_EQ(d.act, Act::kWrite);
  state = d.next;
  EXPECT_EQ(state.waiting, std::vector<std::string>{"hostA/2/0"});
  EXPECT_TRUE(state.spare.empty());
  // The surviving launcher sees the waiting node (status) and leaves to re-form.
  b.joined = false;
  b.self.left = false;
  run(state, {&b, &a2});
  EXPECT_EQ(a2.round.round, 1);
  EXPECT_EQ(b.round.round, 1);
  EXPECT_EQ(a2.round.group_rank, 0);
  EXPECT_EQ(b.round.group_rank, 1);
  EXPECT_EQ(b.round.master, "hostA/2/0:7000") << "the new launcher's workers' store";
}

TEST(RendezvousRules, AThirdNodeWaitsAsSpareAndTakesTheRankOfOneThatLeft) {
  RoundState state;
  state.host = "a";
  Launcher a{node("a")}, b{node("b")}, c{node("c")};
  run(state, {&a, &b});
  Decision d = decide(state, c.self);
  ASSERT_EQ(d.act, Act::kWrite);
  state = d.next;
  EXPECT_EQ(state.spare, std::vector<std::string>{"c"}) << "the round is full";
  EXPECT_EQ(decide(state, c.self).act, Act::kWait);
  // b's launcher exits: it is dropped at once (left/<node>); c moves to the wait list, a
  // leaves to re-form, and the next round is a and c.
  drop_nodes(state, {"b"});
  d = decide(state, c.self);
  ASSERT_EQ(d.act, Act::kWrite);
  state = d.next;
  EXPECT_EQ(state.waiting, std::vector<std::string>{"c"});
  a.joined = false;
  a.self.left = false;
  run(state, {&a, &c});
  EXPECT_EQ(a.round.round, 1);
  EXPECT_EQ(c.round.round, 1);
  EXPECT_EQ(a.round.group_rank, 0) << "the store's host first";
  EXPECT_EQ(c.round.group_rank, 1);
}

// The state survives its store as text: dump, parse, the same; an unreadable one is named.
TEST(RendezvousRules, TheStateRoundTripsThroughItsText) {
  RoundState s;
  s.round = 3;
  s.host = "a";
  s.participants["a"] = participant(0, 0, "a:1");
  s.participants["b"] = participant(-1, 1, "b:2");
  s.complete = true;
  s.waiting = {"c"};
  s.spare = {"d"};
  s.closed_by = "x";
  const RoundState back = RoundState::parse(s.dump());
  EXPECT_EQ(back.dump(), s.dump());
  EXPECT_EQ(RoundState::parse("").round, 0);
  EXPECT_THROW(RoundState::parse("{\"round\": 1}"), xdino::Error);
}

}  // namespace
}  // namespace xdino::distributed
