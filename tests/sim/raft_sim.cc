#include "tests/sim/raft_sim.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "common/hash.h"
#include "common/rng.h"
#include "replication/raft/core.h"
#include "replication/raft/message_codec.h"

namespace qrstore::replication::raft::sim {

const char* InjectedBugName(InjectedBug bug) {
  switch (bug) {
    case InjectedBug::kNone: return "none";
    case InjectedBug::kLoseAckedWrites: return "lose-acked-writes";
    case InjectedBug::kForgetVotes: return "forget-votes";
  }
  return "unknown";
}

Result<InjectedBug> ParseInjectedBug(const std::string& name) {
  for (InjectedBug b : {InjectedBug::kNone, InjectedBug::kLoseAckedWrites, InjectedBug::kForgetVotes}) {
    if (name == InjectedBugName(b)) return b;
  }
  return Status::InvalidArgument("unknown bug '" + name +
                                 "' (expected none, lose-acked-writes or forget-votes)");
}

namespace {

constexpr uint32_t kGroup = 1;
constexpr int kElectionTicks = 10;

// What a member has synced to its disk. The whole log is kept (index i at log[i - 1]) so the
// checkers can compare history; `compacted` is the prefix the member's Core no longer holds
// (its application state covers it: a snapshot, in a real system).
struct Disk {
  HardState hard;
  std::vector<Entry> log;
  std::vector<uint64_t> chain;  // cumulative hash of log[0..i]
  Index compacted = 0;
};

struct Node {
  NodeId id = 0;
  std::unique_ptr<Core> core;  // null while crashed
  Disk disk;
  uint64_t down_until = 0;
  Index applied = 0;         // last entry the (in-memory) application applied
  Index checked_commit = 0;  // committed prefix already compared with the record
  bool crash_in_next_ready = false;
  bool leader_seen = false;  // was leader of leader_term at the last check
  Term leader_term = 0;
  uint64_t apply_paused_until = 0;
};

struct InFlight {
  uint64_t due = 0;
  uint64_t seq = 0;
  Message m;
};
struct LaterFirst {
  bool operator()(const InFlight& a, const InFlight& b) const {
    return a.due != b.due ? a.due > b.due : a.seq > b.seq;
  }
};

struct Committed {
  Term term = 0;
  uint64_t data_hash = 0;
  Term commit_term = 0;  // term of the first member seen treating it as committed
};

struct Proposal {
  NodeId node = 0;
  Term term = 0;
  Index index = 0;
  uint64_t data_hash = 0;
};

// Thrown nowhere: a violation is latched and the run unwinds by checks of `failed()`.
class Simulation {
 public:
  explicit Simulation(const SimOptions& o) : o_(o), rng_(Mix64(o.seed ^ 0x5eed5eedULL)) {
    // Per-seed network and pipelining parameters, so the seed list covers many regimes.
    drop_ = 0.2 * rng_.NextDouble();
    dup_ = 0.1 * rng_.NextDouble();
    max_delay_ = 1 + static_cast<int>(rng_.Uniform(4));
    const size_t append_bytes[] = {32, 256, 4096};
    const size_t inflight[] = {1, 4, 64};
    max_append_bytes_ = append_bytes[rng_.Uniform(3)];
    max_inflight_ = inflight[rng_.Uniform(3)];
    preferred_ = rng_.Bernoulli(0.5) ? static_cast<NodeId>(rng_.Uniform(o.nodes)) : kNoNode;
    for (int i = 0; i < o.nodes; ++i) members_.push_back(static_cast<NodeId>(i));
    nodes_.resize(o.nodes);
    partition_.assign(o.nodes, 0);
    for (NodeId id : members_) {
      nodes_[id].id = id;
      nodes_[id].core = std::make_unique<Core>(Options(id), PersistentState{});
    }
    Trace("start nodes=%d drop=%.3f dup=%.3f max_delay=%d append_bytes=%zu inflight=%zu preferred=%d",
          o.nodes, drop_, dup_, max_delay_, max_append_bytes_, max_inflight_,
          preferred_ == kNoNode ? -1 : static_cast<int>(preferred_));
  }

