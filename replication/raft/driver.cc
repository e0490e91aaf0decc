#include "replication/raft/driver.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"

namespace qrstore::replication::raft {

Driver::Driver(DriverOptions options, std::vector<std::unique_ptr<LogStorage>> storages,
               std::unique_ptr<Transport> transport, DriverListener* listener)
    : options_(std::move(options)),
      storages_(std::move(storages)),
      transport_(std::move(transport)),
      listener_(listener) {
  QR_CHECK_EQ(storages_.size(), options_.groups);
  QR_CHECK(transport_ != nullptr && listener_ != nullptr);
  NodeId top = options_.node_id;
  for (NodeId m : options_.members) top = std::max(top, m);
  heard_ms_.assign(static_cast<size_t>(top) + 1, 0);
}

Driver::~Driver() { Stop(); }

Status Driver::Start() {
  QR_CHECK(!started_, "raft driver started twice");
  started_ = true;
  logs_.resize(options_.groups);
  for (uint32_t g = 0; g < options_.groups; ++g) {
    PersistentState restored = storages_[g]->Recovered();
    GroupLog& log = logs_[g];
    log.durable = storages_[g]->last_index();
    log.durable_vote = {restored.hard.term, restored.hard.voted_for};
    for (const Entry& e : restored.entries) {
      log.sizes.emplace_back(e.index, e.data.size());
      log.bytes += e.data.size();
    }
    CoreOptions co;
    co.group = g;
    co.id = options_.node_id;
    co.members = options_.members;
    co.election_ticks = options_.election_ticks;
    co.heartbeat_ticks = options_.heartbeat_ticks;
    // Distinct, reproducible election timers per (seed, member, group).
    co.seed = Mix64(options_.seed ^ Mix64((static_cast<uint64_t>(options_.node_id) << 32) | g));
    co.max_append_bytes = options_.max_append_bytes;
    co.max_inflight_appends = options_.max_inflight_appends;
    co.max_uncommitted_bytes = options_.max_uncommitted_bytes;
    co.max_apply_bytes = options_.max_apply_bytes;
    co.preferred_leader = options_.preferred_leader;
    co.check_quorum = options_.check_quorum;
    co.pre_vote = options_.pre_vote;
    co.vote_after_catch_up = options_.vote_after_catch_up;
    co.applied = 0;  // the application is in memory: re-deliver every committed entry we hold
    if (!restored.entries.empty() || restored.hard.term > 0) {
      Logger("raft")->info("[{} g{}] restored term {} vote {} commit {} log [{}, {}]", options_.identity, g,
                           restored.hard.term, static_cast<int64_t>(restored.hard.voted_for == kNoNode ? -1 : restored.hard.voted_for),
                           restored.hard.commit, restored.first_index,
                           restored.first_index + restored.entries.size() - 1);
    }
    cores_.push_back(std::make_unique<Core>(std::move(co), std::move(restored)));
  }
  QR_RETURN_IF_ERROR(transport_->Start([this](Message&& m) { OnPeerMessage(std::move(m)); }));
  {
    MutexLock lock(mu_);
    running_ = true;
  }
  last_stats_ms_ = NowMillis();
  thread_ = NamedThread("raft", [this] { Run(); });
  return Status::Ok();
}

void Driver::Stop() {
  if (!started_ || stopped_) {
    stopped_ = true;
    return;
  }
  stopped_ = true;
  {
    MutexLock lock(mu_);
    stop_ = true;
    running_ = false;
  }
  wake_.notify_all();
  not_full_.notify_all();
  thread_.Join();
  transport_->Stop();  // after the raft thread: it was the only sender
  std::deque<DriverTask> control, propose;
  {
    MutexLock lock(mu_);
    control.swap(control_in_);
    propose.swap(propose_in_);
    net_in_.clear();
  }
  const Status aborted = Status::Aborted("raft driver stopped");
  for (auto& t : deferred_) t(aborted);
  deferred_.clear();
  for (auto& t : control) t(aborted);
  for (auto& t : propose) t(aborted);
}

void Driver::Submit(Lane lane, DriverTask task) {
  MutexUniqueLock lock(mu_);
  auto& q = lane == Lane::kControl ? control_in_ : propose_in_;
  not_full_.wait(lock.native(), [&]() REQUIRES(mu_) { return stop_ || !running_ || q.size() < options_.task_queue; });
  if (stop_ || !running_) {
    const Status st = health_.ok() ? Status::Aborted("raft driver not running") : health_;
    lock.Unlock();
    task(Status::Aborted(st.message()));
    return;
  }
  q.push_back(std::move(task));
  lock.Unlock();
  wake_.notify_one();
}

Status Driver::health() const {
  MutexLock lock(mu_);
  return health_;
}

void Driver::OnPeerMessage(Message&& m) {
  if (isolated_.load(std::memory_order_relaxed)) {
    counters_.messages_isolated.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  {
    MutexLock lock(mu_);
    if (stop_ || net_in_.size() >= options_.inbox_messages) {
      counters_.messages_in_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    net_in_.push_back(std::move(m));
  }
  wake_.notify_one();
}

void Driver::SetApplyPaused(uint32_t group, bool paused) {
  if (logs_[group].apply_paused == paused) return;
  logs_[group].apply_paused = paused;
  cores_[group]->SetApplyPaused(paused);
}

void Driver::Fail(const Status& st) {
  Logger("raft")->error("[{}] raft driver stopping after a storage failure: {}", options_.identity, st.ToString());
  std::deque<DriverTask> control, propose;
  {
    MutexLock lock(mu_);
    health_ = st;
    stop_ = true;
    control.swap(control_in_);
    propose.swap(propose_in_);
  }
  not_full_.notify_all();
  const Status aborted = Status::Aborted("raft driver failed: " + st.ToString());
  for (auto& t : deferred_) t(aborted);
  deferred_.clear();
  for (auto& t : control) t(aborted);
  for (auto& t : propose) t(aborted);
  listener_->OnFailed(st);
}

namespace {
// Adds `ns` to *total and raises *max (optional) to it: the raft thread is the only writer.
void NoteTime(std::atomic<uint64_t>* total, std::atomic<uint64_t>* max, int64_t ns) {
  const uint64_t v = ns > 0 ? static_cast<uint64_t>(ns) : 0;
  total->fetch_add(v, std::memory_order_relaxed);
  if (max != nullptr && v > max->load(std::memory_order_relaxed)) max->store(v, std::memory_order_relaxed);
}
}  // namespace

void Driver::Run() {
  using Clock = std::chrono::steady_clock;
  int64_t next_tick = NowMillis() + options_.tick_ms;
  std::deque<Message> msgs;
  std::deque<DriverTask> controls;
  for (;;) {
    bool has_ready = false;
    for (const auto& c : cores_) has_ready = has_ready || c->HasReady();
    bool took_tasks = false;
    {
      MutexUniqueLock lock(mu_);
      auto has_work = [&]() REQUIRES(mu_) {
        return stop_ || !net_in_.empty() || !control_in_.empty() || (deferred_.empty() && !propose_in_.empty());
      };
      if (!has_ready && !has_work()) {
        // Idle: block until work arrives or the next tick is due (never spins).
        wake_.wait_until(lock.native(), Clock::time_point(std::chrono::milliseconds(next_tick)), has_work);
      }
      if (stop_) break;
      msgs.swap(net_in_);
      if (!control_in_.empty()) {
        controls.swap(control_in_);
        took_tasks = true;
      }
      // While a proposal waits for room in the core, take no new ones (they queue behind it,
      // keeping each stream's order).
      if (deferred_.empty() && !propose_in_.empty()) {
        deferred_.swap(propose_in_);
        took_tasks = true;
      }
    }
    if (took_tasks) not_full_.notify_all();
    counters_.iterations.fetch_add(1, std::memory_order_relaxed);
    const int64_t iteration_start = NowMillis();

    const size_t msgs_count = msgs.size();
    for (Message& m : msgs) {
      if (m.group >= cores_.size()) continue;  // the core would ignore it too; avoid the index
      GroupLog& log = logs_[m.group];
      if (m.type == MessageType::kAppendRequest && !m.entries.empty() && log.apply_paused &&
          log.bytes > options_.max_log_bytes) {
        // The application is not consuming and the log is at its budget: refuse the new
        // entries (the leader retries them) but step the rest: an append without entries still
        // resets our election timer, carries the commit, and is answered, so the leader keeps
        // counting us as live and its flow control waits for us instead of leaving us behind.
        counters_.appends_dropped_paused.fetch_add(1, std::memory_order_relaxed);
        m.entries.clear();
      }
      if (m.from < heard_ms_.size()) heard_ms_[m.from] = iteration_start;
      cores_[m.group]->Step(m);
    }
    msgs.clear();
    for (DriverTask& t : controls) t(Status::Ok());
    controls.clear();
    while (!deferred_.empty()) {
      if (!deferred_.front()(Status::Ok())) {
        counters_.proposals_deferred.fetch_add(1, std::memory_order_relaxed);
        break;
      }
      deferred_.pop_front();
    }

    ConsiderSnapshotOffers();

    const int64_t now = NowMillis();
    if (now >= next_tick) {
      if (!options_.isolate_file.empty()) {
        struct stat sb {};
        const bool cut = ::stat(options_.isolate_file.c_str(), &sb) == 0;
        if (cut != isolated_.load(std::memory_order_relaxed)) {
          isolated_.store(cut, std::memory_order_relaxed);
          Logger("raft")->warn("[{}] test hook: {} every peer ({} {})", options_.identity,
                               cut ? "cut off from" : "reconnected to", options_.isolate_file,
                               cut ? "exists" : "is gone");
        }
      }
      if (last_tick_ms_ > 0) {
        const int64_t gap = now - last_tick_ms_;
        if (gap >= max_tick_gap_ms_ || now - max_tick_gap_at_ms_ > 3000) {
          max_tick_gap_ms_ = gap;
          max_tick_gap_at_ms_ = now;
        }
      }
      last_tick_ms_ = now;
      // Far behind (overload, a slow sync, debugger): a follower's clock just runs slower (it
      // campaigns later: safe), but a leader gets the ticks it missed, up to a heartbeat
      // interval's (so at most one heartbeat round per iteration): its heartbeats keep to the
      // wall clock its followers time it by. Without them, ticks coming k times late would space
      // its heartbeats k times wider while the followers' election timers run on time.
      const int64_t missed =
          std::min<int64_t>((now - next_tick) / options_.tick_ms, std::max(options_.heartbeat_ticks - 1, 0));
      for (auto& c : cores_) {
        c->Tick();
        for (int64_t k = 0; k < missed && c->role() == Role::kLeader; ++k) c->Tick();
      }
      listener_->OnTick();
      NoteStranded();
      next_tick += options_.tick_ms;
      if (next_tick <= now) next_tick = now + options_.tick_ms;
    }

    if (!ProcessReadies()) break;
    NoteRoleChanges();
    CompactLogs();
    // A slow iteration delays heartbeats: say so (it is the first thing to look at when
    // followers start elections under load).
    const int64_t took_ms = NowMillis() - iteration_start;
    if (took_ms >= max_iteration_ms_ || iteration_start - max_iteration_at_ms_ > 3000) {
      max_iteration_ms_ = took_ms;
      max_iteration_at_ms_ = iteration_start;
    }
    if (took_ms * 2 > static_cast<int64_t>(options_.tick_ms) * options_.election_ticks) {
      Logger("raft")->warn("[{}] raft loop iteration took {} ms ({} messages, election timeout {} ms)",
                           options_.identity, took_ms, msgs_count, options_.tick_ms * options_.election_ticks);
    }
    if (options_.stats_interval_ms > 0 && now - last_stats_ms_ >= options_.stats_interval_ms) {
      last_stats_ms_ = now;
      LogStats();
    }
  }
}

bool Driver::ProcessReadies() {
  std::vector<Ready> readies(cores_.size());
  std::vector<bool> has(cores_.size(), false);
  std::vector<bool> to_sync(cores_.size(), false);
  auto sync = [&](uint32_t g) -> Status {
    const int64_t t0 = NowNanos();
    Status st = storages_[g]->Sync();
    NoteTime(&counters_.sync_ns, &counters_.sync_max_ns, NowNanos() - t0);
    counters_.syncs.fetch_add(1, std::memory_order_relaxed);
    return st;
  };
  // A storage write, timed.
  auto timed = [&](auto&& write) {
    const int64_t t0 = NowNanos();
    Status st = write();
    NoteTime(&counters_.write_ns, nullptr, NowNanos() - t0);
    return st;
  };
  // 1. persist
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    if (!cores_[g]->HasReady()) continue;
    has[g] = true;
    readies[g] = cores_[g]->TakeReady();
    counters_.readies.fetch_add(1, std::memory_order_relaxed);
    Ready& r = readies[g];
    LogStorage& storage = *storages_[g];
    DeliverDurableCommits(g, r);
    // Each write is synced at once with fsync=always, else once per storage below.
    auto wrote = [&](Status st) {
      if (st.ok() && options_.fsync == FsyncPolicy::kAlways) st = sync(g);
      if (!st.ok()) {
        Fail(st);
        return false;
      }
      to_sync[g] = true;
      return true;
    };
    if (r.snapshot) {
      // First: the stored log is dropped and continues after the snapshot point.
      if (!wrote(timed([&] { return storage.ResetTo(r.snapshot->index, r.snapshot->term); }))) return false;
      GroupLog& log = logs_[g];
      log.sizes.clear();
      log.bytes = 0;
      Logger("raft")->info("[{} g{}] installed a snapshot: the log continues after index {} (term {})",
                           options_.identity, g, r.snapshot->index, r.snapshot->term);
    }
    if (r.hard_state && !wrote(timed([&] { return storage.SaveHardState(*r.hard_state); }))) return false;
    if (!r.entries.empty()) {
      if (!wrote(timed([&] { return storage.Append(r.entries); }))) return false;
      GroupLog& log = logs_[g];
      const Index first = r.entries.front().index;
      while (!log.sizes.empty() && log.sizes.back().first >= first) {
        log.bytes -= log.sizes.back().second;
        log.sizes.pop_back();
      }
      for (const Entry& e : r.entries) {
        log.sizes.emplace_back(e.index, e.data.size());
        log.bytes += e.data.size();
      }
      listener_->OnPersisted(g, r.entries);
    }
    if (options_.fsync != FsyncPolicy::kBatch) NoteDurable(g, r);
  }
  auto send = [&](uint32_t g) {
    if (isolated_.load(std::memory_order_relaxed)) {
      counters_.messages_isolated.fetch_add(readies[g].messages.size(), std::memory_order_relaxed);
    } else {
      for (Message& m : readies[g].messages) transport_->Send(std::move(m));
    }
    readies[g].messages.clear();
  };
  // A leader's appends go out before its own sync (Raft thesis 10.2.1: the leader writes its
  // log in parallel with replicating it): they promise nothing about the leader's disk, and the
  // core counts the leader's own copy toward a commit only once it is durable (Core::Advance,
  // after the sync below; the followers' answers are stepped in a later iteration, after it).
  // So a batch's commit waits for max(leader's fsync, a follower's write + fsync + round trip),
  // not their sum. Only when the ready is nothing but appends and brings no new term or vote
  // (a term or vote must be durable before any message of it leaves) and no snapshot.
  if (options_.fsync == FsyncPolicy::kBatch) {
    for (uint32_t g = 0; g < cores_.size(); ++g) {
      if (!has[g] || !to_sync[g] || readies[g].messages.empty() || readies[g].snapshot) continue;
      const std::optional<HardState>& hs = readies[g].hard_state;
      if (hs && logs_[g].durable_vote != std::make_pair(hs->term, hs->voted_for)) continue;
      bool appends_only = true;
      for (const Message& m : readies[g].messages) appends_only = appends_only && m.type == MessageType::kAppendRequest;
      if (!appends_only) continue;
      counters_.appends_before_sync.fetch_add(readies[g].messages.size(), std::memory_order_relaxed);
      send(g);
    }
  }
  // Group commit: one sync per storage for everything this iteration wrote.
  if (options_.fsync == FsyncPolicy::kBatch) {
    for (uint32_t g = 0; g < cores_.size(); ++g) {
      if (!to_sync[g]) continue;
      Status st = sync(g);
      if (!st.ok()) {
        Fail(st);
        return false;
      }
      NoteDurable(g, readies[g]);
    }
  }
  // 2. send (only now: the messages may promise what was just persisted). The term and vote
  // are durable now (whatever the policy: kNever promises nothing anyway).
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    if (!has[g]) continue;
    if (const std::optional<HardState>& hs = readies[g].hard_state) logs_[g].durable_vote = {hs->term, hs->voted_for};
    send(g);
  }
  // 3. deliver, 4. advance
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    if (!has[g]) continue;
    if (!readies[g].committed.empty()) {
      counters_.committed_after_sync.fetch_add(readies[g].committed.size(), std::memory_order_relaxed);
      listener_->OnCommitted(g, readies[g].committed);
    }
    cores_[g]->Advance();
  }
  return true;
}

