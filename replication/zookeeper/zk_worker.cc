// ZkReplicator's worker thread ("zk-leader" or "zk-follower"): the loop that takes ZooKeeper
// events from the inbox and queued user requests, the session's state changes (reconnect,
// re-creation after expiry), the timers, and the shutdown that fails what is still pending.
// The role-specific halves are in zk_leader.cc and zk_follower.cc.
#include <algorithm>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "common/clock.h"
#include "common/logging.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator_impl.h"
#include "replication/zookeeper/zk_session.h"

namespace qrstore::replication::zookeeper {

namespace {

constexpr int64_t kIdleWaitNanos = 1'000'000'000;     // nothing pending: wake once a second
constexpr int64_t kBusyTickNanos = 100'000'000;       // deadlines / reconnect checks
constexpr int64_t kStatsIntervalNanos = 10'000'000'000;

}  // namespace

// ------------------------------------------------------------------------------------------
// The worker thread.

void ZkReplicator::Run() {
  std::deque<ZkEvent> events;
  int64_t wake_at = NowNanos();
  while (!stopping_.load(std::memory_order_acquire)) {
    inbox_.WaitAndTake(&events, wake_at);
    if (stopping_.load(std::memory_order_acquire)) break;
    while (!events.empty()) {
      HandleEvent(events.front());
      events.pop_front();
    }
    // Admit queued requests, bounded by max_inflight admitted batches (memory bound; a
    // follower admits none).
    while (admitted_ < static_cast<size_t>(opts_.max_inflight)) {
      std::optional<Request> r = requests_.TryPop();
      if (!r) break;
      if (r->cancel) {
        CancelGroup(r->meta.group);
      } else if (r->replicate) {
        AdmitReplicate(std::move(*r));
      } else {
        AdmitReceive(std::move(*r));
      }
    }
    PumpElection();
    wake_at = OnTimers(NowNanos());
    // A member may lead some groups and read others (and a promoted one still reads the
    // group it leads until CancelReceives): both halves run, each over its own streams.
    PumpLeader();
    PumpFollower();
  }
  Shutdown();
}

void ZkReplicator::Shutdown() {
  if (registered_ && connected_ && session_.is_open()) {
    // Best effort: record the final progress so a restarted follower resumes exactly here.
    std::string bytes = ProgressBytes();
    const std::string path = ConsumerPath(opts_.root, follower_id_);
    zoo_set(session_.handle(), path.c_str(), bytes.data(), static_cast<int>(bytes.size()), -1);
  }
  // Closing the session also removes a follower's ephemeral live znode at once (after the final
  // progress above): the leader stops waiting for it at its next cleanup round.
  session_.Close();  // outstanding completions land in the inbox and are dropped with it
  const Status aborted = Status::Aborted(ident_ + "stopped");
  for (auto& [key, s] : out_) {
    for (auto& b : s.batches) b.cb(b.meta, aborted);
    s.batches.clear();
  }
  for (auto& [key, s] : in_) {
    for (auto& [id, f] : s.fetches) f.cb(f.meta, aborted, {});
    s.fetches.clear();
  }
  while (std::optional<Request> r = requests_.TryPop()) {
    if (r->cancel) continue;
    if (r->replicate) {
      r->replicate_cb(r->meta, aborted);
    } else {
      r->receive_cb(r->meta, aborted, {});
    }
  }
  log_->info("{}stopped: acked {} delivered {} retried {} sessions {} deleted {} inbox high-water {}", ident_,
             counters_.acked.load(std::memory_order_relaxed), counters_.delivered.load(std::memory_order_relaxed),
             counters_.retried.load(std::memory_order_relaxed), counters_.sessions.load(std::memory_order_relaxed),
             counters_.deleted.load(std::memory_order_relaxed), inbox_.high_water());
}

void ZkReplicator::HandleEvent(ZkEvent& ev) {
  switch (ev.kind) {
    case ZkEvent::Kind::kSession:
      HandleSession(ev);
      return;
    case ZkEvent::Kind::kWatch:
      if (ev.generation != session_.generation()) return;
      // R/g<g>/epoch and R/g<g>/election/<name> are the election's; markers the reader's.
      if (opts_.election && (ev.path.find("/election/") != std::string::npos ||
                             (ev.path.size() >= 6 && ev.path.compare(ev.path.size() - 6, 6, "/epoch") == 0))) {
        ElectionWatch(ev);
      } else {
        FollowerWatch(ev);
      }
      return;
    case ZkEvent::Kind::kCompletion:
      // Results of an older session were already written off by Recreate (everything it had
      // in flight is re-issued), so they are dropped; a success among them is found again as
      // ZNODEEXISTS with the same bytes.
      if (ev.op.generation != session_.generation()) return;
      --inflight_;
      QR_CHECK_GE(inflight_, 0);
      QR_CHECK_GE(inflight_bytes_, ev.op.cost);
      inflight_bytes_ -= ev.op.cost;
      if (ev.rc == ZCONNECTIONLOSS || ev.rc == ZOPERATIONTIMEOUT) {
        counters_.losses.fetch_add(1, std::memory_order_relaxed);
      }
      switch (ev.op.type) {
        case OpTag::Type::kCreateChunk:
        case OpTag::Type::kCreateMarker:
        case OpTag::Type::kVerifyChunk:
        case OpTag::Type::kVerifyMarker:
        case OpTag::Type::kSetChunk:
        case OpTag::Type::kDeleteBatch:
        case OpTag::Type::kListConsumers:
        case OpTag::Type::kListLive:
        case OpTag::Type::kGetConsumer:
        case OpTag::Type::kDeleteFence:
          LeaderCompletion(ev);
          return;
        default:
          FollowerCompletion(ev);
          return;
      }
  }
}

void ZkReplicator::HandleSession(const ZkEvent& ev) {
  if (ev.generation != session_.generation()) return;
  if (ev.state == ZOO_CONNECTED_STATE) {
    if (!connected_) log_->info("{}connected to ZooKeeper ({})", ident_, opts_.hosts);
    connected_ = true;
    // Watches survive a reconnect, but a request that failed may not have set its watch.
    for (auto& [key, s] : in_) {
      for (auto& [id, f] : s.fetches) {
        if (f.state == FetchState::kWaitCreated) f.state = FetchState::kStart;
      }
    }
    for (auto& e : elections_) {
      if (e.phase != ElectionPhase::kOff && e.phase != ElectionPhase::kDeposed) e.refresh = true;
    }
  } else if (ev.state == ZOO_EXPIRED_SESSION_STATE || ev.state == ZOO_AUTH_FAILED_STATE) {
    Recreate(ev.state == ZOO_EXPIRED_SESSION_STATE ? "session expired" : "authentication failed");
  } else {
    if (connected_) log_->warn("{}disconnected from ZooKeeper; the client is reconnecting", ident_);
    connected_ = false;
  }
}

void ZkReplicator::Recreate(const char* why) {
  log_->warn("{}{}: creating a new session and re-issuing {} outstanding requests", ident_, why, inflight_);
  // The expired session took this member's election znodes with it: a group it led may have a
  // new leader already, so it stops leading for good (fail-stop; its unacknowledged batches fail
  // with kUnavailable); a candidate joins again at the end of the line.
  for (uint32_t g = 0; g < elections_.size(); ++g) {
    GroupElection& e = elections_[g];
    if (e.phase == ElectionPhase::kLeading) {
      Depose(g, std::string(why) + ": its election znode went with the session", false);
    } else if (e.phase == ElectionPhase::kJoin || e.phase == ElectionPhase::kCandidate) {
      e.phase = ElectionPhase::kJoin;
      e.node.clear();
      e.step = true;
    } else if (e.phase == ElectionPhase::kAwaitEpoch) {
      e.step = true;  // its exists-watch went with the session
    }
  }
  // Their results are lost with the old session (its late completions are dropped by
  // generation): count them as connection losses like the ones that come back as ZCONNECTIONLOSS.
  counters_.losses.fetch_add(static_cast<uint64_t>(inflight_), std::memory_order_relaxed);
  session_.Close();
  inflight_ = 0;
  inflight_bytes_ = 0;
  connected_ = false;
  for (auto& [key, s] : out_) {
    s.fence_inflight = 0;
    for (auto& b : s.batches) {
      for (size_t k = 1; k < b.chunks.size(); ++k) {
        if (b.chunks[k] == PartState::kInFlight) b.chunks[k] = PartState::kNeed;
      }
      if (b.marker == MarkerState::kInFlight) {
        b.marker = MarkerState::kReady;
        ++b.marker_attempt;
      }
    }
  }
  cleanup_inflight_ = false;
  cleanup_pending_ = 0;
  for (auto& [key, s] : in_) {
    for (auto& [id, f] : s.fetches) {
      if (f.state != FetchState::kReady) RestartFetch(f, 0);
    }
  }
  progress_inflight_ = false;
  progress_dirty_ = registered_;
  // The expired session took the follower's ephemeral live znode with it: the leader no longer
  // counts it as live until the new session has created it again (PumpLive).
  live_needed_ = registered_;
  live_inflight_ = false;
  next_live_nanos_ = 0;
  Status st = session_.Open(opts_.hosts, opts_.session_timeout_ms);
  reopen_pending_ = !st.ok();
  if (st.ok()) {
    counters_.sessions.fetch_add(1, std::memory_order_relaxed);
  } else {
    log_->error("{}{}", ident_, st.ToString());
  }
}

void ZkReplicator::NoteRetry(int rc) {
  (void)rc;
  counters_.retried.fetch_add(1, std::memory_order_relaxed);
  // Wait for the session to report CONNECTED (or the next timer check) before re-issuing, so
  // a dead connection does not turn into a tight retry loop.
  connected_ = false;
}

int64_t ZkReplicator::OnTimers(int64_t now) {
  if (reopen_pending_) {
    Status st = session_.Open(opts_.hosts, opts_.session_timeout_ms);
    reopen_pending_ = !st.ok();
    if (st.ok()) counters_.sessions.fetch_add(1, std::memory_order_relaxed);
  }
  if (!connected_ && session_.is_open() && zoo_state(session_.handle()) == ZOO_CONNECTED_STATE) connected_ = true;
  int64_t wake = now + kIdleWaitNanos;
  bool busy = !connected_ || reopen_pending_;
  if (now >= next_stats_nanos_) {
    // A periodic stats line instead of per-batch logging; silent while nothing happens.
    next_stats_nanos_ = now + kStatsIntervalNanos;
    ZkStats st = stats();
    uint64_t activity = st.batches_acked + st.batches_delivered + st.requests_retried + st.sessions_created;
    if (!in_.empty()) {
      WarnStalledFetches(st.batches_delivered != delivered_at_last_stats_);
      delivered_at_last_stats_ = st.batches_delivered;
    }
    if (activity != last_stats_activity_ || HeldBack()) {
      last_stats_activity_ = activity;
      log_->info("{}stats: acked {} delivered {} retried {} losses {} sessions {} deleted {} evicted {} "
                 "kept_bytes {}{}",
                 ident_, st.batches_acked, st.batches_delivered, st.requests_retried, st.connection_losses,
                 st.sessions_created, st.batches_deleted, st.batches_evicted, retained_bytes_,
                 HeldBack() ? " held back: " + HeldBackReason() : std::string());
    }
  }
  for (const auto& e : elections_) {
    if (e.step) {
      busy = true;
      wake = std::min(wake, std::max(e.retry_nanos, now + 1'000'000));
    }
  }
  {
    for (auto& [key, s] : out_) {
      if (!s.batches.empty()) {
        busy = true;
        if (now > s.batches.front().deadline_nanos) {
          FailStream(key, s,
                     Status::Unavailable(ident_ + "batch " + std::to_string(s.batches.front().meta.batch_id) +
                                         " of stream " + StreamName(key.first, key.second) + " not durable after " +
                                         std::to_string(opts_.op_deadline_ms) + " ms" +
                                         (HeldBack() ? " (held back: " + HeldBackReason() + ")"
                                                     : " (ZooKeeper " + opts_.hosts + " unreachable?)")));
        }
      }
    }
    if ((opts_.followers > 0 || opts_.retain_bytes > 0) && AnyLeading()) {
      if (now >= next_cleanup_nanos_ && connected_ && !cleanup_inflight_) {
        next_cleanup_nanos_ = now + static_cast<int64_t>(opts_.cleanup_interval_ms) * 1'000'000;
        StartCleanup();
      }
      wake = std::min(wake, std::max(next_cleanup_nanos_, now + 1'000'000));
    }
  }
  {
    bool waiting = false;
    for (auto& [key, s] : in_) {
      for (auto& [id, f] : s.fetches) {
        if (f.state == FetchState::kWaitCreated) waiting = true;
        if (f.not_before_nanos > now) wake = std::min(wake, f.not_before_nanos);
      }
    }
    if (waiting && now >= next_poll_nanos_ && connected_) {
      next_poll_nanos_ = now + static_cast<int64_t>(opts_.poll_ms) * 1'000'000;
      for (auto& [key, s] : in_) {
        // Only the stream's first awaited batch: later ones have their own watches, and
        // re-reading all of a long window every poll would be wasted load on ZooKeeper.
        for (auto& [id, f] : s.fetches) {
          if (f.state != FetchState::kWaitCreated) continue;
          f.state = FetchState::kStart;  // re-check: a watch may have been lost
          // Was the awaited batch deleted (retain_bytes, or a follower restarted far behind)?
          // Then it never comes back: list the stream to find out.
          OpTag t = OpTag::Make(OpTag::Type::kListStream, key.first, key.second, id, 0);
          session_.Children(StreamPath(opts_.root, key.first, key.second), t);
          ++inflight_;
          break;
        }
      }
    }
    // Disconnected, the poll and the progress write wait for the session (or the next busy tick):
    // a deadline already past would make the worker spin, burning CPU for as long as its
    // ZooKeeper is down.
    if (waiting) wake = std::min(wake, connected_ ? next_poll_nanos_ : now + kBusyTickNanos);
    if (progress_dirty_) {
      wake = std::min(wake, connected_ ? std::max(next_progress_nanos_, now + 1'000'000) : now + kBusyTickNanos);
    }
    if (live_needed_ && !live_inflight_) {
      wake = std::min(wake, connected_ ? std::max(next_live_nanos_, now + 1'000'000) : now + kBusyTickNanos);
    }
  }
  if (busy) wake = std::min(wake, now + kBusyTickNanos);
  return wake;
}

}  // namespace qrstore::replication::zookeeper