  SimResult Run() {
    for (step_ = 0; step_ < static_cast<uint64_t>(o_.steps) && !failed(); ++step_) {
      ChaosEvents();
      if (failed()) break;
      Step();
    }
    if (!failed()) Liveness();
    SimResult r;
    r.status = failure_ ? Status::Internal(*failure_) : Status::Ok();
    r.digest = digest_;
    stats_.steps = step_;
    stats_.committed = 0;
    for (const auto& c : record_) stats_.committed += c.has_value() ? 1 : 0;
    for (const auto& n : nodes_) {
      if (n.core) stats_.truncated_entries += n.core->stats().entries_truncated;
    }
    r.stats = stats_;
    return r;
  }

 private:
  CoreOptions Options(NodeId id) const {
    CoreOptions c;
    c.group = kGroup;
    c.id = id;
    c.members = members_;
    c.election_ticks = kElectionTicks;
    c.heartbeat_ticks = 1;
    c.seed = o_.seed;
    c.max_append_bytes = max_append_bytes_;
    c.max_inflight_appends = max_inflight_;
    c.max_uncommitted_bytes = 16 << 10;
    c.max_apply_bytes = 512;
    c.preferred_leader = preferred_;
    c.pre_vote = o_.pre_vote;
    c.applied = nodes_[id].disk.compacted;
    return c;
  }

  bool failed() const { return failure_.has_value(); }

  void Fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (failure_) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    failure_ = "step " + std::to_string(step_) + ": " + buf;
    Trace("VIOLATION %s", buf);
  }

  void Trace(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (!o_.trace) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "[sim seed=%" PRIu64 " step=%" PRIu64 "] %s\n", o_.seed, step_, buf);
  }

  void Digest(uint64_t a, uint64_t b = 0, uint64_t c = 0) {
    digest_ = Mix64(digest_ ^ Mix64(a ^ Mix64(b ^ Mix64(c))));
  }

  // ---- Network ----

  bool Connected(NodeId a, NodeId b) const { return partition_[a] == partition_[b]; }

  void Send(const Message& m) {
    stats_.messages_sent++;
    if (!Connected(m.from, m.to) || rng_.Bernoulli(drop_)) {
      stats_.messages_dropped++;
      return;
    }
    const int copies = rng_.Bernoulli(dup_) ? 2 : 1;
    if (copies == 2) stats_.messages_duplicated++;
    for (int i = 0; i < copies; ++i) {
      const uint64_t due = step_ + 1 + rng_.Uniform(static_cast<uint64_t>(max_delay_));
      net_.push(InFlight{due, seq_++, m});
    }
  }

  void DeliverDue() {
    for (int guard = 0; !net_.empty() && net_.top().due <= step_ && !failed(); ++guard) {
      QR_CHECK_LT(guard, 10000000);
      InFlight f = net_.top();
      net_.pop();
      Node& to = nodes_[f.m.to];
      if (!to.core || !Connected(f.m.from, f.m.to)) {
        stats_.messages_dropped++;
        continue;
      }
      // Every message goes through the wire codec, as it would between processes.
      Result<Message> wire = DecodeMessage(EncodeMessage(f.m));
      if (!wire.ok()) {
        Fail("codec round trip failed: %s", wire.status().ToString().c_str());
        return;
      }
      stats_.messages_delivered++;
      Digest(1, (static_cast<uint64_t>(f.m.from) << 32) | f.m.to,
             (f.m.term << 8) ^ static_cast<uint64_t>(f.m.type) ^ (f.m.log_index << 20));
      to.core->Step(wire.value());
      Process(&to);
      CheckAll();
    }
  }

  // ---- Members: the simulated driver ----

