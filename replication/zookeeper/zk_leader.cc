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
    s.live[id] = OutStream::Live{n, 0};
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
  OutStream& s = out_[{m.group, m.planner}];
  if (s.broken) {
    r.replicate_cb(m, Status::Unavailable(s.broken_reason));
    return;
  }
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
    if (!s.fence.empty() && !s.batches.empty()) {
      if (s.fence_inflight == 0) {
        for (const auto& path : s.fence) {
          OpTag t = OpTag::Make(OpTag::Type::kDeleteFence, g, p);
          t.name = path;
          session_.Delete(path, t);
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
        session_.Create(ChunkPath(g, p, id, k), std::string_view(b.payload).substr(r.offset, r.length), t);
        b.chunks[k] = PartState::kInFlight;
        ++inflight_;
      }
      if (b.marker == MarkerState::kWaitChunks && b.chunks_done + 1 == b.chunks.size()) b.marker = MarkerState::kReady;
      const ByteRange r0 = ChunkRange(b.payload.size(), opts_.chunk_bytes, 0);
      if (b.marker == MarkerState::kReady && prev_marker_issued && CanIssue(r0.length + kMarkerHeaderBytes)) {
        OpTag t = OpTag::Make(OpTag::Type::kCreateMarker, g, p, id, 0);
        t.attempt = b.marker_attempt;
        Charge(&t, r0.length + kMarkerHeaderBytes);
        session_.Create(MarkerPath(g, p, id),
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
  if (t.type == OpTag::Type::kListConsumers || t.type == OpTag::Type::kGetConsumer ||
      t.type == OpTag::Type::kDeleteBatch) {
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
        session_.Set(ChunkPath(t.group, t.planner, t.batch_id, t.chunk), want, w);
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
    s.live[b.meta.batch_id] = OutStream::Live{b.header.num_chunks, b.header.total_bytes};
    s.live_bytes += b.header.total_bytes;
    retained_bytes_ += b.header.total_bytes;
    counters_.acked.fetch_add(1, std::memory_order_relaxed);
    b.cb(b.meta, Status::Ok());
  }
}

void ZkReplicator::FailStream(const StreamKey& key, OutStream& s, const Status& status) {
  log_->error("{}", status.ToString());
  s.broken = true;
  s.broken_reason = status.message();
  {
    std::lock_guard<std::mutex> lock(next_mu_);
    broken_.insert(key);
  }
  std::deque<OutBatch> failed = std::move(s.batches);
  s.batches.clear();
  admitted_ -= failed.size();
  for (auto& b : failed) b.cb(b.meta, status);
}

void ZkReplicator::StartCleanup() {
  cleanup_failed_ = false;
  consumer_progress_.clear();
  ++cleanup_round_;
  if (opts_.followers == 0) {
    // No followers to wait for: only the byte budget applies.
    FinishCleanupRound();
    return;
  }
  cleanup_inflight_ = true;
  OpTag t = OpTag::Make(OpTag::Type::kListConsumers);
  t.attempt = cleanup_round_;
  session_.Children(ConsumersPath(opts_.root), t);
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
    out_[{t.group, t.planner}].live.emplace(t.batch_id, OutStream::Live{static_cast<uint32_t>(t.attempt), 0});
    if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
    return;
  }
  if (!cleanup_inflight_ || t.attempt != cleanup_round_) return;
  if (t.type == OpTag::Type::kListConsumers) {
    if (ev.rc != ZOK || ev.children.size() < static_cast<size_t>(opts_.followers)) {
      if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
      cleanup_inflight_ = false;
      return;
    }
    consumers_pending_ = ev.children.size();
    for (const auto& child : ev.children) {
      OpTag g = OpTag::Make(OpTag::Type::kGetConsumer);
      g.attempt = cleanup_round_;
      g.name = child;
      session_.Get(ConsumerPath(opts_.root, child), g);
      ++inflight_;
    }
    return;
  }
  // kGetConsumer
  if (ev.rc == ZOK) {
    std::vector<StreamProgress> progress;
    if (DecodeProgress(ev.data, &progress).ok()) {
      consumer_progress_.push_back(std::move(progress));
    } else {
      log_->warn("{}ignoring unreadable progress of follower '{}'; no cleanup this round", ident_, t.name);
      cleanup_failed_ = true;
    }
  } else {
    if (IsRetryable(ev.rc)) NoteRetry(ev.rc);
    cleanup_failed_ = true;
  }
  if (--consumers_pending_ == 0) FinishCleanupRound();
}

void ZkReplicator::DeleteBatch(const StreamKey& key, OutStream& s) {
  auto [id, live] = *s.live.begin();
  s.live.erase(s.live.begin());
  s.live_bytes -= live.bytes;
  retained_bytes_ -= live.bytes;
  // Marker first: nobody may find a marker whose chunks are gone.
  OpTag t = OpTag::Make(OpTag::Type::kDeleteBatch, key.first, key.second, id, 0);
  t.attempt = live.chunks;
  session_.Delete(MarkerPath(key.first, key.second, id), t);
  ++inflight_;
  for (uint32_t k = 1; k < live.chunks; ++k) {
    OpTag c = OpTag::Make(OpTag::Type::kDeleteBatch, key.first, key.second, id, k);
    c.attempt = live.chunks;
    session_.Delete(ChunkPath(key.first, key.second, id, k), c);
    ++inflight_;
  }
}

void ZkReplicator::FinishCleanupRound() {
  cleanup_inflight_ = false;
  size_t budget = kMaxDeletesPerRound;
  if (opts_.followers > 0 && !cleanup_failed_ && consumer_progress_.size() >= static_cast<size_t>(opts_.followers)) {
    for (auto& [key, s] : out_) {
      uint64_t min_next = UINT64_MAX;
      for (const auto& progress : consumer_progress_) {
        uint64_t n = 0;  // a follower without an entry has consumed nothing of this stream
        for (const auto& e : progress) {
          if (e.group == key.first && e.planner == key.second) n = e.next_batch_id;
        }
        min_next = std::min(min_next, n);
      }
      // Keep the last consumed batch: a restarted leader finds where the stream ends from it.
      const uint64_t keep_from = min_next == 0 ? 0 : min_next - 1;
      while (budget > 0 && !s.live.empty() && s.live.begin()->first < keep_from) {
        DeleteBatch(key, s);
        --budget;
      }
    }
  }
  // The byte budget protects the ZooKeeper servers' memory (they hold every znode in their
  // heap). With followers to wait for, it is enforced by flow control (HeldBack). Without,
  // the oldest batches go past it (a follower that reads anyway gets kNotFound); each stream
  // keeps its newest batch.
  while (opts_.followers == 0 && opts_.retain_bytes > 0 && retained_bytes_ > opts_.retain_bytes && budget > 0) {
    OutStream* fattest = nullptr;
    StreamKey fattest_key{};
    for (auto& [key, s] : out_) {
      if (s.live.size() > 1 && (fattest == nullptr || s.live_bytes > fattest->live_bytes)) {
        fattest = &s;
        fattest_key = key;
      }
    }
    if (fattest == nullptr || fattest->live_bytes == 0) break;
    if (!retention_warned_) {
      retention_warned_ = true;
      log_->warn("{}over replication.zookeeper.retain_bytes ({} bytes kept): deleting the oldest batches whether or "
                 "not followers read them",
                 ident_, retained_bytes_);
    }
    counters_.evicted.fetch_add(1, std::memory_order_relaxed);
    DeleteBatch(fattest_key, *fattest);
    --budget;
  }
}

}  // namespace qrstore::replication::zookeeper
