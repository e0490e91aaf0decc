// RowNode, the home's side: a home slice planned here is emitted (Rule 1: its bundle to its
// group first), its parts sent to the peers once confirmed, the input's end told to the row.
#include "cluster/row/row_node.h"

#include <algorithm>
#include <thread>
#include <tuple>
#include <utility>

#include "common/clock.h"
#include "common/logging.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/row_planner.h"

namespace qrstore::cluster {

// ---- the home's side: planning ----------------------------------------------------------------

bool RowNode::BeginHomeSlice(uint64_t b, uint32_t) {
  // The node's batch window: batch b is planned once b - batches_in_flight committed here.
  MutexUniqueLock lk(mu_);
  cv_.wait(lk.native(), [&]() REQUIRES(mu_) { return Halted() || committed_ + opt_.pipeline.batches_in_flight > b; });
  return !Halted();
}

bool RowNode::PeerOpened(uint64_t b) const { return peer_opened_fast_.load() >= static_cast<int64_t>(b); }

void RowNode::HomeSlicePlanned(uint64_t b, uint32_t planner, std::vector<planner::PlannedSlice>* subs,
                               std::vector<storage::Txn>* txns, int64_t plan_ns) {
  const uint32_t s = opt_.partition * per_home_ + planner;
  // Under replication.point = input the home slice goes to the groups as its input: encoded
  // before the txns move on to the commit.
  std::string input = opt_.replicate && opt_.replicate_input ? planner::EncodeInputSlice(b, s, *txns) : std::string();
  commit_->Plan(b, s, std::move(*txns));
  EmitHomeSlice(b, planner, subs, plan_ns, std::move(input));
}

void RowNode::EmitHomeSlice(uint64_t b, uint32_t planner, std::vector<planner::PlannedSlice>* subs, int64_t plan_ns,
                            std::string input) {
  const uint32_t s = opt_.partition * per_home_ + planner;
  if (!opt_.replicate) {
    // No followers: nothing to make durable first; the parts go out at once.
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p == opt_.partition) continue;
      transport_->Send(p, EncodeRowMessage(RowSubSlice{b, s, opt_.partition, planner::EncodeSlice((*subs)[p]), {}}));
    }
  }
  // Rule 1: the whole home slice goes to this home's group first; its parts leave for the peers
  // once that is confirmed (MarkReplicated). Its own part runs at once, speculatively.
  std::string bundle;
  HomeSend send;
  if (opt_.replicate && opt_.replicate_input) {
    // The group gets the input, each peer its part with the input (its group logs the input).
    send.batch = b;
    send.frames.resize(nparts_);
    for (uint32_t p = 0; p < nparts_; ++p) {
      if (p != opt_.partition) {
        send.frames[p] = EncodeRowMessage(RowSubSlice{b, s, opt_.partition, planner::EncodeSlice((*subs)[p]), input});
      }
    }
    bundle = EncodeRowMessage(RowHomeInput{b, s, opt_.partition, std::move(input)});
  } else if (opt_.replicate) {
    RowHomeBundle hb{b, s, opt_.partition, std::vector<std::string>(nparts_)};
    send.batch = b;
    send.frames.resize(nparts_);
    for (uint32_t p = 0; p < nparts_; ++p) {
      const planner::PlannedSlice& sub = (*subs)[p];
      if (p == opt_.partition) {
        // Reads count in the cascade when the slice may abort: followers need them then.
        hb.parts[p] = planner::EncodeSlice(sub, sub.may_abort ? planner::SliceEncoding::kFull : planner::SliceEncoding::kWithoutReads);
      } else {
        hb.parts[p] = planner::EncodeSlice(sub);  // as the peer gets it (a later leader re-sends these bytes)
        send.frames[p] = EncodeRowMessage(RowSubSlice{b, s, opt_.partition, hb.parts[p], {}});
      }
    }
    bundle = EncodeRowMessage(hb);
  }
  {
    MutexLock lk(mu_);
    Inbound& in = inbox_[{b, s}];
    std::swap(in.slice, (*subs)[opt_.partition]);
    in.plan_ns = plan_ns;
    if (opt_.replicate) held_[{b, s}] = std::move(send);
  }
  cv_.notify_all();
  if (opt_.replicate) {
    MaybeCrash("before_bundle", b);
    opt_.replicate(b, s, std::move(bundle));  // this stream's batches come in order: one planner
    MaybeCrash("bundle_proposed", b);
  }
}

