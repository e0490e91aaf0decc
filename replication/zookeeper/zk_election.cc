// ZkReplicator, election: per group, the standard ZooKeeper recipe. Candidates create
// EPHEMERAL_SEQUENTIAL znodes R/g<g>/election/n-<session>-<seq> (data: the member id); the lowest
// sequence leads; every other candidate watches its predecessor only (no herd effect). The winner
// bumps R/g<g>/epoch with a version-checked set (the new version is its epoch; the data its id),
// scans each stream (NextBatchId = the end of the contiguous run of markers), and only then
// leads (IsLeader). Every write it makes afterwards is a multi-op that checks the epoch's version
// (LeaderWrite), so once a successor bumped the epoch ZooKeeper itself refuses the old leader's
// writes. A leader stops leading for good (Depose) when a write is refused that way, when it sees
// the epoch move on, or when its session expires (its election znode went with it).
//
// A fresh group is led by the configured leader: a follower becomes a candidate only once the
// group's epoch znode exists, which the configured leader creates after its own election znode,
// so it is first in line. Start runs the configured leader's election to the end (a fresh group:
// it leads when Start returns).
//
// All of this runs on the worker thread (and on Start's). Its requests are synchronous, a round
// trip each: they happen only when a group's election moves (joining, a predecessor gone, a
// promotion, the epoch changed), never per batch.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator_impl.h"
#include "replication/zookeeper/zk_session.h"