  void Process(Node* n) {
    for (int guard = 0; n->core && n->core->HasReady() && !failed(); ++guard) {
      QR_CHECK_LT(guard, 100000);
      Ready rd = n->core->TakeReady();
      const bool writes = rd.hard_state.has_value() || !rd.entries.empty();
      if (n->crash_in_next_ready && writes) {
        CrashMidReady(n, rd);
        return;
      }
      // Persist and sync, then send, then apply, then Advance: the driver's contract.
      if (rd.hard_state) WriteHardState(n, *rd.hard_state);
      if (!rd.entries.empty()) WriteEntries(n, rd.entries, rd.entries.size(), true);
      for (const Message& m : rd.messages) Send(m);
      for (const Entry& e : rd.committed) Apply(n, e);
      n->core->Advance();
      CheckCommitted(n);
      // Targeted fault: die right after granting a vote and come straight back, the window
      // in which a member that forgot its vote would grant a second one in the same term.
      if (chaos_ && rd.hard_state && rd.hard_state->voted_for != kNoNode &&
          rd.hard_state->voted_for != n->id && rng_.Bernoulli(0.2)) {
        Trace("crash member %u right after voting", n->id);
        Crash(n);
        n->down_until = step_ + 1;
        return;
      }
    }
    if (n->core && !failed()) CheckCoreMatchesDisk(*n);
  }

  void WriteHardState(Node* n, const HardState& hs) {
    const HardState& old = n->disk.hard;
    if (hs.term < old.term) Fail("member %u: durable term went back %" PRIu64 " -> %" PRIu64, n->id, old.term, hs.term);
    if (hs.term == old.term && old.voted_for != kNoNode && hs.voted_for != old.voted_for) {
      Fail("member %u: vote changed within term %" PRIu64 " (%u -> %u)", n->id, hs.term,
           old.voted_for, hs.voted_for);
    }
    n->disk.hard = hs;
  }

  static uint64_t ChainNext(uint64_t prev, const Entry& e) {
    return Mix64(prev ^ Mix64(e.term) ^ Hash64(e.data) ^ Mix64(e.index));
  }

  // Writes entries[0..count) (truncating from entries[0].index first); with count == 0 and
  // `truncate`, only the truncation (a torn write).
  void WriteEntries(Node* n, const std::vector<Entry>& entries, size_t count, bool truncate) {
    Disk& d = n->disk;
    const Index first = entries.front().index;
    if (first > d.log.size() + 1) {
      Fail("member %u: Ready entries start at %" PRIu64 " past the stored log end %zu", n->id,
           first, d.log.size());
      return;
    }
    if (truncate && first <= d.log.size()) {
      if (first <= d.compacted) {
        Fail("member %u: truncation at %" PRIu64 " inside the compacted prefix", n->id, first);
        return;
      }
      d.log.resize(first - 1);
      d.chain.resize(first - 1);
    }
    for (size_t i = 0; i < count; ++i) {
      const Entry& e = entries[i];
      d.chain.push_back(ChainNext(d.chain.empty() ? 0 : d.chain.back(), e));
      d.log.push_back(e);
      CheckLogMatchingAt(*n, e.index);
    }
  }

  void Apply(Node* n, const Entry& e) {
    if (e.index != n->applied + 1) {
      Fail("member %u applied index %" PRIu64 " after %" PRIu64 " (gap or repeat)", n->id,
           e.index, n->applied);
      return;
    }
    n->applied = e.index;
    Digest(2, n->id, e.index);
    Record(e.index, e.term, Hash64(e.data), n->core->term(), n->id);
  }

  // Every member's committed prefix must agree with the global record.
  void CheckCommitted(Node* n) {
    const Index c = n->core->commit_index();
    for (Index i = n->checked_commit + 1; i <= c && !failed(); ++i) {
      if (i > n->disk.log.size()) {
        Fail("member %u: commit %" PRIu64 " beyond its stored log (%zu)", n->id, c, n->disk.log.size());
        return;
      }
      const Entry& e = n->disk.log[i - 1];
      Record(i, e.term, Hash64(e.data), n->core->term(), n->id);
    }
    n->checked_commit = std::max(n->checked_commit, c);
  }