void Driver::DeliverDurableCommits(uint32_t g, Ready& r) {
  if (r.committed.empty()) return;
  // What this storage holds durably and this Ready leaves in place: a snapshot drops the whole
  // stored log, and entries from index i replace the stored ones from i (a follower taking a
  // new leader's suffix), so a committed entry at such an index is durable only once this
  // Ready's own write is synced.
  Index durable = logs_[g].durable;
  if (r.snapshot) durable = 0;
  if (!r.entries.empty()) durable = std::min(durable, r.entries.front().index - 1);
  size_t n = 0;
  while (n < r.committed.size() && r.committed[n].index <= durable) ++n;
  if (n == 0) return;
  // These commits need nothing from this iteration's write and sync: hand them over now, so
  // the application (a leader acknowledging its clients) does not wait for an fsync of
  // entries that have nothing to do with them.
  std::vector<Entry> early;
  if (n == r.committed.size()) {
    early.swap(r.committed);
  } else {
    early.assign(std::make_move_iterator(r.committed.begin()), std::make_move_iterator(r.committed.begin() + n));
    r.committed.erase(r.committed.begin(), r.committed.begin() + n);
  }
  counters_.committed_early.fetch_add(early.size(), std::memory_order_relaxed);
  listener_->OnCommitted(g, early);
}

