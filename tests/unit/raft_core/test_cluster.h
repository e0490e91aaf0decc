// A tiny in-process harness for the Raft core unit tests: N Cores, a FIFO message queue that
// the test drains explicitly, per-node "storage" (a PersistentState that is synced at once),
// and helpers to isolate, crash and restart members. No threads, no clock: every test is a
// fixed sequence of calls. The randomized, fault-injecting simulation is tests/sim/.
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/check.h"
#include "replication/raft/core.h"

namespace qrstore::replication::raft::testing {

// Applies one Ready's writes to a stored log, as a driver would.
inline void PersistReady(PersistentState* s, const Ready& rd) {
  if (rd.snapshot) {  // first: the log continues after the snapshot point
    s->entries.clear();
    s->first_index = rd.snapshot->index + 1;
    s->prev_term = rd.snapshot->term;
  }
  if (rd.hard_state) s->hard = *rd.hard_state;
  if (rd.entries.empty()) return;
  const Index first = rd.entries.front().index;
  const Index stored_last = s->first_index + s->entries.size() - 1;
  QR_CHECK(first >= s->first_index && first <= stored_last + 1, "ready entries leave a gap");
  s->entries.resize(first - s->first_index);
  s->entries.insert(s->entries.end(), rd.entries.begin(), rd.entries.end());
}

// A log of the given terms at indexes 1.., with data "e<index>".
inline std::vector<Entry> LogOfTerms(const std::vector<Term>& terms) {
  std::vector<Entry> out;
  for (size_t i = 0; i < terms.size(); ++i) {
    out.push_back(Entry{terms[i], i + 1, "e" + std::to_string(i + 1)});
  }
  return out;
}

class TestCluster {
 public:
  struct Node {
    std::unique_ptr<Core> core;
    PersistentState stored;
    std::vector<Entry> applied;
    bool up = true;
  };

  explicit TestCluster(int n, NodeId preferred = kNoNode, uint64_t seed = 1, bool pre_vote = false)
      : preferred_(preferred), seed_(seed), pre_vote_(pre_vote) {
    for (int i = 0; i < n; ++i) members_.push_back(static_cast<NodeId>(i));
    for (NodeId id : members_) {
      nodes_[id].core = std::make_unique<Core>(Options(id), PersistentState{});
    }
  }

  CoreOptions Options(NodeId id) const {
    CoreOptions o;
    o.group = 7;
    o.id = id;
    o.members = members_;
    o.election_ticks = 10;
    o.heartbeat_ticks = 1;
    o.seed = seed_;
    o.preferred_leader = preferred_;
    o.pre_vote = pre_vote_;
    return o;
  }

  Core& core(NodeId id) { return *nodes_.at(id).core; }
  Node& node(NodeId id) { return nodes_.at(id); }
  const std::vector<NodeId>& members() const { return members_; }

  // Drains a node's Readies in the contract's order: persist, send, apply, Advance.
  void Process(NodeId id) {
    Node& n = nodes_.at(id);
    if (!n.up) return;
    for (int guard = 0; n.core->HasReady(); ++guard) {
      QR_CHECK_LT(guard, 1000);
      Ready rd = n.core->TakeReady();
      PersistReady(&n.stored, rd);
      for (auto& m : rd.messages) queue_.push_back(std::move(m));
      n.applied.insert(n.applied.end(), rd.committed.begin(), rd.committed.end());
      n.core->Advance();
    }
  }
  void ProcessAll() {
    for (NodeId id : members_) Process(id);
  }

  // Delivers queued messages (and the ones they cause) until the network is quiet.
  void Deliver(size_t max_messages = 100000) {
    ProcessAll();
    size_t delivered = 0;
    while (!queue_.empty()) {
      QR_CHECK_LT(delivered, max_messages);
      Message m = std::move(queue_.front());
      queue_.pop_front();
      ++delivered;
      if (!Connected(m.from, m.to)) continue;
      Node& n = nodes_.at(m.to);
      n.core->Step(m);
      Process(m.to);
    }
  }

  void TickAll() {
    for (NodeId id : members_) {
      if (nodes_.at(id).up) nodes_.at(id).core->Tick();
    }
    ProcessAll();
  }

  // Ticks and delivers until pred() holds; false if it did not within max_ticks.
  template <typename Pred>
  bool RunUntil(Pred pred, int max_ticks = 200) {
    for (int t = 0; t < max_ticks; ++t) {
      if (pred()) return true;
      TickAll();
      Deliver();
    }
    return pred();
  }

  // The live leader with the highest term, or kNoNode.
  NodeId Leader() const {
    NodeId best = kNoNode;
    Term best_term = 0;
    for (NodeId id : members_) {
      const Node& n = nodes_.at(id);
      if (n.up && n.core->role() == Role::kLeader && n.core->term() >= best_term) {
        best = id;
        best_term = n.core->term();
      }
    }
    return best;
  }
  NodeId ElectLeader() {
    QR_CHECK(RunUntil([&] { return Leader() != kNoNode; }), "no leader elected");
    return Leader();
  }

  Index Propose(NodeId leader, const std::string& data) {
    Result<Index> r = core(leader).Propose(data);
    QR_CHECK(r.ok(), "propose failed: %s", r.status().ToString().c_str());
    Process(leader);
    return r.value();
  }

  void Isolate(NodeId id) { isolated_.insert(id); }
  void Heal() { isolated_.clear(); }
  void Crash(NodeId id) {
    Node& n = nodes_.at(id);
    n.up = false;
    n.core.reset();
    n.applied.clear();  // the application state is in memory: rebuilt from the log
  }
  void Restart(NodeId id) {
    Node& n = nodes_.at(id);
    n.core = std::make_unique<Core>(Options(id), n.stored);
    n.up = true;
  }
  void DropQueued() { queue_.clear(); }
  std::deque<Message>& queue() { return queue_; }

 private:
  bool Connected(NodeId a, NodeId b) const {
    if (!nodes_.at(a).up || !nodes_.at(b).up) return false;
    return isolated_.count(a) == 0 && isolated_.count(b) == 0;
  }

  std::vector<NodeId> members_;
  NodeId preferred_;
  uint64_t seed_;
  bool pre_vote_;
  std::map<NodeId, Node> nodes_;
  std::set<NodeId> isolated_;
  std::deque<Message> queue_;
};

}  // namespace qrstore::replication::raft::testing