namespace qrstore::replication::zookeeper {

namespace {

constexpr int kMaxStepRounds = 8;                   // per StepElection call; the rest at the next turn
constexpr int kMaxBumpAttempts = 8;                 // version races on the epoch znode
constexpr int64_t kStepDeadlineNanos = 2'000'000'000;  // synchronous requests of one step, retries included
constexpr int64_t kRetryNanos = 200'000'000;        // back-off after a step failed

}  // namespace

bool ZkReplicator::AnyLeading() const {
  if (!opts_.election) return opts_.leader;
  for (const auto& e : elections_) {
    if (e.phase == ElectionPhase::kLeading) return true;
  }
  return false;
}

void ZkReplicator::PublishView(uint32_t g, const LeaderView& v) {
  MutexLock lock(view_mu_);
  if (g < views_.size()) views_[g] = v;
}

void ZkReplicator::LeaderWrite(ZkSession::FencedKind kind, uint32_t g, const std::string& path,
                               std::string_view data, OpTag tag) {
  const uint64_t epoch = g < elections_.size() ? elections_[g].epoch : 0;
  if (epoch == 0) {  // no election (replication.zookeeper.election false): unfenced, as before
    switch (kind) {
      case ZkSession::FencedKind::kCreate:
        session_.Create(path, data, std::move(tag));
        return;
      case ZkSession::FencedKind::kSet:
        session_.Set(path, data, std::move(tag));
        return;
      case ZkSession::FencedKind::kDelete:
        session_.Delete(path, std::move(tag));
        return;
    }
  }
  session_.Fenced(kind, EpochPath(opts_.root, g), static_cast<int>(epoch), path, data, std::move(tag));
}

void ZkReplicator::PumpElection() {
  if (!opts_.election || !connected_) return;
  for (uint32_t g = 0; g < elections_.size(); ++g) {
    GroupElection& e = elections_[g];
    const int64_t now = NowNanos();
    if (e.step && now >= e.retry_nanos) {
      Status st = StepElection(g, now + kStepDeadlineNanos);
      if (!st.ok()) {
        log_->warn("{}election of group {}: {}; retrying", ident_, g, st.message());
        e.step = true;
        e.retry_nanos = NowNanos() + kRetryNanos;
      }
    }
    if (e.refresh && !e.step && now >= e.retry_nanos) RefreshView(g);
  }
}

Status ZkReplicator::JoinElection(uint32_t g, int64_t deadline_nanos) {
  GroupElection& e = elections_[g];
  const std::string dir = ElectionPath(opts_.root, g);
  const std::string prefix = ElectionNodePrefix(session_.SessionId());
  // A create lost with the connection may have been applied: our session's znode is ours.
  struct String_vector sv = {0, nullptr};
  QR_RETURN_IF_ERROR(SyncRetry("list", dir, deadline_nanos,
                               [&] { return zoo_get_children(session_.handle(), dir.c_str(), 0, &sv); }, {}));
  for (int32_t i = 0; i < sv.count; ++i) {
    std::string_view c = sv.data[i];
    if (c.substr(0, prefix.size()) == prefix) e.node = std::string(c);
  }
  deallocate_String_vector(&sv);
  if (!e.node.empty()) return Status::Ok();
  const std::string path = dir + "/" + prefix;
  std::vector<char> created(path.size() + 32, '\0');
  int rc = zoo_create(session_.handle(), path.c_str(), follower_id_.data(), static_cast<int>(follower_id_.size()),
                      &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created.data(),
                      static_cast<int>(created.size()));
  if (rc != ZOK) return Status::Unavailable("create " + path + "<seq> failed: " + ZkErrorName(rc));
  std::string full(created.data());
  e.node = full.substr(full.rfind('/') + 1);
  log_->info("{}group {}: candidate '{}' as {}", ident_, g, follower_id_, e.node);
  return Status::Ok();
}

Status ZkReplicator::StepElection(uint32_t g, int64_t deadline_nanos) {
  GroupElection& e = elections_[g];
  e.step = false;
  const std::string dir = ElectionPath(opts_.root, g);
  for (int round = 0; round < kMaxStepRounds; ++round) {
    switch (e.phase) {
      case ElectionPhase::kOff:
      case ElectionPhase::kLeading:
      case ElectionPhase::kDeposed:
      case ElectionPhase::kWithdrawn:
        return Status::Ok();
      case ElectionPhase::kAwaitEpoch: {
        struct Stat st;
        const int rc = session_.SyncExistsWatch(EpochPath(opts_.root, g), &st);
        if (rc == ZNONODE) return Status::Ok();  // its creation fires the watch (ElectionWatch)
        if (rc != ZOK) return Status::Unavailable("exists " + EpochPath(opts_.root, g) + ": " + ZkErrorName(rc));
        e.phase = ElectionPhase::kJoin;
        e.refresh = true;
        break;
      }
      case ElectionPhase::kJoin:
        QR_RETURN_IF_ERROR(JoinElection(g, deadline_nanos));
        e.phase = ElectionPhase::kCandidate;
        e.refresh = true;  // who leads now (Leader()), and a watch on the epoch from here on
        break;
      case ElectionPhase::kCandidate: {
        struct String_vector sv = {0, nullptr};
        QR_RETURN_IF_ERROR(SyncRetry("list", dir, deadline_nanos,
                                     [&] { return zoo_get_children(session_.handle(), dir.c_str(), 0, &sv); }, {}));
        std::vector<std::pair<uint64_t, std::string>> line;  // (sequence, name), the order of succession
        for (int32_t i = 0; i < sv.count; ++i) {
          auto seq = ParseElectionSeq(sv.data[i]);
          if (seq) line.emplace_back(*seq, sv.data[i]);
        }
        deallocate_String_vector(&sv);
        std::sort(line.begin(), line.end());
        auto mine = std::find_if(line.begin(), line.end(), [&](const auto& c) { return c.second == e.node; });
        if (mine == line.end()) {
          // Deleted under us (by hand, or our session is ending): get back in line.
          log_->warn("{}group {}: election znode {} is gone; joining again", ident_, g, e.node);
          e.node.clear();
          e.phase = ElectionPhase::kJoin;
          break;
        }
        if (mine == line.begin()) return Promote(g, deadline_nanos);
        // Watch the predecessor only: its deletion wakes this candidate and nobody else.
        const std::string pred = dir + "/" + std::prev(mine)->second;
        struct Stat st;
        const int rc = session_.SyncExistsWatch(pred, &st);
        if (rc == ZOK) return Status::Ok();
        if (rc != ZNONODE) return Status::Unavailable("exists " + pred + ": " + ZkErrorName(rc));
        break;  // gone meanwhile: look at the line again
      }
    }
  }
  e.step = true;  // bounded work per turn; the worker calls again
  return Status::Ok();
}

Status ZkReplicator::Promote(uint32_t g, int64_t deadline_nanos) {
  GroupElection& e = elections_[g];
  const std::string path = EpochPath(opts_.root, g);
  // 1. The epoch: a version-checked set makes the new version this leader's epoch; a race with
  //    another writer of the epoch znode shows as ZBADVERSION and is read again.
  uint64_t epoch = 0;
  for (int attempt = 0; attempt < kMaxBumpAttempts && epoch == 0; ++attempt) {
    std::string data;
    struct Stat st;
    int rc = session_.SyncGetWatch(path, &data, &st);
    if (rc == ZNONODE) {
      // A fresh group: the configured leader creates it (after its election znode, so every
      // follower that joins because it exists is behind it in line).
      rc = zoo_create(session_.handle(), path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return Status::Unavailable("create " + path + ": " + ZkErrorName(rc));
      continue;
    }
    if (rc != ZOK) return Status::Unavailable("read " + path + ": " + ZkErrorName(rc));
    struct Stat after;
    rc = zoo_set2(session_.handle(), path.c_str(), follower_id_.data(), static_cast<int>(follower_id_.size()),
                  st.version, &after);
    if (rc == ZOK) {
      epoch = static_cast<uint64_t>(after.version);
    } else if (rc != ZBADVERSION) {
      return Status::Unavailable("bump " + path + ": " + ZkErrorName(rc));
    }
  }
  if (epoch == 0) return Status::Unavailable("bump " + path + ": lost the version race " +
                                             std::to_string(kMaxBumpAttempts) + " times");
  // 2. Where each stream ends, now that the predecessor can no longer write (its writes check
  //    the old epoch): the scan a restarted leader makes, leftovers fenced off until it writes.
  for (uint32_t p = 0; p < opts_.planners; ++p) {
    QR_RETURN_IF_ERROR(EnsurePath(StreamPath(opts_.root, g, p), deadline_nanos));
    QR_RETURN_IF_ERROR(ScanStream(g, p, deadline_nanos));
    OutStream& s = out_[{g, p}];
    // Promoted while running: its application still receives what the predecessor wrote (at
    // Start, a configured leader's application receives nothing).
    s.reader_until = running_.load(std::memory_order_acquire) && in_.count({g, p}) != 0 ? s.next_id : 0;
  }
  e.phase = ElectionPhase::kLeading;
  e.epoch = epoch;
  counters_.won.fetch_add(1, std::memory_order_relaxed);
  LeaderView v;
  v.known = v.self = true;
  v.id = follower_id_;
  v.term = epoch;
  PublishView(g, v);
  std::string ends;
  for (uint32_t p = 0; p < opts_.planners; ++p) {
    ends += (p == 0 ? "" : ", ") + StreamName(g, p) + " at " + std::to_string(out_[{g, p}].next_id);
  }
  log_->info("{}leads group {} in epoch {} as '{}' (streams resume: {})", ident_, g, epoch, follower_id_, ends);
  return Status::Ok();
}

void ZkReplicator::RefreshView(uint32_t g) {
  GroupElection& e = elections_[g];
  e.refresh = false;
  if (epoch_watch_muted_.load(std::memory_order_acquire)) return;  // test hook: as if never notified
  std::string data;
  struct Stat st;
  const int rc = session_.SyncGetWatch(EpochPath(opts_.root, g), &data, &st);
  if (rc == ZNONODE) {
    PublishView(g, LeaderView{});
    return;
  }
  if (rc != ZOK) {
    e.refresh = true;
    e.retry_nanos = NowNanos() + kRetryNanos;
    return;
  }
  LeaderView v;
  v.known = !data.empty();
  v.id = data;
  v.term = static_cast<uint64_t>(st.version);
  if (e.phase == ElectionPhase::kLeading) {
    if (v.term != e.epoch) {
      Depose(g, "the epoch moved on to " + std::to_string(v.term) + " (leader '" + data + "')", true);
      PublishView(g, v);
      return;
    }
    v.self = true;
  }
  PublishView(g, v);
}

void ZkReplicator::ElectionWatch(const ZkEvent& ev) {
  // Paths: R/g<g>/epoch, R/g<g>/election/<name>.
  const std::string prefix = opts_.root + "/g";
  if (ev.path.compare(0, prefix.size(), prefix) != 0) return;
  unsigned g = 0;
  char rest[160] = {0};
  if (std::sscanf(ev.path.c_str() + prefix.size(), "%u/%159s", &g, rest) != 2 || g >= elections_.size()) return;
  GroupElection& e = elections_[g];
  const std::string what = rest;
  if (what == "epoch") {
    if (e.phase == ElectionPhase::kAwaitEpoch) {
      e.step = true;
    } else if (!epoch_watch_muted_.load(std::memory_order_acquire)) {
      e.refresh = true;
    }
  } else if (what.compare(0, 9, "election/") == 0 && e.phase == ElectionPhase::kCandidate) {
    e.step = true;  // the predecessor is gone: look at the line again
  }
}

void ZkReplicator::Depose(uint32_t g, const std::string& why, bool delete_node) {
  GroupElection& e = elections_[g];
  if (e.phase != ElectionPhase::kLeading) return;
  e.phase = ElectionPhase::kDeposed;
  e.step = e.refresh = false;
  counters_.deposed.fetch_add(1, std::memory_order_relaxed);
  {
    // Before any callback fails: whoever learns of it from a callback sees IsLeader false.
    MutexLock lock(view_mu_);
    if (g < views_.size()) views_[g].self = false;
  }
  const Status st = Status::Unavailable(ident_ + "no longer the leader of group " + std::to_string(g) + " (epoch " +
                                        std::to_string(e.epoch) + "): " + why + "; it stops for good");
  log_->error("{}", st.message());
  for (auto& [key, s] : out_) {
    if (key.first == g && !s.broken) FailStream(key, s, st);
  }
  if (delete_node && !e.node.empty() && connected_) {
    // Best effort, so no successor waits on it until our session ends.
    const std::string path = ElectionPath(opts_.root, g) + "/" + e.node;
    zoo_delete(session_.handle(), path.c_str(), -1);
  }
  e.node.clear();
}

void ZkReplicator::Withdraw(uint32_t g, const std::string& why) {
  if (!opts_.election || g >= elections_.size()) return;
  GroupElection& e = elections_[g];
  if (e.phase != ElectionPhase::kAwaitEpoch && e.phase != ElectionPhase::kJoin &&
      e.phase != ElectionPhase::kCandidate) {
    return;  // a leader that finds itself stranded keeps leading: its application is told by kNotFound
  }
  e.phase = ElectionPhase::kWithdrawn;
  e.step = false;
  if (!e.node.empty() && connected_) {
    const std::string path = ElectionPath(opts_.root, g) + "/" + e.node;
    zoo_delete(session_.handle(), path.c_str(), -1);  // best effort: else it goes with the session
  }
  e.node.clear();
  log_->warn("{}group {}: no longer a candidate for leader: {}", ident_, g, why);
}

void ZkReplicator::CancelGroup(uint32_t g) {
  const Status aborted = Status::Aborted(ident_ + "receive cancelled: CancelReceives(" + std::to_string(g) + ")");
  size_t n = 0;
  for (auto& [key, s] : in_) {
    if (key.first != g) continue;
    std::map<uint64_t, Fetch> cancelled = std::move(s.fetches);
    s.fetches.clear();
    s.suspect_batch = UINT64_MAX;
    for (auto& entry : cancelled) {
      entry.second.cb(entry.second.meta, aborted, {});
      ++n;
    }
  }
  log_->info("{}group {}: {} waiting receives cancelled", ident_, g, n);
}

}  // namespace qrstore::replication::zookeeper