void Driver::NoteDurable(uint32_t g, const Ready& r) {
  if (!r.entries.empty()) {
    logs_[g].durable = r.entries.back().index;
  } else if (r.snapshot) {
    logs_[g].durable = r.snapshot->index;
  }
}

void Driver::NoteRoleChanges() {
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    const Core& c = *cores_[g];
    GroupLog& log = logs_[g];
    if (c.caught_up() != log.caught_up) {
      log.caught_up = c.caught_up();
      if (log.caught_up) {
        Logger("raft")->info("[{} g{}] caught up with the leader's commit: votes and may campaign again",
                             options_.identity, g);
      } else {
        Logger("raft")->warn("[{} g{}] restarted without its log (replication.raft.vote_after_catch_up): neither "
                             "votes nor campaigns until a leader has caught it up", options_.identity, g);
      }
    }
    if (c.role() == log.role && c.term() == log.term && c.leader() == log.leader) continue;
    if (c.role() != log.role || c.leader() != log.leader) {
      // A member that lost its leader (its election timer fired, or a leader that stepped down)
      // says how long it heard nothing from each peer.
      const bool lost = c.leader() == kNoNode && log.leader != kNoNode;
      Logger("raft")->info("[{} g{}] {} term {} leader {}{}", options_.identity, g, RoleName(c.role()), c.term(),
                           c.leader() == kNoNode ? std::string("none") : "n" + std::to_string(c.leader()),
                           lost ? " (silent: " + SilenceReport(NowMillis()) + ")" : std::string());
    }
    log.role = c.role();
    log.term = c.term();
    log.leader = c.leader();
    listener_->OnRoleChanged(g, log.role, log.term, log.leader);
  }
}

