// ZkReplicator, follower (reader) side: its progress read at Start, its ephemeral live znode,
// admitting ReceiveData requests, fetching markers (with exists-watches) and chunks, checking
// and delivering batches in batch-id order, and the progress writes the leader's cleanup relies
// on.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator_impl.h"
#include "replication/zookeeper/zk_session.h"

namespace qrstore::replication::zookeeper {

namespace {

constexpr size_t kMaxRequestsPerStream = 4096;
constexpr int kMaxCorruptRetries = 3;
constexpr int64_t kStaleBackoffNanos = 50'000'000;    // refetch of a stale marker
constexpr int64_t kLiveBackoffNanos = 200'000'000;    // live znode: retry after a failure
constexpr int kLiveSyncAttempts = 3;                  // Start: replace an earlier session's znode

}  // namespace

// ------------------------------------------------------------------------------------------
// Start-up: the progress this follower recorded last time.

Status ZkReplicator::LoadProgress(int64_t deadline_nanos) {
  const std::string path = ConsumerPath(opts_.root, follower_id_);
  std::string buf(1 << 20, '\0');
  int len = 0;
  int rc = ZOK;
  struct Stat stat;
  QR_RETURN_IF_ERROR(SyncRetry(
      "read", path, deadline_nanos,
      [&] {
        len = static_cast<int>(buf.size());
        return zoo_get(session_.handle(), path.c_str(), 0, buf.data(), &len, &stat);
      },
      {ZNONODE}, &rc));
  if (rc == ZNONODE) {
    std::string empty = EncodeProgress({});
    return SyncRetry(
        "create", path, deadline_nanos,
        [&] {
          return zoo_create(session_.handle(), path.c_str(), empty.data(), static_cast<int>(empty.size()),
                            &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
        },
        {ZNODEEXISTS});
  }
  std::vector<StreamProgress> progress;
  Status s = DecodeProgress(std::string_view(buf.data(), static_cast<size_t>(std::max(len, 0))), &progress);
  if (!s.ok()) return Status::Corruption(ident_ + path + ": " + s.message());
  for (const auto& p : progress) {
    if (p.group >= opts_.groups || p.planner >= opts_.planners) continue;
    in_[{p.group, p.planner}].next_needed = p.next_batch_id;
    PublishNext({p.group, p.planner}, p.next_batch_id);
  }
  log_->info("{}resuming follower '{}' from its progress ({} streams)", ident_, follower_id_, progress.size());
  return Status::Ok();
}

// The ephemeral R/live/<follower_id>, created after the progress znode (so a live follower is
// always registered): the leader waits only for live followers, and ZooKeeper removes the znode
// when this session ends, at once on Stop, after session_timeout_ms if the process died.
Status ZkReplicator::CreateLiveSync(int64_t deadline_nanos) {
  const std::string path = LiveMemberPath(opts_.root, follower_id_);
  for (int attempt = 0; attempt < kLiveSyncAttempts; ++attempt) {
    int rc = ZOK;
    QR_RETURN_IF_ERROR(SyncRetry(
        "create", path, deadline_nanos,
        [&] {
          return zoo_create(session_.handle(), path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, nullptr,
                            0);
        },
        {ZNODEEXISTS}, &rc));
    if (rc == ZOK) return Status::Ok();
    struct Stat stat;
    QR_RETURN_IF_ERROR(SyncRetry(
        "read", path, deadline_nanos, [&] { return zoo_exists(session_.handle(), path.c_str(), 0, &stat); },
        {ZNONODE}, &rc));
    if (rc == ZNONODE) continue;  // its session just ended: create it again
    if (stat.ephemeralOwner == session_.SessionId()) return Status::Ok();  // a retried create of ours
    // Held by another session: this follower's previous run, killed before ZooKeeper expired
    // its session (or, misconfigured, another follower with the same id). Take it over, so the
    // leader does not see this follower go dead when that old session expires.
    log_->warn("{}follower '{}': replacing {} of an earlier session (0x{:x}; a previous run killed less than "
               "session_timeout_ms ago, or another follower with this id)",
               ident_, follower_id_, path, stat.ephemeralOwner);
    QR_RETURN_IF_ERROR(SyncRetry(
        "delete", path, deadline_nanos, [&] { return zoo_delete(session_.handle(), path.c_str(), stat.version); },
        {ZNONODE, ZBADVERSION}));
  }
  return Status::Unavailable(ident_ + "could not create " + path + " after " + std::to_string(kLiveSyncAttempts) +
                             " attempts: another session keeps re-creating it (two followers with id '" +
                             follower_id_ + "'?)");
}

void ZkReplicator::PumpLive() {
  if (!live_needed_ || live_inflight_ || !connected_ || NowNanos() < next_live_nanos_) return;
  live_inflight_ = true;
  session_.CreateEphemeral(LiveMemberPath(opts_.root, follower_id_), OpTag::Make(OpTag::Type::kCreateLive));
  ++inflight_;
}

void ZkReplicator::LiveCompletion(const ZkEvent& ev) {
  live_inflight_ = false;
  const std::string path = LiveMemberPath(opts_.root, follower_id_);
  auto retry_later = [&] {
    if (IsRetryable(ev.rc)) {
      NoteRetry(ev.rc);
    } else {
      log_->warn("{}{} on {}: {}; retrying", ident_, ev.op.type == OpTag::Type::kDeleteLive ? "delete" : "create",
                 path, ZkErrorName(ev.rc));
    }
    next_live_nanos_ = NowNanos() + kLiveBackoffNanos;
  };
  switch (ev.op.type) {
    case OpTag::Type::kCreateLive:
      if (ev.rc == ZOK) {
        live_needed_ = false;
        log_->info("{}live again ({} re-created in the new session)", ident_, path);
      } else if (ev.rc == ZNODEEXISTS) {
        // Ours (a create retried after a connection loss that had been applied) or an older
        // session's: look at its owner.
        live_inflight_ = true;
        session_.Get(path, OpTag::Make(OpTag::Type::kCheckLive));
        ++inflight_;
      } else {
        retry_later();
      }
      return;
    case OpTag::Type::kCheckLive:
      if (ev.rc == ZOK && ev.ephemeral_owner == session_.SessionId()) {
        live_needed_ = false;
      } else if (ev.rc == ZOK) {
        log_->warn("{}replacing {} of an earlier session (0x{:x})", ident_, path, ev.ephemeral_owner);
        live_inflight_ = true;
        session_.Delete(path, OpTag::Make(OpTag::Type::kDeleteLive));
        ++inflight_;
      } else if (ev.rc != ZNONODE) {  // ZNONODE: gone meanwhile; PumpLive creates it
        retry_later();
      }
      return;
    case OpTag::Type::kDeleteLive:
      if (ev.rc != ZOK && ev.rc != ZNONODE) retry_later();  // else PumpLive creates it again
      return;
    default:
      QR_CHECK(false, "unexpected live completion type %d", static_cast<int>(ev.op.type));
  }
}

void ZkReplicator::SetSelfStranded(uint32_t group, const std::string& reason) {
  {
    MutexLock lock(health_mu_);
    std::string& self = health_[group].self_stranded;
    if (self.empty()) self = reason;  // the first batch found gone says it
  }
  // It could never deliver what a predecessor wrote: no candidate for leader any more.
  Withdraw(group, "stranded");
}

// ------------------------------------------------------------------------------------------
// Follower.

void ZkReplicator::AdmitReceive(Request r) {
  const ReplicateMeta& m = r.meta;
  if (!InRange(m)) {
    r.receive_cb(m,
                 Status::InvalidArgument(ident_ + "stream " + StreamName(m.group, m.planner) +
                                         " out of range (groups " + std::to_string(opts_.groups) + ", planners " +
                                         std::to_string(opts_.planners) + ")"),
                 {});
    return;
  }
  InStream& s = in_[{m.group, m.planner}];
  if (s.fetches.count(m.batch_id) != 0) {
    r.receive_cb(m,
                 Status::InvalidArgument(ident_ + "batch " + std::to_string(m.batch_id) + " of stream " +
                                         StreamName(m.group, m.planner) + " is already requested"),
                 {});
    return;
  }
  if (s.fetches.size() >= kMaxRequestsPerStream) {
    r.receive_cb(m,
                 Status::ResourceExhausted(ident_ + "more than " + std::to_string(kMaxRequestsPerStream) +
                                           " outstanding ReceiveData on stream " + StreamName(m.group, m.planner)),
                 {});
    return;
  }
  Fetch& f = s.fetches[m.batch_id];
  f.meta = m;
  f.cb = std::move(r.receive_cb);
}

void ZkReplicator::RestartFetch(Fetch& f, int64_t not_before_nanos) {
  ++f.attempt;
  f.state = FetchState::kStart;
  f.not_before_nanos = not_before_nanos;
  f.parts.clear();
  f.part_state.clear();
  f.parts_done = 0;
  f.bytes.clear();
}

void ZkReplicator::PumpFollower() {
  if (connected_) {
    const int max = opts_.max_inflight;
    const int64_t now = NowNanos();
    for (auto& [key, s] : in_) {
      const auto [g, p] = key;
      for (auto& [id, f] : s.fetches) {
        if (inflight_ >= max) break;
        if (f.state == FetchState::kStart && f.not_before_nanos <= now) {
          // Expected reply size: like the stream's previous marker (small batches stay cheap).
          const uint64_t cost = std::max<uint64_t>(4096, s.last_marker_bytes);
          if (!CanIssue(cost)) break;
          OpTag t = OpTag::Make(OpTag::Type::kGetMarker, g, p, id, 0);
          t.attempt = f.attempt;
          Charge(&t, cost);
          session_.Get(MarkerPath(g, p, id), t);
          ++inflight_;
          f.state = FetchState::kGetMarker;
          f.read_after_prev = s.have_last && s.last_id + 1 == id;
        } else if (f.state == FetchState::kChunks) {
          for (uint32_t k = 1; k < f.part_state.size(); ++k) {
            if (f.part_state[k] != PartState::kNeed) continue;
            const uint64_t cost = ChunkRange(f.header.total_bytes, f.header.chunk_bytes, k).length;
            if (!CanIssue(cost)) break;
            OpTag t = OpTag::Make(OpTag::Type::kGetChunk, g, p, id, k);
            t.attempt = f.attempt;
            Charge(&t, cost);
            session_.Get(ChunkPath(g, p, id, k), t);
            ++inflight_;
            f.part_state[k] = PartState::kInFlight;
          }
        }
      }
    }
  }
  PumpLive();
  WriteProgress();
}

void ZkReplicator::WarnStalledFetches(bool delivered_since_last_tick) {
  static constexpr const char* kStateNames[] = {"not issued yet", "its marker being read",
                                                "its marker being looked up", "waiting for its creation",
                                                "its chunks being read", "ready, not delivered"};
  static_assert(static_cast<int>(FetchState::kReady) == 5, "kStateNames follows FetchState");
  for (auto& [key, s] : in_) {
    const bool waits_on_zk = !s.fetches.empty() && s.fetches.begin()->second.state != FetchState::kWaitCreated;
    if (delivered_since_last_tick || !waits_on_zk) {
      s.suspect_batch = UINT64_MAX;
      continue;
    }
    const auto& [id, f] = *s.fetches.begin();
    if (s.suspect_batch != id) {  // first seen waiting at this tick: warn if it still does at the next
      s.suspect_batch = id;
      continue;
    }
    size_t chunks_out = 0;
    for (PartState ps : f.part_state) chunks_out += ps == PartState::kInFlight;
    log_->warn("{}batch {} of stream {}: nothing delivered for a stats interval; the batch: {} (attempt {}, "
               "chunks {}/{} read, {} out; {} requests of this session in flight, {})",
               ident_, id, StreamName(key.first, key.second), kStateNames[static_cast<int>(f.state)], f.attempt,
               f.parts_done, f.header.num_chunks, chunks_out, inflight_, connected_ ? "connected" : "disconnected");
  }
}

void ZkReplicator::FollowerWatch(const ZkEvent& ev) {
  // Path: ROOT/g<g>/p<p>/b<id>.
  const std::string prefix = opts_.root + "/g";
  if (ev.path.compare(0, prefix.size(), prefix) != 0) return;
  unsigned g = 0, p = 0;
  char name[64] = {0};
  if (std::sscanf(ev.path.c_str() + prefix.size(), "%u/p%u/%63s", &g, &p, name) != 3) return;
  auto c = ParseChildName(name);
  if (!c || c->kind != ChildName::Kind::kMarker) return;
  auto it = in_.find({g, p});
  if (it == in_.end()) return;
  auto f = it->second.fetches.find(c->batch_id);
  if (f != it->second.fetches.end() && f->second.state == FetchState::kWaitCreated) f->second.state = FetchState::kStart;
}

void ZkReplicator::FollowerCompletion(ZkEvent& ev) {
  const OpTag& t = ev.op;
  if (t.type == OpTag::Type::kCreateLive || t.type == OpTag::Type::kCheckLive || t.type == OpTag::Type::kDeleteLive) {
    LiveCompletion(ev);
    return;
  }
  if (t.type == OpTag::Type::kWriteProgress) {
    ProgressCompletion(ev);
    return;
  }
  const StreamKey key{t.group, t.planner};
  auto sit = in_.find(key);
  if (sit == in_.end()) return;
  if (t.type == OpTag::Type::kListStream) {
    ListCompletion(key, sit->second, ev);
    return;
  }
  FetchCompletion(key, sit->second, ev);
}

// The write of this follower's progress znode completed.
void ZkReplicator::ProgressCompletion(ZkEvent& ev) {
  const OpTag& t = ev.op;
  progress_inflight_ = false;
  if (ev.rc == ZNONODE && t.chunk == 0) {
    // Someone removed our progress znode: create it again.
    OpTag c = OpTag::Make(OpTag::Type::kWriteProgress);
    c.chunk = 1;
    session_.Create(ConsumerPath(opts_.root, follower_id_), ProgressBytes(), c);
    ++inflight_;
    progress_inflight_ = true;
  } else if (ev.rc != ZOK) {
    if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
    progress_dirty_ = true;
  }
}

// A stream's children were listed: requests below its oldest marker ask for deleted batches.
void ZkReplicator::ListCompletion(const StreamKey& key, InStream& s, ZkEvent& ev) {
  if (ev.rc != ZOK) return;  // the next poll asks again
  bool any = false;
  uint64_t oldest = 0;
  for (const auto& c : ev.children) {
    auto parsed = ParseChildName(c);
    if (parsed && parsed->kind == ChildName::Kind::kMarker && (!any || parsed->batch_id < oldest)) {
      oldest = parsed->batch_id;
      any = true;
    }
  }
  // Cleanup deletes from the oldest up and always keeps the newest batch, so a request
  // below the oldest marker asks for a deleted batch.
  if (any && !s.fetches.empty() && s.fetches.begin()->first < oldest &&
      s.fetches.begin()->second.state != FetchState::kReady && RetainedFrom(key.first) != UINT64_MAX) {
    // The application keeps checkpoints (RetainFrom): it can continue from a state whose next
    // batch is >= `oldest` (the leader keeps the batches after its own checkpoints,
    // zk_retention.h rule 1 leader_keep_from). The receives stay posted; Health() says what it needs.
    bool raised = false;
    {
      MutexLock lock(health_mu_);
      uint64_t& need = health_[key.first].resume_needs_next;
      raised = oldest > need;
      need = std::max(need, oldest);
    }
    if (raised) {
      const std::string why = "follower '" + follower_id_ + "' fell behind: batch " +
                              std::to_string(s.fetches.begin()->first) + " of stream " +
                              StreamName(key.first, key.second) +
                              " was deleted from ZooKeeper (the oldest kept is " + std::to_string(oldest) +
                              "): it continues from a checkpoint of batch " + std::to_string(oldest - 1) +
                              " or later (the leader's, fetched by its application)";
      log_->warn("{}{}", ident_, why);
      SetSelfStranded(key.first, why);
    }
    return;
  }
  while (any && !s.fetches.empty() && s.fetches.begin()->first < oldest &&
         s.fetches.begin()->second.state != FetchState::kReady) {
    auto it = s.fetches.begin();
    ReceiveCallback cb = std::move(it->second.cb);
    ReplicateMeta meta = it->second.meta;
    s.fetches.erase(it);
    counters_.gone.fetch_add(1, std::memory_order_relaxed);
    Status st = Status::NotFound(
        ident_ + "follower '" + follower_id_ + "' fell behind: batch " + std::to_string(meta.batch_id) +
        " of stream " + StreamName(key.first, key.second) + " was deleted from ZooKeeper (the oldest kept is " +
        std::to_string(oldest) +
        "; past replication.zookeeper.retain_bytes the leader deletes what the followers a majority needs have "
        "read): it cannot catch up from ZooKeeper any more and needs a state transfer (with checkpoints, "
        "server.checkpoint_dir, it fetches the leader's)");
    log_->error("{}", st.message());
    SetSelfStranded(key.first, st.message());
    cb(meta, st, {});
  }
  DeliverReady(key, s);
}

// A read of one fetch (its marker, an exists-watch, a chunk) completed.
void ZkReplicator::FetchCompletion(const StreamKey& key, InStream& s, ZkEvent& ev) {
  const OpTag& t = ev.op;
  auto fit = s.fetches.find(t.batch_id);
  if (fit == s.fetches.end() || fit->second.attempt != t.attempt) return;  // superseded
  Fetch& f = fit->second;
  const int rc = ev.rc;
  auto fail = [&](const Status& st) {
    log_->error("{}{}", ident_, st.ToString());
    ReceiveCallback cb = std::move(f.cb);
    ReplicateMeta meta = f.meta;
    s.fetches.erase(fit);
    cb(meta, st, {});
    DeliverReady(key, s);  // a later request may now be first in line
  };
  switch (t.type) {
    case OpTag::Type::kGetMarker: {
      if (f.state != FetchState::kGetMarker) return;
      if (IsRetryable(rc)) {
        NoteRetry(rc);
        f.state = FetchState::kStart;
        return;
      }
      if (rc == ZNONODE) {
        // Not written yet: set an exists-watch (a create in between is seen by exists itself).
        OpTag w = OpTag::Make(OpTag::Type::kExistsMarker, t.group, t.planner, t.batch_id, 0);
        w.attempt = f.attempt;
        session_.ExistsWatch(MarkerPath(t.group, t.planner, t.batch_id), w);
        ++inflight_;
        f.state = FetchState::kExists;
        return;
      }
      if (rc != ZOK) {
        return fail(Status::Unavailable("reading batch " + std::to_string(t.batch_id) + " of stream " +
                                        StreamName(t.group, t.planner) + ": " + ZkErrorName(rc)));
      }
      std::string_view chunk0;
      Status st = DecodeMarker(ev.data, &f.header, &chunk0);
      if (!st.ok()) {
        return fail(Status::Corruption("batch " + std::to_string(t.batch_id) + " of stream " +
                                       StreamName(t.group, t.planner) + ": " + st.message()));
      }
      f.czxid = ev.czxid;
      s.last_marker_bytes = ev.data.size();
      f.parts.assign(f.header.num_chunks, std::string());
      f.parts[0].assign(chunk0.data(), chunk0.size());
      f.part_state.assign(f.header.num_chunks, PartState::kNeed);
      f.part_state[0] = PartState::kDone;
      f.parts_done = 1;
      f.state = FetchState::kChunks;
      if (f.parts_done == f.header.num_chunks) Assemble(s, f);
      break;
    }
    case OpTag::Type::kExistsMarker:
      if (f.state != FetchState::kExists) return;
      if (rc == ZNONODE) {
        f.state = FetchState::kWaitCreated;  // the watch fires on create
      } else {
        if (IsRetryable(rc)) NoteRetry(rc);
        f.state = FetchState::kStart;
      }
      return;
    case OpTag::Type::kGetChunk: {
      if (f.state != FetchState::kChunks || f.part_state[t.chunk] != PartState::kInFlight) return;
      if (IsRetryable(rc)) {
        NoteRetry(rc);
        f.part_state[t.chunk] = PartState::kNeed;
        return;
      }
      if (rc == ZNONODE) {
        // The marker we read was a crashed leader's leftover, removed meanwhile: start over.
        counters_.stale.fetch_add(1, std::memory_order_relaxed);
        RestartFetch(f, NowNanos() + kStaleBackoffNanos);
        return;
      }
      if (rc != ZOK) {
        return fail(Status::Unavailable("reading chunk " + std::to_string(t.chunk) + " of batch " +
                                        std::to_string(t.batch_id) + ": " + ZkErrorName(rc)));
      }
      f.parts[t.chunk] = std::move(ev.data);
      f.part_state[t.chunk] = PartState::kDone;
      ++f.parts_done;
      if (f.parts_done == f.header.num_chunks) Assemble(s, f);
      break;
    }
    default:
      QR_CHECK(false, "unexpected follower completion type %d", static_cast<int>(t.type));
  }
  DeliverReady(key, s);
}

void ZkReplicator::Assemble(InStream& s, Fetch& f) {
  (void)s;
  std::string bytes;
  bytes.reserve(f.header.total_bytes);
  bool sizes_ok = true;
  for (uint32_t k = 0; k < f.header.num_chunks; ++k) {
    ByteRange r = ChunkRange(f.header.total_bytes, f.header.chunk_bytes, k);
    if (f.parts[k].size() != r.length) sizes_ok = false;
    bytes += f.parts[k];
  }
  f.parts.clear();
  if (sizes_ok && Hash64(bytes) == f.header.payload_hash) {
    f.bytes = std::move(bytes);
    f.state = FetchState::kReady;
    return;
  }
  // Chunks replaced under us (a crashed leader's leftovers being rewritten) or real damage:
  // re-read a few times, then report corruption.
  if (++f.corrupt <= kMaxCorruptRetries) {
    int corrupt = f.corrupt;
    RestartFetch(f, NowNanos() + kStaleBackoffNanos);
    f.corrupt = corrupt;
    return;
  }
  f.state = FetchState::kReady;
  f.bytes.clear();
  f.header.payload_hash = ~Hash64(std::string_view());  // marks the failure for DeliverReady
  f.corrupt = -1;
}

void ZkReplicator::DeliverReady(const StreamKey& key, InStream& s) {
  while (!s.fetches.empty()) {
    auto it = s.fetches.begin();
    Fetch& f = it->second;
    if (f.state != FetchState::kReady) return;
    const uint64_t id = it->first;
    if (f.corrupt < 0) {
      ReceiveCallback cb = std::move(f.cb);
      ReplicateMeta meta = f.meta;
      s.fetches.erase(it);
      cb(meta,
         Status::Corruption(ident_ + "batch " + std::to_string(id) + " of stream " +
                            StreamName(key.first, key.second) + ": chunks do not match the marker's hash"),
         {});
      continue;
    }
    // Markers of a stream are created in batch order, so a marker b+1 older than the marker b
    // we delivered may be a crashed leader's leftover beyond its gap, read before the new
    // leader deleted it (it does so before it writes b): read it again. A marker b+1 read after
    // b was delivered is no leftover, whatever its age (b was written after the leftovers were
    // gone, and this session's reads see ZooKeeper's writes in order): the live leader can
    // create b+1 before b when a connection drops with both in flight (it sends b+1 on the new
    // connection before it learns that b failed on the old one, then re-creates b). Without
    // this exception the follower would re-read such a b+1 forever (the session expiry test covers it).
    // Epochs only grow along a stream: a marker b+1 of an older epoch than b's is a deposed
    // leader's leftover, read before its successor deleted it.
    if ((s.have_last && id == s.last_id + 1 && f.czxid <= s.last_czxid && !f.read_after_prev) ||
        (s.have_last && id == s.last_id + 1 && f.header.epoch < s.last_epoch)) {
      counters_.stale.fetch_add(1, std::memory_order_relaxed);
      RestartFetch(f, NowNanos() + kStaleBackoffNanos);
      return;
    }
    ReceiveCallback cb = std::move(f.cb);
    ReplicateMeta meta = f.meta;
    std::string bytes = std::move(f.bytes);
    s.have_last = true;
    s.last_id = id;
    s.last_czxid = f.czxid;
    s.last_epoch = f.header.epoch;
    s.next_needed = std::max(s.next_needed, id + 1);
    s.fetches.erase(it);
    // A member that leads (or led) the group publishes the writer's NextBatchId, not its reader's.
    const bool led = opts_.election && key.first < elections_.size() &&
                     (elections_[key.first].phase == ElectionPhase::kLeading ||
                      elections_[key.first].phase == ElectionPhase::kDeposed);
    if (!led) PublishNext(key, s.next_needed);
    progress_dirty_ = true;
    counters_.delivered.fetch_add(1, std::memory_order_relaxed);
    cb(meta, Status::Ok(), std::move(bytes));
  }
}

std::string ZkReplicator::ProgressBytes() const {
  // What this member has of each stream: what its reader delivered, and, of a stream it leads
  // (or led), every batch it had acknowledged. A successor's cleanup reads it like a follower's.
  std::map<StreamKey, uint64_t> next;
  for (const auto& [key, s] : in_) next[key] = s.next_needed;
  for (const auto& [key, s] : out_) {
    const uint64_t acked = s.batches.empty() ? s.next_id : s.batches.front().meta.batch_id;
    next[key] = std::max(next[key], acked);
  }
  std::vector<StreamProgress> progress;
  for (const auto& [key, n] : next) {
    // A restart of this member starts after its newest checkpoint (RetainFrom): ask the
    // leader's cleanup to keep from there.
    if (n > 0) progress.push_back({key.first, key.second, n, std::min(n, RetainedFrom(key.first))});
  }
  return EncodeProgress(progress);
}

void ZkReplicator::WriteProgress() {
  // One write in flight at a time, at most one per progress_interval_ms; deliveries meanwhile
  // are coalesced into the next one. Not more often: ZooKeeper answers a session's reads only
  // after its earlier writes committed (fsync), so each progress write stalls our reads.
  if (!registered_ || !progress_dirty_ || progress_inflight_ || !connected_) return;
  const int64_t now = NowNanos();
  if (now < next_progress_nanos_) return;
  next_progress_nanos_ = now + static_cast<int64_t>(opts_.progress_interval_ms) * 1'000'000;
  progress_dirty_ = false;
  progress_inflight_ = true;
  session_.Set(ConsumerPath(opts_.root, follower_id_), ProgressBytes(), OpTag::Make(OpTag::Type::kWriteProgress));
  ++inflight_;
}

}  // namespace qrstore::replication::zookeeper