  void Record(Index i, Term term, uint64_t data_hash, Term observer_term, NodeId who) {
    if (record_.size() < i) record_.resize(i);
    std::optional<Committed>& slot = record_[i - 1];
    if (!slot) {
      slot = Committed{term, data_hash, observer_term};
      Digest(3, i, term);
      return;
    }
    if (slot->term != term || slot->data_hash != data_hash) {
      Fail("committed entry %" PRIu64 " changed: was term %" PRIu64 ", member %u has term %" PRIu64,
           i, slot->term, who, term);
    }
  }

  void CheckLogMatchingAt(const Node& a, Index i) {
    const Entry& ea = a.disk.log[i - 1];
    for (const Node& b : nodes_) {
      if (b.id == a.id || b.disk.log.size() < i) continue;
      if (b.disk.log[i - 1].term == ea.term && b.disk.chain[i - 1] != a.disk.chain[i - 1]) {
        Fail("log matching: members %u and %u agree on term %" PRIu64 " at index %" PRIu64
             " but not on the prefix",
             a.id, b.id, ea.term, i);
        return;
      }
    }
  }

  void CheckCoreMatchesDisk(const Node& n) {
    const Core& c = *n.core;
    if (c.last_index() != n.disk.log.size() ||
        (c.last_index() > 0 && c.last_term() != n.disk.log.back().term)) {
      Fail("member %u: core log (last %" PRIu64 ") differs from its storage (last %zu)", n.id,
           c.last_index(), n.disk.log.size());
    }
  }

  // Election safety and leader completeness, after every step.
  void CheckAll() {
    for (Node& n : nodes_) {
      if (failed()) return;
      if (!n.core || n.core->role() != Role::kLeader) {
        n.leader_seen = false;
        continue;
      }
      const Term t = n.core->term();
      stats_.max_term = std::max<uint64_t>(stats_.max_term, t);
      auto [it, inserted] = leaders_.emplace(t, n.id);
      if (!inserted && it->second != n.id) {
        Fail("election safety: members %u and %u both lead term %" PRIu64, it->second, n.id, t);
        return;
      }
      if (n.leader_seen && n.leader_term == t) continue;
      // A new leader: it must hold every entry committed in an earlier term.
      n.leader_seen = true;
      n.leader_term = t;
      stats_.leaders++;
      Trace("member %u leads term %" PRIu64 " (last %" PRIu64 ", commit %" PRIu64 ")", n.id, t,
            n.core->last_index(), n.core->commit_index());
      Digest(4, n.id, t);
      for (Index i = 1; i <= record_.size(); ++i) {
        const auto& slot = record_[i - 1];
        if (!slot || slot->commit_term >= t) continue;
        if (n.disk.log.size() < i || n.disk.log[i - 1].term != slot->term ||
            Hash64(n.disk.log[i - 1].data) != slot->data_hash) {
          Fail("leader completeness: member %u leads term %" PRIu64 " without committed entry %" PRIu64, n.id, t, i);
          return;
        }
      }
    }
  }

  // ---- Faults ----

  void Crash(Node* n) {
    Trace("crash member %u", n->id);
    stats_.crashes++;
    n->core.reset();
    n->leader_seen = false;
    n->crash_in_next_ready = false;
    // Some members come back at once (a process restart), others after a long outage.
    n->down_until = step_ + (rng_.Bernoulli(0.3) ? 1 + rng_.Uniform(3) : 5 + rng_.Uniform(100));
    Digest(5, n->id);
    if (o_.bug == InjectedBug::kLoseAckedWrites) {
      // The broken storage never synced its last few entries (above its compacted prefix).
      const size_t lose = 1 + rng_.Uniform(4);
      const size_t keep = std::max<size_t>(n->disk.compacted, n->disk.log.size() > lose ? n->disk.log.size() - lose : 0);
      n->disk.log.resize(keep);
      n->disk.chain.resize(keep);
    }
  }