std::string Driver::SilenceReport(int64_t now_ms) const {
  std::string out;
  for (NodeId m : options_.members) {
    if (m == options_.node_id) continue;
    const int64_t heard = m < heard_ms_.size() ? heard_ms_[m] : 0;
    out += (out.empty() ? "n" : ", n") + std::to_string(m) + " " +
           (heard == 0 ? std::string("never heard") : std::to_string(now_ms - heard) + " ms");
  }
  return out + "; ticks at most " + std::to_string(max_tick_gap_ms_) + " ms apart, iterations at most " +
         std::to_string(max_iteration_ms_) + " ms";
}

void Driver::CompactLogs() {
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    GroupLog& log = logs_[g];
    if (log.bytes <= options_.max_log_bytes) continue;  // keep history up to the budget
    Core& c = *cores_[g];
    if (c.role() == Role::kLeader && c.snapshot_tag() > 0 && log.bytes <= 2 * options_.max_log_bytes) {
      // A stranded member that answers is working toward the current offer (fetching a
      // checkpoint, restarting): moving the log start now could make that offer stale.
      bool recovering = false;
      for (const MemberProgress& m : c.member_progress()) recovering = recovering || (m.stranded && m.live);
      if (recovering) continue;
    }
    const Index applied = c.applied_index();
    Index upto = 0;
    uint64_t bytes = log.bytes;
    for (const auto& [index, size] : log.sizes) {
      if (bytes <= options_.max_log_bytes || index > applied || index >= c.last_index() ||
          index > log.compact_ceiling) {
        break;
      }
      upto = index;
      bytes -= size;
    }
    if (upto < c.first_index()) continue;
    c.Compact(upto);
    while (!log.sizes.empty() && log.sizes.front().first <= upto) {
      log.bytes -= log.sizes.front().second;
      log.sizes.pop_front();
    }
    const int64_t t0 = NowNanos();
    Status st = storages_[g]->Compact(upto);
    NoteTime(&counters_.compact_ns, &counters_.compact_max_ns, NowNanos() - t0);
    if (!st.ok()) {
      Fail(st);
      return;
    }
    listener_->OnCompacted(g, c.first_index());
  }
}

