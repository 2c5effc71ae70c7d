#include "distributed/rendezvous/rendezvous_rules.h"

#include <algorithm>

#include "core/check.h"
#include "core/json.h"

namespace xdino::distributed {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
void remove(std::vector<std::string>& v, const std::string& x) {
  v.erase(std::remove(v.begin(), v.end(), x), v.end());
}
void put(std::vector<std::string>& v, const std::string& x) {
  if (!contains(v, x)) v.push_back(x);
}

}  // namespace

std::vector<std::string> RoundState::nodes() const {
  std::vector<std::string> all;
  for (const auto& [node, p] : participants) all.push_back(node);
  for (const auto& n : waiting) put(all, n);
  for (const auto& n : spare) put(all, n);
  return all;
}

std::string RoundState::dump() const {
  Json j;
  j["round"] = round;
  j["complete"] = complete;
  j["closed"] = closed;
  j["finished"] = finished;
  j["closed_by"] = closed_by;
  j["reason"] = reason;
  j["host"] = host;
  Json ps = Json::object();
  for (const auto& [node, p] : participants)
    ps[node] = Json{{"want", p.want}, {"rank", p.rank}, {"master", p.master}};
  j["participants"] = ps;
  j["waiting"] = waiting;
  j["spare"] = spare;
  return j.dump();
}

RoundState RoundState::parse(const std::string& text) {
  RoundState s;
  if (text.empty()) return s;
  try {
    const Json j = parse_json(text, "the rendezvous state");
    s.round = j.at("round").get<int64_t>();
    s.complete = j.at("complete").get<bool>();
    s.closed = j.at("closed").get<bool>();
    s.finished = j.at("finished").get<bool>();
    s.closed_by = j.at("closed_by").get<std::string>();
    s.reason = j.at("reason").get<std::string>();
    s.host = j.at("host").get<std::string>();
    for (const auto& [node, p] : j.at("participants").items())
      s.participants[node] = {p.at("want").get<int64_t>(), p.at("rank").get<int64_t>(),
                              p.at("master").get<std::string>()};
    s.waiting = j.at("waiting").get<std::vector<std::string>>();
    s.spare = j.at("spare").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    XDINO_FAIL("the rendezvous store holds a state this launcher cannot read (", e.what(),
               "): is another program using the same --rdzv_endpoint and --rdzv_id?");
  }
  return s;
}

void RoundState::advance() {
  ++round;
  complete = false;
  participants.clear();
}

void RoundState::complete_round() {
  std::vector<bool> taken(participants.size(), false);
  std::vector<std::string> free_nodes;
  for (auto& [node, p] : participants) {
    p.rank = p.want;
    if (p.want >= 0 && p.want < static_cast<int64_t>(taken.size()))
      taken[p.want] = true;
    else
      free_nodes.push_back(node);
  }
  std::stable_sort(
      free_nodes.begin(), free_nodes.end(),
      [&](const std::string& a, const std::string& b) { return (a == host) > (b == host); });
  size_t next = 0;
  for (const auto& node : free_nodes) {
    while (taken[next]) ++next;
    participants[node].rank = static_cast<int64_t>(next);
    taken[next] = true;
  }
  complete = true;
}

Decision decide(const RoundState& state, const NodeSelf& self) {
  Decision d;
  d.next = state;
  d.left = self.left;
  RoundState& s = d.next;
  if (s.closed) {
    d.act = Decision::Act::kClosed;
    return d;
  }
  const int64_t n = self.nnodes;
  const bool mine = s.participants.count(self.node) > 0;
  bool changed = false;
  if (!d.left) {  // the exit step: leave the round this node was in
    if (mine || contains(s.waiting, self.node) || contains(s.spare, self.node)) {
      s.participants.erase(self.node);
      remove(s.waiting, self.node);
      remove(s.spare, self.node);
      if (mine && s.complete && s.participants.empty()) s.advance();
      changed = d.leaving = true;
    } else {
      d.left = true;
    }
  }
  if (d.left && s.complete && mine) {
    d.act = Decision::Act::kJoined;
    return d;
  }
  if (d.left && s.complete) {  // late: ask for a new round, or wait as a spare
    const bool room = static_cast<int64_t>(s.participants.size()) < n;
    auto& to = room ? s.waiting : s.spare;
    auto& from = room ? s.spare : s.waiting;
    if (!contains(to, self.node) || contains(from, self.node)) {
      put(to, self.node);
      remove(from, self.node);
      changed = true;
    }
  } else if (d.left && mine) {
    if (static_cast<int64_t>(s.participants.size()) >= n) {
      s.complete_round();
      changed = true;
    }
  } else if (d.left) {
    for (const auto& [node, p] : s.participants)
      if (self.node_rank >= 0 && p.want == self.node_rank) d.holder = node;
    if (static_cast<int64_t>(s.participants.size()) >= n) {
      if (!contains(s.spare, self.node)) {
        put(s.spare, self.node);
        changed = true;
      }
      d.holder.clear();
    } else if (d.holder.empty()) {
      s.participants[self.node] = {self.node_rank, -1, self.master};
      remove(s.waiting, self.node);
      remove(s.spare, self.node);
      if (static_cast<int64_t>(s.participants.size()) == n) s.complete_round();
      changed = true;
    }
  }
  d.act = changed ? Decision::Act::kWrite : Decision::Act::kWait;
  return d;
}

bool drop_nodes(RoundState& state, const std::vector<std::string>& gone) {
  bool changed = false;
  for (const auto& node : gone) {
    const bool named = state.participants.count(node) > 0 || contains(state.waiting, node) ||
                       contains(state.spare, node);
    if (!named) continue;
    state.participants.erase(node);
    remove(state.waiting, node);
    remove(state.spare, node);
    changed = true;
  }
  if (changed && state.complete && state.participants.empty()) state.advance();
  return changed;
}

JoinedRound round_of(const RoundState& state, const std::string& node) {
  const auto me = state.participants.find(node);
  XDINO_CHECK(state.complete && me != state.participants.end(), "rendezvous: ", node,
              " is not a participant of the complete round ", state.round);
  JoinedRound r;
  r.round = state.round;
  r.group_rank = me->second.rank;
  for (const auto& [other, p] : state.participants)
    if (p.rank == 0) r.master = p.master;
  return r;
}

}  // namespace xdino::distributed