  // The member dies while persisting `rd`: its synced disk keeps an arbitrary subset of the
  // Ready's writes (the hard state or not; the entries as a prefix, possibly with only the
  // truncation done). Its messages were never sent (they wait for the sync).
  void CrashMidReady(Node* n, const Ready& rd) {
    stats_.crashes_mid_ready++;
    if (rd.hard_state && rng_.Bernoulli(0.5)) WriteHardState(n, *rd.hard_state);
    if (!rd.entries.empty()) {
      const uint64_t k = rng_.Uniform(rd.entries.size() + 2);  // 0: untouched; 1: truncated only
      if (k > 0) WriteEntries(n, rd.entries, k - 1, true);
    }
    Trace("crash member %u while persisting a Ready", n->id);
    Crash(n);
  }

  void Restart(Node* n) {
    if (o_.bug == InjectedBug::kForgetVotes) n->disk.hard.voted_for = kNoNode;
    PersistentState ps;
    ps.hard = n->disk.hard;
    ps.first_index = n->disk.compacted + 1;
    ps.prev_term = n->disk.compacted > 0 ? n->disk.log[n->disk.compacted - 1].term : 0;
    ps.entries.assign(n->disk.log.begin() + static_cast<std::ptrdiff_t>(n->disk.compacted), n->disk.log.end());
    n->core = std::make_unique<Core>(Options(n->id), std::move(ps));
    // The in-memory application restarts from its snapshot at the compacted prefix; the core
    // re-delivers the rest of the committed log.
    n->applied = n->disk.compacted;
    n->checked_commit = n->disk.compacted;
    n->apply_paused_until = 0;
    Trace("restart member %u (term %" PRIu64 ", log %zu, commit %" PRIu64 ")", n->id,
          n->core->term(), n->disk.log.size(), n->core->commit_index());
    Digest(6, n->id, n->disk.log.size());
    CheckCommitted(n);
    Process(n);
  }

  void ChaosEvents() {
    for (Node& n : nodes_) {
      if (n.core) {
        if (rng_.Bernoulli(0.003)) {
          if (rng_.Bernoulli(0.5)) {
            Crash(&n);
          } else {
            n.crash_in_next_ready = true;  // dies while persisting its next Ready
          }
        }
      } else if (step_ >= n.down_until) {
        Restart(&n);
      }
      if (failed()) return;
    }
    if (partitioned_ && step_ >= partition_until_) Heal();
    if (!partitioned_ && rng_.Bernoulli(0.004)) {
      // Isolate one member, or split the group in two random halves.
      if (rng_.Bernoulli(0.5)) {
        partition_.assign(o_.nodes, 0);
        partition_[rng_.Uniform(o_.nodes)] = 1;
      } else {
        for (auto& p : partition_) p = static_cast<int>(rng_.Uniform(2));
      }
      partitioned_ = true;
      partition_until_ = step_ + 10 + rng_.Uniform(200);
      stats_.partitions++;
      Digest(7, partition_until_);
      if (o_.trace) {
        std::string s;
        for (int p : partition_) s += std::to_string(p);
        Trace("partition %s until step %" PRIu64, s.c_str(), partition_until_);
      }
    }
    if (rng_.Bernoulli(0.003)) {
      Node& n = nodes_[rng_.Uniform(o_.nodes)];
      if (n.core) n.apply_paused_until = step_ + rng_.Uniform(50);
    }
    if (rng_.Bernoulli(0.3)) ProposeToSomeLeader();
  }

  void Heal() {
    partition_.assign(o_.nodes, 0);
    partitioned_ = false;
    Trace("partition healed");
    Digest(8);
  }

  // Proposes to a random current leader (possibly a stale one in a minority).
  void ProposeToSomeLeader() {
    std::vector<Node*> leaders;
    for (Node& n : nodes_) {
      if (n.core && n.core->role() == Role::kLeader) leaders.push_back(&n);
    }
    if (leaders.empty()) return;
    Node* n = leaders[rng_.Uniform(leaders.size())];
    Propose(n);
  }