namespace {
// The leader's view of `members` (in member order).
std::vector<MemberProgress> StrandedPositions(const Core& c, const std::vector<NodeId>& members) {
  std::vector<MemberProgress> out;
  for (const MemberProgress& m : c.member_progress()) {
    if (std::find(members.begin(), members.end(), m.id) != members.end()) out.push_back(m);
  }
  return out;
}
}  // namespace

void Driver::NoteStranded() {
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    GroupLog& log = logs_[g];
    const Core& c = *cores_[g];
    std::vector<NodeId> now = c.lagging_members();  // empty unless leading
    if (now == log.stranded) {
      // Same members; keep the listener's view of where the log starts current (quietly).
      if (!now.empty() && c.first_index() != log.stranded_log_start) {
        log.stranded_log_start = c.first_index();
        listener_->OnStrandedChanged(g, StrandedPositions(c, log.stranded), c.first_index());
      }
      continue;
    }
    if (!now.empty()) {
      std::string ids;
      for (NodeId m : now) ids += (ids.empty() ? "" : ", ") + std::to_string(m);
      Logger("raft")->warn("[{} g{}] member(s) {} cannot be caught up from the log: the entries they need were "
                           "compacted away (the log starts at index {}, replication.raft.max_log_bytes {}); {}",
                           options_.identity, g, ids, c.first_index(), options_.max_log_bytes,
                           c.snapshot_tag() > 0 ? "they are offered to continue from a checkpoint"
                                                : "there is no checkpoint to continue them from: their lag only grows");
    } else {
      Logger("raft")->info("[{} g{}] no stranded member any more", options_.identity, g);
    }
    log.stranded = std::move(now);
    log.stranded_log_start = c.first_index();
    listener_->OnStrandedChanged(g, StrandedPositions(c, log.stranded), c.first_index());
  }
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    GroupLog& log = logs_[g];
    const Core& c = *cores_[g];
    const Index start = c.role() == Role::kFollower ? c.stranded_log_start() : 0;
    if (start == log.self_stranded) continue;
    // The leader's log start moves with every compaction: say so once, when this member
    // becomes stranded or stops being stranded, and keep the listener's view current.
    const bool changed = (start > 0) != (log.self_stranded > 0);
    log.self_stranded = start;
    listener_->OnSelfStrandedChanged(g, c.leader(), start, c.last_index());
    if (!changed) continue;
    if (start > 0) {
      Logger("raft")->warn("[{} g{}] stranded: the leader (member {}) can no longer catch this member up from its "
                           "log: it starts at index {}, this member's ends at {} (it was away while the leader's log "
                           "passed replication.raft.max_log_bytes); the group goes on without it until it continues "
                           "from a checkpoint",
                           options_.identity, g, c.leader(), start, c.last_index());
    } else {
      Logger("raft")->info("[{} g{}] no longer stranded", options_.identity, g);
    }
  }
}

