// RowNode, the part that failover inside a row needs (docs/partitioned-rows.md 9.5): what a
// node keeps for a peer's successor (Retained, the kDurable trim, a follower's kept frames), a
// lost peer and the wait for its successor, a peer's resume, a successor's start (its inbox seeded
// from its group's log, the handshake), and the crash hook the failover tests place. The rest of
// RowNode is in row_node.cc; the class is one (cluster/row/row_node.h).
#include "cluster/row/row_node.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cluster/row/row_input.h"
#include "common/clock.h"
#include "common/logging.h"

namespace qrstore::cluster {

namespace {
// What a leader with followers keeps for a re-send to one peer's successor (Retained): its peer
// confirms batches durable every batches_in_flight batches, so this is far more than the few
// batches' frames it normally holds; reaching it means that peer's group stopped confirming.
constexpr size_t kMaxRetainedBytes = size_t{256} << 20;
}  // namespace

bool RowNode::SendToPeer(uint32_t to, uint64_t batch, std::string frame) {
  if (retained_.empty()) return transport_->Send(to, frame);
  if (to == opt_.partition) return true;  // a follower's report of its own home's slice: nobody's
  // Kept before it is sent: a successor of `to` may need it whether or not this send goes through.
  std::shared_ptr<const std::string> kept = Retain(to, batch, std::move(frame));
  if (Halted()) return false;
  if (transport_ == nullptr) return true;  // a follower: kept only
  return transport_->Send(to, *kept);  // `kept` outlives the send, whatever a trim does meanwhile
}

std::shared_ptr<const std::string> RowNode::Retain(uint32_t to, uint64_t batch, std::string frame) {
  auto kept = std::make_shared<const std::string>(std::move(frame));
  Retained& r = *retained_[to];
  size_t bytes = 0;
  {
    MutexLock lk(r.mu);
    if (batch >= r.from) {
      r.frames.emplace(batch, kept);
      r.bytes += kept->size();
    }
    bytes = r.bytes;
  }
  if (bytes > kMaxRetainedBytes) {
    Fail(Status::ResourceExhausted("row peer " + std::to_string(to) + " (" + opt_.peer_addresses[to] + "): " +
                                   std::to_string(bytes) + " bytes kept for a re-send to its successor, more than " +
                                   std::to_string(kMaxRetainedBytes) + ": its group stopped confirming batches durable"));
  }
  return kept;
}

// ---- failover: a peer's successor resumes its place (docs/partitioned-rows.md 9.5) ------------

void RowNode::OnPeerLost(uint32_t p, const Status& why) {
  {
    MutexLock lk(mu_);
    if (lost_ns_[p] != 0 || finished_[p] != 0) return;
    lost_ns_[p] = NowNanos();
  }
  Logger("row")->warn("[partition {}] {}: waiting up to {} ms for its group's successor to resume its place",
                      opt_.partition, why.message(), opt_.failover_timeout_ms);
  cv_.notify_all();
}

void RowNode::ResumeLoop() {
  for (;;) {
    ResumeRequest req;
    {
      MutexUniqueLock lk(mu_);
      cv_.wait(lk.native(), [&]() REQUIRES(mu_) { return Halted() || !resumes_.empty(); });
      if (Halted()) return;
      req = std::move(resumes_.front());
      resumes_.pop_front();
    }
    Resumed(req.from, req.msg);
  }
}

void RowNode::Resumed(uint32_t from, const RowResume& m, bool dialed) {
  auto log = Logger("row");
  {
    MutexLock lk(mu_);
    if (m.term <= peer_term_[from]) {
      log->warn("[partition {}] a stale resume of partition {} (term {}, {} seen): ignored", opt_.partition, from, m.term,
                peer_term_[from]);
      return;
    }
    peer_term_[from] = m.term;
    // Its predecessor's announced input end (if any) is not the successor's: it announces its own.
    if (!row_end_known_) ends_[from] = -1;
  }
  // What the predecessor sent and was not used may come from its own home slices that never
  // reached its group's log (docs 9.3): dropped; the successor sends its own. Everything from now
  // on may repeat what this node has.
  std::vector<executor::ExecutorStage::Forgotten> dropped;
  const size_t forgotten = pipeline_->ForgetFrom(from, m.batch, &dropped);
  if (!dropped.empty()) {
    // Rule 2: those values were recorded for their batch's record when they came; the record
    // must not carry them either, or a follower replaying it finds a value for a slot its log's
    // sub-slice lacks (a padded one) or gets it twice (the successor re-sends its own).
    MutexLock lk(rec_mu_);
    for (const auto& f : dropped) {
      auto it = rec_values_.find(f.batch);
      if (it == rec_values_.end()) continue;
      auto& v = it->second;
      v.erase(std::remove_if(v.begin(), v.end(),
                             [&](const RowBatchEndValue& x) { return x.slice == f.slice && x.slot == f.slot; }),
              v.end());
    }
  }
  pipeline_->AcceptRepeats();
  {
    MutexLock lk(mu_);
    if (!repeats_.load()) commit_->AcceptRepeats(0);
    repeats_.store(true);
  }
  if (Status st = dialed ? Status::Ok() : transport_->Redial(from, m.address, opt_.connect_timeout_ms); !st.ok()) {
    Fail(Status::Unavailable("partition " + std::to_string(from) + "'s successor at " + m.address +
                             " resumed, but this node cannot reach it: " + st.message()));
    return;
  }
  RowResume answer;
  answer.from = opt_.partition;
  answer.answer = true;
  answer.term = m.term;
  {
    MutexLock lk(mu_);
    answer.batch = committed_;
  }
  {
    MutexLock lk(home_mu_);
    answer.reports = next_home_batch_;
  }
  transport_->Send(from, EncodeRowMessage(answer));
  // What this node sent the predecessor from the successor's first batch on, in batch order.
  size_t resent = 0;
  for (const auto& [b, frame] : RetainedFrames(from)) {
    if (b < m.batch) continue;
    transport_->Send(from, frame);
    ++resent;
  }
  {
    MutexLock lk(mu_);
    lost_ns_[from] = 0;
  }
  last_heard_ns_[from].store(NowNanos(), std::memory_order_relaxed);
  resumes_done_.fetch_add(1);
  log->info("[partition {}] partition {}'s successor at {} (term {}) resumed at batch {}: {} unused values and votes "
            "of its predecessor dropped, {} frames re-sent; this node at batch {}, home slices answered below {}",
            opt_.partition, from, m.address, m.term, m.batch, forgotten, resent, answer.batch, answer.reports);
}

Status RowNode::SeedFromLog() {
  const uint64_t d = opt_.pipeline.first_batch;
  const planner::RowPlace place{opt_.partitions, opt_.partition};
  MutexLock lk(mu_);
  for (uint32_t s = 0; s < slices_; ++s) {
    const auto& entries = opt_.resume.entries[s];
    if (entries.size() != opt_.resume.next[s] - std::min(opt_.resume.next[s], d)) {
      return Status::InvalidArgument("stream " + std::to_string(s) + ": " + std::to_string(entries.size()) +
                                     " entries from batch " + std::to_string(d) + " to its end " +
                                     std::to_string(opt_.resume.next[s]));
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      const uint64_t b = d + i;
      const std::string where = "the log's entry of batch " + std::to_string(b) + ", stream " + std::to_string(s) + ": ";
      Inbound in;
      RowSubSlice sub{b, s, s / per_home_, entries[i], {}};
      if (opt_.replicate_input) {
        // Every entry is a home slice's input: planned again, it gives the parts its home sent.
        HomeInputParts planned;
        if (Status st = PlanHomeInput(entries[i], b, s, per_home_, opt_.partitions, opt_.pipeline.ranges, &planned);
            !st.ok()) {
          return Status::Corruption(where + st.message());
        }
        if (OwnStream(s)) {
          for (uint32_t p = 0; p < nparts_; ++p) {
            if (p != opt_.partition) {
              Retain(p, b, EncodeRowMessage(RowSubSlice{b, s, opt_.partition, planned.parts[p], planned.input}));
            }
          }
        }
        sub.slice_bytes = std::move(planned.parts[opt_.partition]);
      } else if (OwnStream(s)) {
        RowHomeBundle hb;
        Status st = DecodeRowMessage(entries[i], &hb);
        if (st.ok() && (hb.batch != b || hb.slice != s || hb.from != opt_.partition || hb.parts.size() != nparts_)) {
          st = Status::Corruption("a home bundle of another home slice");
        }
        if (!st.ok()) return Status::Corruption(where + st.message());
        for (uint32_t p = 0; p < nparts_; ++p) {
          if (p != opt_.partition) Retain(p, b, EncodeRowMessage(RowSubSlice{b, s, opt_.partition, hb.parts[p], {}}));
        }
        sub.slice_bytes = std::move(hb.parts[opt_.partition]);
      }
      if (Status st = OpenRowSubSlice(sub, opt_.pipeline.ranges, place, &in.slice); !st.ok()) {
        return Status::Corruption(where + st.message());
      }
      inbox_.emplace(std::make_pair(b, s), std::move(in));
      if (!OwnStream(s) && static_cast<int64_t>(b) > peer_opened_) {
        peer_opened_ = static_cast<int64_t>(b);
        peer_opened_fast_.store(peer_opened_);
      }
    }
  }
  return Status::Ok();
}

void RowNode::ResumeWhileHandshaking(const std::vector<std::string>& dialed) {
  while (!resumes_.empty() && !Halted()) {
    ResumeRequest req = std::move(resumes_.front());
    resumes_.pop_front();
    mu_.Unlock();  // held again before returning, as the caller's lock expects
    // The handshake dialed every peer's leader: a peer's successor at the address dialed needs
    // no new connection (a redial would also count its connection in as lost, and it dials in
    // once only). Before the handshake's own re-sends: both are repeats the receiver drops.
    Resumed(req.from, req.msg, req.from < dialed.size() && dialed[req.from] == req.msg.address);
    mu_.Lock();
  }
}

Status RowNode::Handshake() {
  auto log = Logger("row");
  const uint64_t d = opt_.pipeline.first_batch;
  std::vector<std::string> dialed(nparts_);  // [peer] the address its leader was dialed at
  if (opt_.resume.candidates.empty()) {
    QR_RETURN_IF_ERROR(transport_->DialAll(opt_.connect_timeout_ms));
    for (uint32_t p = 0; p < nparts_; ++p) dialed[p] = opt_.peer_addresses[p];
  } else {
    // Each peer partition's leader now: the member whose row port answers (a follower listens on
    // none, a dead leader's is closed), tried in turn until the deadline.
    const int64_t deadline = NowNanos() + opt_.connect_timeout_ms * 1'000'000;
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p == opt_.partition) continue;
      const auto& cands = opt_.resume.candidates.at(p);
      Status st = Status::Unavailable("no member of its group listed");
      for (size_t i = 0; !cands.empty() && !Halted(); i = (i + 1) % cands.size()) {
        st = transport_->DialCurrent(p, cands[i], 300);
        if (st.ok()) {
          dialed[p] = cands[i];
          break;
        }
        if (NowNanos() >= deadline) break;
        if (i + 1 == cands.size()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!st.ok()) {
        return Status::Unavailable("row peer partition " + std::to_string(p) + ": no member of its group took a row "
                                   "connection within " + std::to_string(opt_.connect_timeout_ms) + " ms: " +
                                   st.message());
      }
    }
  }
  const RowResume resume{opt_.partition, false, opt_.term, d, 0, opt_.peer_addresses[opt_.partition]};
  Broadcast(EncodeRowMessage(resume));
  QR_RETURN_IF_ERROR(transport_->WaitDialedIn(opt_.connect_timeout_ms));
  std::map<uint32_t, RowResume> answers;
  {
    MutexUniqueLock lk(mu_);
    // A peer that is a successor too (two partitions failing over at once) answers only after
    // it answered this node's resume: answered here, not on the row-resume thread (not started
    // yet), or both would wait for each other until the time-out.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opt_.connect_timeout_ms);
    for (;;) {
      ResumeWhileHandshaking(dialed);
      if (!cv_.wait_until(lk.native(), deadline, [&]() REQUIRES(mu_) {
            return Halted() || answers_.size() + 1 == nparts_ || !resumes_.empty();
          })) {
        break;
      }
      if (Halted() || answers_.size() + 1 == nparts_) break;
    }
    // A peer's resume comes before its answer on the same connection: every one queued now.
    ResumeWhileHandshaking(dialed);
    if (answers_.size() + 1 != nparts_ || Halted()) {
      std::string missing;
      for (uint32_t p = 0; p < nparts_; ++p) {
        if (p != opt_.partition && answers_.count(p) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
      return Halted() ? health_ : Status::Unavailable("row peers " + missing + " did not answer the resume within " +
                                                        std::to_string(opt_.connect_timeout_ms) + " ms");
    }
    answers = answers_;
  }
  // What its predecessor owed each peer and the peer may lack: its home's parts and the values
  // from the peer's committed batch on, the reports of the peer's home slices not answered yet.
  for (const auto& [q, a] : answers) {
    size_t resent = 0;
    uint64_t oldest = UINT64_MAX;
    for (const auto& [b, frame] : RetainedFrames(q)) {
      oldest = std::min(oldest, b);
      const bool report = PeekRowMessage(frame).value() == RowMsgKind::kReport;
      if (b < (report ? a.reports : a.batch)) continue;
      transport_->Send(q, frame);
      ++resent;
    }
    if (std::min(a.batch, a.reports) < std::min(oldest, d)) {
      log->warn("[partition {}] row peer {} is at batch {} (home slices answered below {}), but this node keeps what "
                "its predecessor sent it from batch {} only: it may wait for what was lost",
                opt_.partition, q, a.batch, a.reports, std::min(oldest, d));
    }
    log->info("[partition {}] resumed with row peer {} (at batch {}, home slices answered below {}): {} frames re-sent",
              opt_.partition, q, a.batch, a.reports, resent);
  }
  log->info("[partition {}] resumed its place in the row at batch {} (term {}); plans from batch {}", opt_.partition, d,
            opt_.term, first_own_);
  return Status::Ok();
}

void RowNode::TrimRetained(uint32_t from, uint64_t batch) {
  if (retained_.empty() || (opt_.keep_all_sent && !opt_.follower)) return;
  Retained& r = *retained_[from];
  MutexLock lk(r.mu);
  if (batch <= r.from) return;
  r.from = batch;
  for (auto it = r.frames.begin(); it != r.frames.end() && it->first < batch; it = r.frames.erase(it)) {
    r.bytes -= it->second->size();
  }
}

uint64_t RowNode::durable_batch() const {
  MutexLock lk(mu_);
  return std::min(committed_, records_next_);
}

size_t RowNode::retained_bytes(uint32_t p) const {
  if (retained_.empty()) return 0;
  MutexLock lk(retained_[p]->mu);
  return retained_[p]->bytes;
}

std::vector<std::pair<uint64_t, std::string>> RowNode::RetainedFrames(uint32_t p) const {
  std::vector<std::pair<uint64_t, std::string>> out;
  if (retained_.empty()) return out;
  MutexLock lk(retained_[p]->mu);
  for (const auto& [b, f] : retained_[p]->frames) out.emplace_back(b, *f);
  return out;
}

uint64_t RowNode::retained_from(uint32_t p) const {
  if (retained_.empty()) return 0;
  MutexLock lk(retained_[p]->mu);
  return retained_[p]->from;
}

void RowNode::MaybeSendDurable() {
  if (retained_.empty()) return;
  uint64_t durable = 0;
  {
    MutexLock lk(mu_);
    durable = std::min(committed_, records_next_);
    // Every batches_in_flight batches: a small message per few batches, and a peer keeps at most
    // about that many batches' frames beyond its window for a re-send.
    if (durable < durable_sent_ + std::max<uint64_t>(1, opt_.pipeline.batches_in_flight)) return;
    durable_sent_ = durable;
  }
  Broadcast(EncodeRowMessage(RowControl{opt_.partition, RowControlKind::kDurable, durable}));
}

void RowNode::MaybeCrash(const char* step, uint64_t b) const {
  if (opt_.crash_step.empty() || b < opt_.crash_batch || opt_.crash_step != step) return;
  std::fprintf(stderr, "row test hook: partition %u kills itself (SIGKILL) at step %s of batch %llu\n", opt_.partition,
               step, static_cast<unsigned long long>(b));
  std::fflush(stderr);
  std::raise(SIGKILL);
}

void RowNode::KeepBundle(const RowHomeBundle& bundle, const std::string& input) {
  QR_CHECK(opt_.follower, "KeepBundle on a leader");
  for (uint32_t p = 0; p < nparts_ && p < bundle.parts.size(); ++p) {
    if (p == opt_.partition) continue;
    // The frame exactly as the leader sent it (EmitHomeSlice encodes the same message).
    SendToPeer(p, bundle.batch,
               EncodeRowMessage(RowSubSlice{bundle.batch, bundle.slice, bundle.from, bundle.parts[p], input}));
  }
}

void RowNode::KeepVotes(const RowBatchEnd& record) {
  QR_CHECK(opt_.follower, "KeepVotes on a leader");
  for (uint32_t round = 0; round < record.votes.size(); ++round) {
    const std::string frame = EncodeRowMessage(RowVotes{record.batch, opt_.partition, round, record.votes[round]});
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p != opt_.partition) SendToPeer(p, record.batch, frame);
    }
  }
}

void RowNode::KeepWrites(const RowBatchWrites& entry) {
  QR_CHECK(opt_.follower, "KeepWrites on a leader");
  const uint64_t b = entry.end.batch;
  // The values as one frame per (peer, slice): the leader may have split them otherwise, which a
  // receiver cannot tell (it takes each value once, by slot).
  for (size_t i = 0; i < entry.sent.size();) {
    RowDepValues m{b, entry.sent[i].slice, {}};
    const uint32_t to = entry.sent[i].to;
    for (; i < entry.sent.size() && entry.sent[i].to == to && entry.sent[i].slice == m.slice; ++i) {
      m.values.push_back(RowDepValue{entry.sent[i].slot, entry.sent[i].value});
    }
    if (to < nparts_ && to != opt_.partition) SendToPeer(to, b, EncodeRowMessage(m));
  }
  for (const std::string& frame : entry.reports) {
    RowReport r;
    if (!DecodeRowMessage(frame, &r).ok() || r.slice >= slices_) continue;  // the reader checked it
    const uint32_t home = r.slice / per_home_;
    if (home != opt_.partition) SendToPeer(home, b, frame);
  }
}

}  // namespace qrstore::cluster
