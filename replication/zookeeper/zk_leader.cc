// ZkReplicator, leader (writer) side: the scan of each stream at Start, admitting batches,
// writing chunks then markers, acknowledging in batch-id order, failing a stream, and the
// cleanup rounds that delete consumed batches or enforce retain_bytes.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator_impl.h"
#include "replication/zookeeper/zk_session.h"

namespace qrstore::replication::zookeeper {

namespace {

constexpr size_t kMaxDeletesPerRound = 256;

}  // namespace

// ------------------------------------------------------------------------------------------
// Start-up scan.

Status ZkReplicator::ScanStream(uint32_t g, uint32_t p, int64_t deadline_nanos) {
  const std::string path = StreamPath(opts_.root, g, p);
  struct String_vector sv = {0, nullptr};
  QR_RETURN_IF_ERROR(SyncRetry("list", path, deadline_nanos,
                               [&] { return zoo_get_children(session_.handle(), path.c_str(), 0, &sv); }, {}));
  std::set<uint64_t> markers;
  std::map<uint64_t, std::vector<uint32_t>> chunks;
  for (int32_t i = 0; i < sv.count; ++i) {
    auto c = ParseChildName(sv.data[i]);
    if (!c) continue;
    if (c->kind == ChildName::Kind::kMarker) {
      markers.insert(c->batch_id);
    } else {
      chunks[c->batch_id].push_back(c->chunk);
    }
  }
  deallocate_String_vector(&sv);
  uint64_t lo = markers.empty() ? 0 : *markers.begin();
  uint64_t next = lo;
  while (markers.count(next) != 0) ++next;
  OutStream& s = out_[{g, p}];
  s.next_id = next;
  // Leftovers of a crashed leader: markers after the first gap were never acknowledged (acks
  // are in batch order), chunks at or after `next` belong to unfinished batches, chunks below
  // `lo` to deleted ones. Remove them so the stream has one writer's bytes only.
  std::vector<std::string> doomed;
  for (uint64_t id : markers) {
    if (id > next) doomed.push_back(path + "/" + MarkerName(id));
  }
  for (auto& [id, ks] : chunks) {
    if (id >= next || id < lo) {
      for (uint32_t k : ks) doomed.push_back(path + "/" + ChunkName(id, k));
    }
  }
  for (uint64_t id : markers) {
    if (id >= next) break;
    uint32_t n = 1;
    if (auto it = chunks.find(id); it != chunks.end()) {
      for (uint32_t k : it->second) n = std::max(n, k + 1);
    }
    s.kept[id] = KeptBatch{n, 0};
  }
  s.fence.insert(doomed.begin(), doomed.end());
  if (!doomed.empty()) {
    log_->warn("{}stream {}: {} leftover znodes of an unfinished leader, deleted before the first write (resuming "
               "at batch {})",
               ident_, StreamName(g, p), doomed.size(), next);
  }
  PublishNext({g, p}, next);
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------
// Leader.

void ZkReplicator::AdmitReplicate(Request r) {
  const ReplicateMeta& m = r.meta;
  if (!InRange(m)) {
    r.replicate_cb(m, Status::InvalidArgument(ident_ + "stream " + StreamName(m.group, m.planner) +
                                              " out of range (groups " + std::to_string(opts_.groups) +
                                              ", planners " + std::to_string(opts_.planners) + ")"));
    return;
  }
  auto found = out_.find({m.group, m.planner});
  if (found != out_.end() && found->second.broken) {
    r.replicate_cb(m, Status::Unavailable(found->second.broken_reason));
    return;
  }
  if (!Leading(m.group)) {
    r.replicate_cb(m, Status::Unavailable(ident_ + "not the leader of group " + std::to_string(m.group)));
    return;
  }
  OutStream& s = out_[{m.group, m.planner}];
  if (m.batch_id != s.next_id) {
    r.replicate_cb(m, Status::InvalidArgument(ident_ + "batch id " + std::to_string(m.batch_id) +
                                              " out of sequence: stream " + StreamName(m.group, m.planner) +
                                              " expects " + std::to_string(s.next_id)));
    return;
  }
  ++s.next_id;
  PublishNext({m.group, m.planner}, s.next_id);
  OutBatch b;
  b.meta = m;
  b.header = MakeMarkerHeader(r.bytes, opts_.chunk_bytes);
  b.header.epoch = elections_[m.group].epoch;
  b.payload = std::move(r.bytes);
  b.cb = std::move(r.replicate_cb);
  b.chunks.assign(b.header.num_chunks, PartState::kNeed);
  b.chunks[0] = PartState::kDone;
  b.marker = b.header.num_chunks == 1 ? MarkerState::kReady : MarkerState::kWaitChunks;
  b.deadline_nanos = NowNanos() + static_cast<int64_t>(opts_.op_deadline_ms) * 1'000'000;
  s.batches.push_back(std::move(b));
  ++admitted_;
}

void ZkReplicator::PumpLeader() {
  if (!connected_) return;
  const int max = opts_.max_inflight;
  for (auto& [key, s] : out_) {
    const auto [g, p] = key;
    if (s.batches.empty() || !Leading(g)) continue;
    if (!s.fence.empty()) {
      if (s.fence_inflight == 0) {
        for (const auto& path : s.fence) {
          OpTag t = OpTag::Make(OpTag::Type::kDeleteFence, g, p);
          t.name = path;
          LeaderWrite(ZkSession::FencedKind::kDelete, g, path, {}, t);
          ++inflight_;
          ++s.fence_inflight;
        }
      }
      continue;  // this stream's writes wait for the fence
    }
    bool prev_marker_issued = true;  // markers go out in batch-id order (see zk_layout.h)
    for (auto& b : s.batches) {
      if (inflight_ >= max) return;
      // Flow control: while the followers have not consumed retain_bytes, no new batch starts
      // (batches already started finish, so their callbacks come).
      if (!b.started && HeldBack()) return;
      b.started = true;
      const uint64_t id = b.meta.batch_id;
      for (uint32_t k = 1; k < b.chunks.size(); ++k) {
        if (b.chunks[k] != PartState::kNeed) continue;
        ByteRange r = ChunkRange(b.payload.size(), opts_.chunk_bytes, k);
        if (!CanIssue(r.length)) return;
        OpTag t = OpTag::Make(OpTag::Type::kCreateChunk, g, p, id, k);
        Charge(&t, r.length);
        LeaderWrite(ZkSession::FencedKind::kCreate, g, ChunkPath(g, p, id, k),
                    std::string_view(b.payload).substr(r.offset, r.length), t);
        b.chunks[k] = PartState::kInFlight;
        ++inflight_;
      }
      if (b.marker == MarkerState::kWaitChunks && b.chunks_done + 1 == b.chunks.size()) b.marker = MarkerState::kReady;
      const ByteRange r0 = ChunkRange(b.payload.size(), opts_.chunk_bytes, 0);
      if (b.marker == MarkerState::kReady && prev_marker_issued && CanIssue(r0.length + kMarkerHeaderBytes)) {
        OpTag t = OpTag::Make(OpTag::Type::kCreateMarker, g, p, id, 0);
        t.attempt = b.marker_attempt;
        Charge(&t, r0.length + kMarkerHeaderBytes);
        LeaderWrite(ZkSession::FencedKind::kCreate, g, MarkerPath(g, p, id),
                    EncodeMarker(b.header, std::string_view(b.payload).substr(r0.offset, r0.length)), t);
        b.marker = MarkerState::kInFlight;
        ++inflight_;
      }
      prev_marker_issued = b.marker == MarkerState::kInFlight || b.marker == MarkerState::kDone;
    }
  }
}

OutBatch* ZkReplicator::FindBatch(const OpTag& t) {
  auto it = out_.find({t.group, t.planner});
  if (it == out_.end() || it->second.batches.empty()) return nullptr;
  auto& q = it->second.batches;
  uint64_t first = q.front().meta.batch_id;
  if (t.batch_id < first || t.batch_id - first >= q.size()) return nullptr;
  OutBatch* b = &q[t.batch_id - first];
  QR_CHECK_EQ(b->meta.batch_id, t.batch_id);
  return b;
}

void ZkReplicator::LeaderCompletion(ZkEvent& ev) {
  const OpTag& t = ev.op;
  if (ev.fenced) {
    // ZooKeeper refused the write: the group's epoch is no longer this leader's (a new leader
    // bumped it, so this one was deposed without having heard yet).
    counters_.fenced.fetch_add(1, std::memory_order_relaxed);
    if (Leading(t.group)) {
      Depose(t.group,
             "ZooKeeper refused a write (" + ZkErrorName(ev.rc) + " on the epoch check): the epoch of group " +
                 std::to_string(t.group) + " is no longer " + std::to_string(elections_[t.group].epoch) +
                 ", another member leads",
             true);
    }
    // Only LeaderWrite's requests are fenced (chunks, markers, overwrites, deletions); reads
    // never are, so no cleanup round waits on this one.
    if (t.type == OpTag::Type::kDeleteFence) {
      OutStream& s = out_[{t.group, t.planner}];
      if (s.fence_inflight > 0) --s.fence_inflight;
    }
    return;
  }
  if (t.type == OpTag::Type::kListConsumers || t.type == OpTag::Type::kListLive ||
      t.type == OpTag::Type::kGetConsumer || t.type == OpTag::Type::kDeleteBatch) {
    CleanupCompletion(ev);
    return;
  }
  if (t.type == OpTag::Type::kDeleteFence) {
    OutStream& s = out_[{t.group, t.planner}];
    if (s.fence_inflight > 0) --s.fence_inflight;
    if (ev.rc == ZOK || ev.rc == ZNONODE) {
      s.fence.erase(t.name);
    } else if (IsRetryable(ev.rc)) {
      NoteRetry(ev.rc);  // re-issued once the fence's requests are all back
    } else {
      FailStream({t.group, t.planner}, s,
                 Status::Unavailable(ident_ + "cannot delete leftover " + t.name + ": " + ZkErrorName(ev.rc)));
    }
    return;
  }
  OutBatch* b = FindBatch(t);
  if (b == nullptr) return;  // its stream failed meanwhile
  const StreamKey key{t.group, t.planner};
  OutStream& s = out_[key];
  const int rc = ev.rc;
  auto fail = [&](const std::string& what) {
    FailStream(key, s,
               Status::Unavailable(ident_ + what + " for batch " + std::to_string(t.batch_id) + " of stream " +
                                   StreamName(t.group, t.planner) + ": " + ZkErrorName(rc)));
  };
  switch (t.type) {
    case OpTag::Type::kCreateChunk:
    case OpTag::Type::kSetChunk:
    case OpTag::Type::kVerifyChunk: {
      PartState& st = b->chunks[t.chunk];
      if (st != PartState::kInFlight) return;
      if (IsRetryable(rc) || (rc == ZNONODE && t.type != OpTag::Type::kCreateChunk)) {
        if (IsRetryable(rc)) NoteRetry(rc);
        st = PartState::kNeed;
        return;
      }
      ByteRange r = ChunkRange(b->payload.size(), opts_.chunk_bytes, t.chunk);
      std::string_view want = std::string_view(b->payload).substr(r.offset, r.length);
      if (t.type == OpTag::Type::kCreateChunk && rc == ZNODEEXISTS) {
        // A retried create whose first attempt was applied, or a crashed writer's chunk:
        // compare the bytes (the marker is not written yet, so overwriting is safe).
        OpTag v = OpTag::Make(OpTag::Type::kVerifyChunk, t.group, t.planner, t.batch_id, t.chunk);
        Charge(&v, r.length);
        session_.Get(ChunkPath(t.group, t.planner, t.batch_id, t.chunk), v);
        ++inflight_;
        return;
      }
      if (t.type == OpTag::Type::kVerifyChunk && rc == ZOK && ev.data != want) {
        OpTag w = OpTag::Make(OpTag::Type::kSetChunk, t.group, t.planner, t.batch_id, t.chunk);
        Charge(&w, r.length);
        LeaderWrite(ZkSession::FencedKind::kSet, t.group, ChunkPath(t.group, t.planner, t.batch_id, t.chunk), want, w);
        ++inflight_;
        return;
      }
      if (rc != ZOK) return fail("chunk write");
      if (t.type == OpTag::Type::kVerifyChunk) counters_.verified.fetch_add(1, std::memory_order_relaxed);
      st = PartState::kDone;
      ++b->chunks_done;
      return;
    }
    case OpTag::Type::kCreateMarker:
    case OpTag::Type::kVerifyMarker: {
      if (b->marker != MarkerState::kInFlight || t.attempt != b->marker_attempt) return;
      if (IsRetryable(rc) || (rc == ZNONODE && t.type == OpTag::Type::kVerifyMarker)) {
        if (IsRetryable(rc)) NoteRetry(rc);
        // Later markers of the stream still in flight went out on the same (now failed)
        // connection after this one: write them off too, so that all are re-issued in batch
        // order and marker creation order stays batch order (followers rely on it).
        bool later = false;
        for (auto& o : s.batches) {
          if (&o == b) later = true;
          if (later && o.marker == MarkerState::kInFlight) {
            o.marker = MarkerState::kReady;
            ++o.marker_attempt;
          }
        }
        return;
      }
      if (t.type == OpTag::Type::kCreateMarker && rc == ZNODEEXISTS) {
        OpTag v = OpTag::Make(OpTag::Type::kVerifyMarker, t.group, t.planner, t.batch_id, 0);
        v.attempt = b->marker_attempt;
        Charge(&v, ChunkRange(b->payload.size(), opts_.chunk_bytes, 0).length + kMarkerHeaderBytes);
        session_.Get(MarkerPath(t.group, t.planner, t.batch_id), v);
        ++inflight_;
        return;
      }
      if (rc != ZOK) return fail("marker write");
      if (t.type == OpTag::Type::kVerifyMarker) {
        ByteRange r0 = ChunkRange(b->payload.size(), opts_.chunk_bytes, 0);
        if (ev.data != EncodeMarker(b->header, std::string_view(b->payload).substr(r0.offset, r0.length))) {
          return FailStream(key, s,
                            Status::Unavailable(ident_ + "batch " + std::to_string(t.batch_id) + " of stream " +
                                                StreamName(t.group, t.planner) +
                                                " was already written by another writer (two leaders on root " +
                                                opts_.root + "?)"));
        }
        counters_.verified.fetch_add(1, std::memory_order_relaxed);
      }
      b->marker = MarkerState::kDone;
      AckFront(s);
      return;
    }
    default:
      QR_CHECK(false, "unexpected leader completion type %d", static_cast<int>(t.type));
  }
}

void ZkReplicator::AckFront(OutStream& s) {
  // In batch-id order: OK for b promises 0..b (a follower cannot read past a missing batch).
  while (!s.batches.empty() && s.batches.front().marker == MarkerState::kDone) {
    OutBatch b = std::move(s.batches.front());
    s.batches.pop_front();
    --admitted_;
    s.kept[b.meta.batch_id] = KeptBatch{b.header.num_chunks, b.header.total_bytes};
    s.kept_bytes += b.header.total_bytes;
    retained_bytes_ += b.header.total_bytes;
    counters_.acked.fetch_add(1, std::memory_order_relaxed);
    progress_dirty_ = registered_;  // a member's progress also says what it has written
    b.cb(b.meta, Status::Ok());
  }
}

void ZkReplicator::FailStream(const StreamKey& key, OutStream& s, const Status& status) {
  log_->error("{}", status.ToString());
  s.broken = true;
  s.broken_reason = status.message();
  {
    MutexLock lock(next_mu_);
    broken_.insert(key);
  }
  std::deque<OutBatch> failed = std::move(s.batches);
  s.batches.clear();
  admitted_ -= failed.size();
  for (auto& b : failed) b.cb(b.meta, status);
}

void ZkReplicator::StartCleanup() {
  ++cleanup_round_;
  cleanup_failed_ = false;
  round_progress_.clear();
  round_live_.clear();
  if (opts_.followers == 0) {
    // No followers to wait for: only the byte budget applies (and nobody is reported stranded).
    FinishCleanupRound();
    return;
  }
  // Who is registered (R/consumers, then each one's progress) and who is live (R/live), read
  // side by side; the round decides once every answer is in (CleanupRequestDone).
  cleanup_inflight_ = true;
  cleanup_pending_ = 2;
  OpTag t = OpTag::Make(OpTag::Type::kListConsumers);
  t.attempt = cleanup_round_;
  session_.Children(ConsumersPath(opts_.root), t);
  ++inflight_;
  OpTag l = OpTag::Make(OpTag::Type::kListLive);
  l.attempt = cleanup_round_;
  session_.Children(LivePath(opts_.root), l);
  ++inflight_;
}

void ZkReplicator::CleanupCompletion(ZkEvent& ev) {
  const OpTag& t = ev.op;
  if (t.type == OpTag::Type::kDeleteBatch) {
    if (ev.rc == ZOK || ev.rc == ZNONODE) {
      if (t.chunk == 0 && ev.rc == ZOK) counters_.deleted.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // Not deleted: put the batch back so a later round tries again (chunk count in attempt).
    out_[{t.group, t.planner}].kept.emplace(t.batch_id, KeptBatch{static_cast<uint32_t>(t.attempt), 0});
    if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
    return;
  }
  if (!cleanup_inflight_ || t.attempt != cleanup_round_) return;
  auto failed = [&] {
    if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
    cleanup_failed_ = true;
  };
  switch (t.type) {
    case OpTag::Type::kListLive:
      if (ev.rc == ZOK) {
        round_live_.insert(ev.children.begin(), ev.children.end());
      } else if (ev.rc != ZNONODE) {  // ZNONODE: nobody was ever live
        failed();
      }
      break;
    case OpTag::Type::kListConsumers:
      if (ev.rc == ZOK) {
        for (const auto& child : ev.children) {
          OpTag g = OpTag::Make(OpTag::Type::kGetConsumer);
          g.attempt = cleanup_round_;
          g.name = child;
          session_.Get(ConsumerPath(opts_.root, child), g);
          ++inflight_;
          ++cleanup_pending_;
        }
      } else if (ev.rc != ZNONODE) {
        failed();
      }
      break;
    case OpTag::Type::kGetConsumer:
      if (ev.rc == ZOK) {
        std::vector<StreamProgress> progress;
        if (DecodeProgress(ev.data, &progress).ok()) {
          round_progress_[t.name] = std::move(progress);
          unreadable_warned_.erase(t.name);
        } else if (unreadable_warned_.insert(t.name).second) {
          // Not a reason to stop cleaning up: a znode nobody can read must not stall the group.
          log_->warn("{}ignoring follower '{}': its progress znode {} is unreadable (it counts as not registered)",
                     ident_, t.name, ConsumerPath(opts_.root, t.name));
        }
      } else if (ev.rc != ZNONODE) {  // ZNONODE: removed since the list; not registered
        failed();
      }
      break;
    default:
      QR_CHECK(false, "unexpected cleanup completion type %d", static_cast<int>(t.type));
  }
  CleanupRequestDone();
}

void ZkReplicator::CleanupRequestDone() {
  QR_CHECK_GT(cleanup_pending_, 0u);
  if (--cleanup_pending_ > 0) return;
  if (cleanup_failed_) {
    // Decide nothing on a partial view: the next round reads everything again.
    cleanup_inflight_ = false;
    return;
  }
  FinishCleanupRound();
}

void ZkReplicator::DeleteBatch(const StreamKey& key, OutStream& s) {
  auto [id, kept] = *s.kept.begin();
  s.kept.erase(s.kept.begin());
  s.kept_bytes -= kept.bytes;
  retained_bytes_ -= kept.bytes;
  // Marker first: nobody may find a marker whose chunks are gone.
  OpTag t = OpTag::Make(OpTag::Type::kDeleteBatch, key.first, key.second, id, 0);
  t.attempt = kept.chunks;
  LeaderWrite(ZkSession::FencedKind::kDelete, key.first, MarkerPath(key.first, key.second, id), {}, t);
  ++inflight_;
  for (uint32_t k = 1; k < kept.chunks; ++k) {
    OpTag c = OpTag::Make(OpTag::Type::kDeleteBatch, key.first, key.second, id, k);
    c.attempt = kept.chunks;
    LeaderWrite(ZkSession::FencedKind::kDelete, key.first, ChunkPath(key.first, key.second, id, k), {}, c);
    ++inflight_;
  }
}

void ZkReplicator::FinishCleanupRound() {
  cleanup_inflight_ = false;
  // The rules are a pure function (zk_retention.h); this carries out its plan.
  RetentionInput in;
  in.followers = opts_.followers;
  in.retain_bytes = opts_.retain_bytes;
  in.max_deletes = kMaxDeletesPerRound;
  for (const auto& [key, s] : out_) {
    if (!Leading(key.first)) continue;  // deposed: it writes (and deletes) nothing any more
    in.streams[key] = RetentionStream{&s.kept, s.kept_bytes,
                                      s.batches.empty() ? s.next_id : s.batches.front().meta.batch_id};
    if (const uint64_t own = LeaderRetainedFrom(key.first); own != UINT64_MAX) in.leader_keep_from[key.first] = own;
  }
  for (const auto& [id, progress] : round_progress_) {
    // Its own progress and live znodes (kept from when it read as a follower) are no reason to
    // keep or wait for anything: the leader has every batch.
    if (registered_ && id == follower_id_) continue;
    RetentionFollower f;
    f.id = id;
    f.live = round_live_.count(id) != 0;
    for (const auto& e : progress) {
      f.next[{e.group, e.planner}] = e.next_batch_id;
      f.keep_from[{e.group, e.planner}] = e.keep_from;
    }
    in.registered.push_back(std::move(f));
  }
  RetentionPlan plan = PlanRetention(in);
  in.streams.clear();  // views into out_, which the deletions change
  const uint64_t kept_before = retained_bytes_;
  uint64_t evicted = 0;
  for (const auto& [key, d] : plan.deletes) {
    OutStream& s = out_[key];
    uint64_t n = d.consumed + d.evicted;
    uint64_t ev = d.evicted;
    // A promoted member's own reader may still need its predecessor's batches: none of those
    // goes before this member's application has received it.
    auto in = in_.find(key);
    if (in != in_.end() && in->second.next_needed < s.reader_until) {
      uint64_t allowed = 0;
      for (auto it = s.kept.begin(); it != s.kept.end() && allowed < n && it->first < in->second.next_needed; ++it) {
        ++allowed;
      }
      const uint64_t cut = n - allowed;
      ev -= std::min(ev, cut);
      n = allowed;
    }
    for (uint64_t i = 0; i < n; ++i) DeleteBatch(key, s);
    evicted += ev;
  }
  counters_.evicted.fetch_add(evicted, std::memory_order_relaxed);
  // Rule 1 keeps what follows this leader's checkpoint before its newest (or one a member is
  // fetching: HoldFrom), for a member that comes back by a checkpoint; the byte budget wins over
  // it. When it did, such a member may find the batches after its checkpoint gone as well, and
  // never catch up: say so once.
  for (const auto& [key, s] : out_) {
    if (retention_checkpoint_warned_) break;
    auto lk = in.leader_keep_from.find(key.first);
    if (!Leading(key.first) || lk == in.leader_keep_from.end() || s.kept.empty() || s.kept.begin()->first <= lk->second) {
      continue;
    }
    retention_checkpoint_warned_ = true;
    log_->warn("{}replication.zookeeper.retain_bytes ({} bytes) is too small for state transfers: stream g{}/p{} "
               "keeps batches from {} on, but a restart from the checkpoint of batch {} (this leader's before its "
               "newest, or one a member is fetching) needs them from {}; a member that comes back by a checkpoint "
               "may find what follows it deleted too, again and again: raise retain_bytes",
               ident_, opts_.retain_bytes, key.first, key.second, s.kept.begin()->first, lk->second - 1, lk->second);
  }
  if (evicted > 0 && opts_.followers == 0 && !retention_warned_) {
    retention_warned_ = true;
    log_->warn("{}over replication.zookeeper.retain_bytes ({} bytes kept): deleting the oldest batches whether or "
               "not followers read them (replication.zookeeper.followers is 0)",
               ident_, kept_before);
  }
  // Stranded followers: warned once each (again only after they stopped being stranded:
  // caught up, or re-registered further on), and published for Health().
  std::set<std::string> stranded_now;
  std::map<uint32_t, GroupHealth> health;
  for (const auto& st : plan.stranded) {
    if (stranded_now.insert(st.id).second && stranded_warned_.count(st.id) == 0) {
      log_->warn("{}{}", ident_, StrandedWarning(st, opts_.retain_bytes));
    }
    StrandedMember m;
    m.follower_id = st.id;
    m.reason = StrandedReason(st, opts_.retain_bytes);
    health[st.group].stranded.push_back(std::move(m));
  }
  stranded_warned_ = std::move(stranded_now);
  {
    MutexLock lock(health_mu_);
    // What this member learned as a reader (a promoted one may have been stranded) stays.
    for (const auto& [group, h] : health_) {
      if (!h.self_stranded.empty()) health[group].self_stranded = h.self_stranded;
      health[group].resume_needs_next = h.resume_needs_next;
    }
    health_ = std::move(health);
  }
  hold_reason_ = plan.held_back ? plan.waiting_for : std::string();
  if (plan.held_back) counters_.held.fetch_add(1, std::memory_order_relaxed);
}

std::string ZkReplicator::HeldBackReason() const {
  const std::string kept = std::to_string(retained_bytes_) + " bytes kept > replication.zookeeper.retain_bytes " +
                           std::to_string(opts_.retain_bytes);
  // Between rounds the last one's words may be stale or missing: say what is known.
  return hold_reason_.empty() ? kept + "; waiting for the next cleanup round" : hold_reason_;
}

}  // namespace qrstore::replication::zookeeper