void Driver::ConsiderSnapshotOffers() {
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    Core& c = *cores_[g];
    GroupLog& log = logs_[g];
    const std::optional<SnapshotOffer>& offer = c.snapshot_offer();
    if (!offer) {
      if (log.offer_reported) {
        log.offer_reported = false;
        listener_->OnSnapshotOffer(g, nullptr);
      }
      continue;
    }
    log.offer_reported = true;
    if (listener_->OnSnapshotOffer(g, &*offer)) c.InstallSnapshot();
  }
}

void Driver::LogStats() {
  for (uint32_t g = 0; g < cores_.size(); ++g) {
    const Core& c = *cores_[g];
    Logger("raft")->info("[{} g{}] {} term {} commit {} applied {} log [{}, {}] {} bytes{}", options_.identity, g,
                         RoleName(c.role()), c.term(), c.commit_index(), c.applied_index(), c.first_index(),
                         c.last_index(), logs_[g].bytes, logs_[g].apply_paused ? " (apply paused)" : "");
  }
  auto ms = [](const std::atomic<uint64_t>& ns) { return static_cast<double>(ns.load(std::memory_order_relaxed)) / 1e6; };
  Logger("raft")->info("[{}] raft driver: {} iterations, {} readies, {} syncs ({} appends sent before one), {} "
                       "inbound dropped, {} appends dropped while paused; log storage time: writes {:.1f} ms, "
                       "syncs {:.1f} ms (max {:.1f}), compactions {:.1f} ms (max {:.1f}); committed entries "
                       "handed over before the iteration's sync {}, after it {}",
                       options_.identity, counters_.iterations.load(std::memory_order_relaxed),
                       counters_.readies.load(std::memory_order_relaxed),
                       counters_.syncs.load(std::memory_order_relaxed),
                       counters_.appends_before_sync.load(std::memory_order_relaxed),
                       counters_.messages_in_dropped.load(std::memory_order_relaxed),
                       counters_.appends_dropped_paused.load(std::memory_order_relaxed), ms(counters_.write_ns),
                       ms(counters_.sync_ns), ms(counters_.sync_max_ns), ms(counters_.compact_ns),
                       ms(counters_.compact_max_ns), counters_.committed_early.load(std::memory_order_relaxed),
                       counters_.committed_after_sync.load(std::memory_order_relaxed));
}

}  // namespace qrstore::replication::raft
