// The ZooKeeper leader's retention rules (zk_retention.h says what they are and why).
#include "replication/zookeeper/zk_retention.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace qrstore::replication::zookeeper {

namespace {

uint64_t NextOf(const RetentionFollower& f, const StreamKey& key) {
  auto it = f.next.find(key);
  return it == f.next.end() ? 0 : it->second;
}

// Where a restart of the follower would start reading the stream (<= NextOf).
uint64_t KeepOf(const RetentionFollower& f, const StreamKey& key) {
  auto it = f.keep_from.find(key);
  return std::min(NextOf(f, key), it == f.keep_from.end() ? UINT64_MAX : it->second);
}

// The oldest batch still in ZooKeeper, or where the stream's next batch will be.
uint64_t OldestKept(const RetentionStream& s) { return s.kept->empty() ? s.first_unkept : s.kept->begin()->first; }

// What remains of a stream once the plan's deletions so far are done: they always take the
// oldest batches, so a position into `kept` describes it.
struct Cursor {
  std::map<uint64_t, KeptBatch>::const_iterator it;  // the oldest remaining batch
  size_t left = 0;                                   // batches remaining
  uint64_t bytes = 0;                                // their bytes
};

// One round's planning: the state the rules share (the followers in id order, a cursor per
// stream over what remains kept, the bytes kept and the deletions left), one method per rule.
struct RetentionRound {
  explicit RetentionRound(const RetentionInput& input) : in(input) {}

  const RetentionInput& in;
  RetentionPlan plan;
  std::vector<const RetentionFollower*> followers;
  // Groups in which a follower was stranded before this round: (index into followers, group).
  std::set<std::pair<size_t, uint32_t>> stranded_before;
  std::map<StreamKey, Cursor> cur;
  uint64_t kept_bytes = 0;
  size_t budget = 0;
  // Rule 2, per stream: whom it waits for.
  struct Waited {
    size_t k = 0;
    size_t able = 0;                                     // live followers that can catch up
    std::vector<std::pair<uint64_t, std::string>> top;   // the k most advanced: (next, id)
    uint64_t limit = UINT64_MAX;
  };
  std::map<StreamKey, Waited> waited;
  size_t needed = 0;