void RowNode::MarkReplicated(uint64_t batch, uint32_t slice) {
  if (opt_.replicate && slice == batch_end_stream()) {
    pipeline_->MarkBatchEnd(batch);
    {
      MutexLock lk(mu_);
      if (batch >= records_next_) records_early_.insert(batch);
      while (!records_early_.empty() && *records_early_.begin() == records_next_) {
        records_early_.erase(records_early_.begin());
        ++records_next_;
      }
    }
    // The peers hear of it at the next commit (MaybeSendDurable): not from this thread, the
    // replication backend's, which must never wait on a row peer's socket.
    return;
  }
  if (!opt_.replicate || !OwnStream(slice)) {
    pipeline_->MarkReplicated(batch, slice);
    return;
  }
  bool published = false;
  {
    MutexLock lk(mu_);
    if (auto h = held_.find({batch, slice}); h != held_.end()) {
      to_send_.push_back(std::move(h->second));
      held_.erase(h);
    }
    // The pipeline takes the confirmation only for a slice it holds: before the feed published
    // it, the feed passes it on.
    published = published_own_.erase({batch, slice}) != 0;
    if (!published) replicated_early_.insert({batch, slice});
  }
  cv_.notify_all();
  if (published) pipeline_->MarkReplicated(batch, slice);
}

void RowNode::SendLoop() {
  for (;;) {
    HomeSend hs;
    {
      MutexUniqueLock lk(mu_);
      cv_.wait(lk.native(), [&]() REQUIRES(mu_) { return Halted() || !to_send_.empty(); });
      if (Halted()) return;
      hs = std::move(to_send_.front());
      to_send_.pop_front();
    }
    MaybeCrash("before_send", hs.batch);
    for (uint32_t p = 0; p < hs.frames.size(); ++p) {
      if (!hs.frames[p].empty() && !SendToPeer(p, hs.batch, std::move(hs.frames[p]))) return;  // failed or stopped
    }
    MaybeCrash("after_send", hs.batch);
  }
}

bool RowNode::NoteEndLocked(uint32_t who, uint64_t b) {
  ends_[who] = static_cast<int64_t>(b);
  if (row_end_known_) return false;
  int64_t end = 0;
  for (int64_t e : ends_) {
    if (e < 0) return false;
    end = std::max(end, e);
  }
  row_end_known_ = true;
  row_end_ = static_cast<uint64_t>(end);
  Logger("row")->info("[partition {}] the row ends at batch {}", opt_.partition, row_end_);
  return true;
}

void RowNode::InputEnded(uint64_t b) {
  // Stop() closes the planner's input too: a node that stops (or failed) tells the row nothing.
  if (Halted()) return;
  bool known = false;
  uint64_t row_end = 0;
  {
    MutexLock lk(mu_);
    known = NoteEndLocked(opt_.partition, b);
    row_end = row_end_;
  }
  cv_.notify_all();
  if (known) pipeline_->EndInput(row_end);
  Logger("row")->info("[partition {}] input ended at batch {}: telling the row", opt_.partition, b);
  Broadcast(EncodeRowMessage(RowControl{opt_.partition, RowControlKind::kInputEnded, b}));
  MaybeFinish();
}

bool RowNode::NeedBatch(uint64_t b) {
  MutexUniqueLock lk(mu_);
  const auto bb = static_cast<int64_t>(b);
  cv_.wait(lk.native(),
           [&]() REQUIRES(mu_) { return Halted() || peer_opened_ >= bb || (row_end_known_ && row_end_ <= b); });
  return !Halted() && peer_opened_ >= bb;
}

void RowNode::Broadcast(const std::string& frame) {
  if (!transport_) return;  // a follower has no row peers
  for (uint32_t p = 0; p < nparts_; ++p) {
    if (p != opt_.partition) transport_->Send(p, frame);
  }
}

}  // namespace qrstore::cluster