  std::optional<Proposal> Propose(Node* n) {
    std::string data = "s" + std::to_string(o_.seed) + "-p" + std::to_string(proposal_seq_++);
    data.append(rng_.Uniform(64), static_cast<char>('a' + rng_.Uniform(26)));
    const uint64_t h = Hash64(data);
    Result<Index> r = n->core->Propose(std::move(data));
    if (!r.ok()) return std::nullopt;  // e.g. too many uncommitted bytes
    stats_.proposals++;
    Proposal p{n->id, n->core->term(), r.value(), h};
    proposals_.push_back(p);
    Digest(9, n->id, r.value());
    Process(n);
    CheckAll();
    return p;
  }

  // One tick of simulated time: every live member ticks (a few skip, like a slow clock),
  // then every message due is delivered.
  void Step() {
    for (Node& n : nodes_) {
      if (!n.core || failed()) continue;
      n.core->SetApplyPaused(step_ < n.apply_paused_until);
      if (!rng_.Bernoulli(0.05)) n.core->Tick();
      Process(&n);
      CheckAll();
    }
    DeliverDue();
    if (o_.compaction && step_ % 25 == 0) Compact();
  }

  // Compacts every live member up to the prefix that every member (live or crashed) holds
  // durably as committed, so nobody ever needs a compacted entry (there are no snapshots).
  void Compact() {
    Index safe = UINT64_MAX;
    for (const Node& n : nodes_) {
      safe = std::min<Index>(safe, std::min<Index>(n.disk.hard.commit, n.disk.log.size()));
    }
    for (Node& n : nodes_) {
      if (!n.core) continue;
      const Index upto = std::min(safe, n.core->applied_index());
      if (upto <= n.disk.compacted) continue;
      n.core->Compact(upto);
      n.disk.compacted = upto;
      stats_.compactions++;
      Digest(10, n.id, upto);
    }
  }

  // ---- Liveness ----

  std::string Summary() const {
    std::string s;
    for (const Node& n : nodes_) {
      if (!n.core) {
        s += " [" + std::to_string(n.id) + " down]";
        continue;
      }
      const Core& c = *n.core;
      s += " [" + std::to_string(n.id) + " " + RoleName(c.role()) + " t" + std::to_string(c.term()) +
           " last" + std::to_string(c.last_index()) + " commit" + std::to_string(c.commit_index()) +
           " applied" + std::to_string(n.applied) + "]";
    }
    return s;
  }

  // The one leader every member follows, with everything committed and applied everywhere.
  Node* Converged() {
    Node* leader = nullptr;
    for (Node& n : nodes_) {
      if (!n.core) return nullptr;
      if (n.core->role() == Role::kLeader) {
        if (leader) return nullptr;
        leader = &n;
      }
    }
    if (!leader) return nullptr;
    const Core& l = *leader->core;
    if (l.commit_index() != l.last_index() || l.TermAt(l.commit_index()) != l.term()) return nullptr;
    for (Node& n : nodes_) {
      const Core& c = *n.core;
      if (c.term() != l.term() || c.leader() != leader->id || c.commit_index() != l.commit_index() ||
          c.last_index() != l.last_index() || n.applied != l.commit_index()) {
        return nullptr;
      }
    }
    return leader;
  }