  // A follower stranded in `group` before this round holds nothing back there, in no rule.
  bool counts(size_t i, uint32_t group) const { return stranded_before.count({i, group}) == 0; }
  void take(Cursor& c) {
    c.bytes -= c.it->second.bytes;
    kept_bytes -= c.it->second.bytes;
    ++c.it;
    --c.left;
    --budget;
  }
  void Setup();
  void Rule1();
  void Rule2();
  void Stranded();
  void Rule3();
};

void RetentionRound::Setup() {
  // Followers in id order: stranded lists and ties come out the same on every run.
  for (const auto& f : in.registered) followers.push_back(&f);
  std::sort(followers.begin(), followers.end(),
            [](const RetentionFollower* a, const RetentionFollower* b) { return a->id < b->id; });

  // Groups in which a follower was stranded before this round: it no longer holds anything
  // back (nothing kept can bring it up to date), in no rule.
  for (size_t i = 0; i < followers.size(); ++i) {
    for (const auto& [key, s] : in.streams) {
      if (NextOf(*followers[i], key) < OldestKept(s)) stranded_before.insert({i, key.first});
    }
  }

  for (const auto& [key, s] : in.streams) {
    cur[key] = Cursor{s.kept->begin(), s.kept->size(), s.kept_bytes};
    kept_bytes += s.kept_bytes;
  }
  budget = in.max_deletes;
}

void RetentionRound::Rule1() {
  // Rule 1: what every registered follower that can still catch up has consumed.
  if (in.followers > 0 && followers.size() >= static_cast<size_t>(in.followers)) {
    for (const auto& [key, s] : in.streams) {
      uint64_t min_next = UINT64_MAX;
      for (size_t i = 0; i < followers.size(); ++i) {
        if (counts(i, key.first)) min_next = std::min(min_next, KeepOf(*followers[i], key));
      }
      if (min_next == UINT64_MAX) continue;  // every follower is stranded here: rule 2 decides
      // Keep the last consumed batch: a restarted leader finds where the stream ends from it.
      uint64_t keep_from = min_next == 0 ? 0 : min_next - 1;
      if (auto lk = in.leader_keep_from.find(key.first); lk != in.leader_keep_from.end()) {
        keep_from = std::min(keep_from, lk->second);
      }
      Cursor& c = cur[key];
      while (budget > 0 && c.left > 0 && c.it->first < keep_from) {
        take(c);
        ++plan.deletes[key].consumed;
      }
    }
  }
}

void RetentionRound::Rule2() {
  // Rule 2: per stream, the batches below `limit` are what the k most advanced live followers
  // that can still catch up have all consumed (k = min(needed, their number); k = 0: any).
  needed = static_cast<size_t>(NeededFollowers(in.followers));
  for (const auto& [key, s] : in.streams) {
    Waited w;
    std::vector<std::pair<uint64_t, std::string>> able;
    for (size_t i = 0; i < followers.size(); ++i) {
      if (followers[i]->live && counts(i, key.first)) able.emplace_back(NextOf(*followers[i], key), followers[i]->id);
    }
    // Most advanced first; ties by id (deterministic).
    std::sort(able.begin(), able.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    w.able = able.size();
    w.k = in.followers == 0 ? 0 : std::min(needed, able.size());
    if (w.k > 0) {
      w.top.assign(able.begin(), able.begin() + static_cast<std::ptrdiff_t>(w.k));
      w.limit = w.top.back().first;
    }
    waited[key] = std::move(w);
  }
  while (in.retain_bytes > 0 && kept_bytes > in.retain_bytes && budget > 0) {
    // Oldest first within a stream; the stream keeping the most bytes first (ties: key order).
    Cursor* best = nullptr;
    StreamKey best_key{};
    for (auto& [key, c] : cur) {
      if (c.left > 1 && c.bytes > 0 && c.it->first < waited[key].limit && (best == nullptr || c.bytes > best->bytes)) {
        best = &c;
        best_key = key;
      }
    }
    if (best == nullptr) break;
    take(*best);
    ++plan.deletes[best_key].evicted;
  }
  plan.kept_bytes_after = kept_bytes;
}

void RetentionRound::Stranded() {
  // Stranded, after the deletions.
  for (size_t i = 0; i < followers.size(); ++i) {
    std::map<uint32_t, StrandedFollower> by_group;
    for (const auto& [key, s] : in.streams) {
      const Cursor& c = cur.at(key);
      uint64_t oldest = s.first_unkept;
      if (c.left > 0) {
        oldest = c.it->first;
      } else if (!s.kept->empty()) {
        oldest = std::max(oldest, std::prev(s.kept->end())->first + 1);
      }
      const uint64_t next = NextOf(*followers[i], key);
      if (next >= oldest) continue;
      auto [it, first] = by_group.try_emplace(key.first);
      if (first) {
        it->second = StrandedFollower{followers[i]->id, key.first, key.second, next, oldest, 1,
                                      counts(i, key.first)};
      } else {
        ++it->second.streams;
      }
    }
    for (auto& [g, s] : by_group) plan.stranded.push_back(std::move(s));
  }
}

void RetentionRound::Rule3() {
  // Rule 3, and whom it waits for (the stream keeping the most bytes stands for all).
  if (in.followers > 0 && in.retain_bytes > 0 && kept_bytes > in.retain_bytes) {
    plan.held_back = true;
    const Cursor* fattest = nullptr;
    StreamKey fattest_key{};
    for (const auto& [key, c] : cur) {
      if (fattest == nullptr || c.bytes > fattest->bytes) {
        fattest = &c;
        fattest_key = key;
      }
    }
    const std::string kept = std::to_string(kept_bytes) + " bytes kept > replication.zookeeper.retain_bytes " +
                             std::to_string(in.retain_bytes);
    if (budget == 0) {
      plan.waiting_for = kept + "; more to delete than the " + std::to_string(in.max_deletes) +
                         " deletions of one cleanup round";
    } else if (fattest == nullptr || waited[fattest_key].k == 0) {
      plan.waiting_for = kept + "; nothing more can go: each stream keeps its newest batch";
    } else {
      const Waited& w = waited[fattest_key];
      std::string who;
      for (const auto& [next, id] : w.top) {
        who += (who.empty() ? "" : ", ") + ("'" + id + "' has read [0, " + std::to_string(next) + ")");
      }
      plan.waiting_for = kept + "; waiting for the " + (w.k == 1 ? "most advanced live follower" :
                                                        std::to_string(w.k) + " most advanced live followers") +
                         " to read on in stream " + StreamName(fattest_key.first, fattest_key.second) + " (" +
                         std::to_string(fattest->left) + " batches, " + std::to_string(fattest->bytes) +
                         " bytes kept): " + who + "; a majority of the group needs " + std::to_string(needed) +
                         " of its " + std::to_string(in.followers) +
                         " followers (replication.zookeeper.followers), " + std::to_string(w.able) +
                         " live and able to catch up";
    }
  }
}

}  // namespace

RetentionPlan PlanRetention(const RetentionInput& in) {
  RetentionRound r(in);
  r.Setup();
  r.Rule1();
  r.Rule2();
  r.Stranded();
  r.Rule3();
  return std::move(r.plan);
}

std::string StrandedReason(const StrandedFollower& s, uint64_t retain_bytes) {
  std::string more = s.streams > 1 ? " (and " + std::to_string(s.streams - 1) + " more streams of group " +
                                         std::to_string(s.group) + ")"
                                   : "";
  return "follower '" + s.id + "' fell behind: it has read [0, " + std::to_string(s.next) + ") of stream " +
         StreamName(s.group, s.planner) + more + " but the oldest batch kept is " + std::to_string(s.oldest_kept) +
         " (replication.zookeeper.retain_bytes " + std::to_string(retain_bytes) +
         "): it cannot catch up from ZooKeeper any more and needs a state transfer (with checkpoints, it fetches the "
         "leader's)";
}

std::string StrandedWarning(const StrandedFollower& s, uint64_t retain_bytes) {
  std::string more = s.streams > 1 ? " and " + std::to_string(s.streams - 1) + " more streams of group " +
                                         std::to_string(s.group)
                                   : "";
  return "follower '" + s.id + "' fell behind: " +
         (s.by_this_round ? "deleting batches it has not read" : "batches it has not read are gone") +
         " (it has read [0, " + std::to_string(s.next) + ") of stream " + StreamName(s.group, s.planner) + more +
         ", the oldest kept is " + std::to_string(s.oldest_kept) + "; replication.zookeeper.retain_bytes " +
         std::to_string(retain_bytes) +
         "): it cannot catch up from ZooKeeper any more and needs a state transfer (with checkpoints, it fetches the "
         "leader's)";
}

void LeaderFloor::RetainFrom(uint32_t group, uint64_t batch) {
  auto [it, fresh] = from_.try_emplace(group, batch);
  if (!fresh && batch > it->second) {
    before_[group] = it->second;
    it->second = batch;
  }
}

void LeaderFloor::HoldFrom(uint32_t group, uint64_t batch, int64_t until_ns, int64_t now_ns) {
  auto [it, fresh] = holds_.try_emplace(group, batch, until_ns);
  if (fresh) return;
  if (now_ns >= it->second.second) {
    it->second = {batch, until_ns};  // the old one expired
    return;
  }
  it->second.first = std::min(it->second.first, batch);
  it->second.second = std::max(it->second.second, until_ns);
}

uint64_t LeaderFloor::RetainedFrom(uint32_t group) const {
  auto it = from_.find(group);
  return it == from_.end() ? UINT64_MAX : it->second;
}

uint64_t LeaderFloor::Floor(uint32_t group, int64_t now_ns) const {
  uint64_t floor = UINT64_MAX;
  if (auto b = before_.find(group); b != before_.end()) {
    floor = b->second;
  } else if (auto it = from_.find(group); it != from_.end()) {
    floor = it->second;
  }
  if (auto h = holds_.find(group); h != holds_.end() && now_ns < h->second.second) floor = std::min(floor, h->second.first);
  return floor;
}

}  // namespace qrstore::replication::zookeeper