  void Liveness() {
    chaos_ = false;
    Trace("liveness phase: healing everything");
    Heal();
    drop_ = 0;
    dup_ = 0;
    max_delay_ = std::min(max_delay_, 2);
    for (Node& n : nodes_) {
      n.crash_in_next_ready = false;
      n.apply_paused_until = 0;
      if (!n.core) Restart(&n);
    }
    // Convergence may need a long catch-up (a seed may pick one 32-byte append in flight at a
    // time), so the bound is on progress: the least-applied member must advance at least
    // every converge_ticks ticks, and everything must settle within 20x that.
    const uint64_t start = step_;
    uint64_t last_progress = step_;
    Index min_applied = 0;
    Node* leader = nullptr;
    for (; !failed(); ++step_) {
      leader = Converged();
      if (leader) break;
      Index m = UINT64_MAX;
      for (const Node& n : nodes_) m = std::min(m, n.applied);
      if (m > min_applied) {
        min_applied = m;
        last_progress = step_;
      }
      if (step_ - last_progress >= static_cast<uint64_t>(o_.converge_ticks) ||
          step_ - start >= 20 * static_cast<uint64_t>(o_.converge_ticks)) {
        Fail("liveness: no convergence %" PRIu64 " ticks after healing (%" PRIu64 " without progress):%s",
             step_ - start, step_ - last_progress, Summary().c_str());
        return;
      }
      Step();
    }
    if (failed()) return;
    Trace("converged after %" PRIu64 " ticks: leader %u term %" PRIu64, step_ - start, leader->id,
          leader->core->term());
    // Fresh proposals commit on every member within a bound.
    std::vector<Proposal> fresh;
    for (int i = 0; i < 5 && !failed(); ++i) {
      std::optional<Proposal> p = Propose(leader);
      if (!p) {
        Fail("liveness: the converged leader %u refused a proposal", leader->id);
        return;
      }
      fresh.push_back(*p);
    }
    const uint64_t commit_start = step_;
    for (; !failed(); ++step_) {
      bool all = true;
      for (const Node& n : nodes_) all = all && n.applied >= fresh.back().index;
      // Compaction never went past what every member holds, so the leader must end up able
      // to catch everyone up (its view of a member may lag by a round trip, hence the wait).
      const bool lagging = leader->core && !leader->core->lagging_members().empty();
      if (all && !lagging) break;
      if (step_ - commit_start >= static_cast<uint64_t>(o_.commit_ticks)) {
        Fail("liveness: %s within %d ticks:%s",
             all ? "a member still lags behind the leader's compacted log"
                 : "fresh proposals not applied everywhere",
             o_.commit_ticks, Summary().c_str());
        return;
      }
      Step();
    }
    if (failed()) return;
    if (leader->core == nullptr || leader->core->role() != Role::kLeader) {
      Fail("liveness: leadership changed in a fault-free phase");
      return;
    }
    for (const Proposal& p : fresh) CheckProposalCommitted(p);

    // Every chaos-phase proposal made to the member that still leads the same term was
    // never abandoned by its leader: it must be committed.
    for (const Proposal& p : proposals_) {
      if (p.node == leader->id && p.term == leader->core->term()) {
        stats_.survivor_proposals_checked++;
        CheckProposalCommitted(p);
      }
    }
  }

  void CheckProposalCommitted(const Proposal& p) {
    if (record_.size() < p.index || !record_[p.index - 1] || record_[p.index - 1]->term != p.term ||
        record_[p.index - 1]->data_hash != p.data_hash) {
      Fail("liveness: proposal at index %" PRIu64 " term %" PRIu64 " to surviving leader %u not committed",
           p.index, p.term, p.node);
    }
  }

  const SimOptions o_;
  Rng rng_;
  double drop_ = 0, dup_ = 0;
  int max_delay_ = 1;
  size_t max_append_bytes_ = 0, max_inflight_ = 0;
  NodeId preferred_ = kNoNode;
  std::vector<NodeId> members_;
  std::vector<Node> nodes_;
  std::vector<int> partition_;
  bool chaos_ = true;  // faults are injected (false in the liveness phase)
  bool partitioned_ = false;
  uint64_t partition_until_ = 0;
  std::priority_queue<InFlight, std::vector<InFlight>, LaterFirst> net_;
  uint64_t seq_ = 0;
  uint64_t step_ = 0;
  uint64_t proposal_seq_ = 0;
  std::vector<std::optional<Committed>> record_;  // index i at [i - 1]
  std::map<Term, NodeId> leaders_;
  std::vector<Proposal> proposals_;
  std::optional<std::string> failure_;
  uint64_t digest_ = 0;
  SimStats stats_;
};

}  // namespace

SimResult RunSimulation(const SimOptions& options) {
  QR_CHECK(options.nodes >= 1 && options.nodes <= 9, "nodes must be in [1, 9]");
  Simulation sim(options);
  return sim.Run();
}

}  // namespace qrstore::replication::raft::sim
