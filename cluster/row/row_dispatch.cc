// RowNode, what the peers send: each frame dispatched by kind (sub-slices, values, votes,
// reports, control and resume messages).
#include "cluster/row/row_node.h"

#include <algorithm>
#include <thread>
#include <tuple>
#include <utility>

#include "common/clock.h"
#include "common/logging.h"
#include "planner/eq.h"
#include "planner/row_planner.h"

namespace qrstore::cluster {

// ---- what the peers send ---------------------------------------------------------------------

void RowNode::OnFrame(uint32_t from, std::string_view frame) {
  last_heard_ns_[from].store(NowNanos(), std::memory_order_relaxed);
  if (Halted()) return;
  Status st = HandleFrame(from, frame);
  if (!st.ok()) {
    // Whatever the defect, the row cannot go on with this peer: the node fails, naming it.
    Fail(Status::Corruption("row peer " + std::to_string(from) + " (" + opt_.peer_addresses[from] + "): " + st.message()));
  }
}

Status RowNode::HandleFrame(uint32_t from, std::string_view frame) {
  auto kind = PeekRowMessage(frame);
  if (!kind.ok()) return kind.status();
  auto check_from = [&](uint32_t claimed) {
    return claimed == from ? Status::Ok()
                           : Status::Corruption("a message claiming to come from partition " + std::to_string(claimed));
  };
  switch (kind.value()) {
    case RowMsgKind::kSubSlice: {
      RowSubSlice m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      const std::string what = "sub-slice (" + std::to_string(m.batch) + ", " + std::to_string(m.slice) + "): ";
      if (m.slice / per_home_ != from || m.slice >= slices_) return Status::Corruption(what + "not one of its slices");
      {
        MutexLock lk(mu_);
        // A home plans batch b once b - batches_in_flight committed on it, which needs this
        // node's sub-slices of it, planned once b - 2 * batches_in_flight committed here.
        const uint64_t limit = committed_ + 2 * uint64_t{opt_.pipeline.batches_in_flight} + 2;
        if (m.batch >= limit) return Status::Corruption(what + "beyond the row's window (batches below " + std::to_string(limit) + ")");
        if (row_end_known_ && m.batch >= row_end_) return Status::Corruption(what + "at or past the row's end " + std::to_string(row_end_));
        const bool taken = m.batch < fed_batch_ || (m.batch == fed_batch_ && m.slice < fed_slice_);
        if (repeats_.load() && (taken || inbox_.count({m.batch, m.slice}) != 0)) {
          return Status::Ok();  // after a resume: a re-send of what this node has (the same bytes, by Rule 1)
        }
        if (m.batch < committed_ || inbox_.count({m.batch, m.slice}) != 0) return Status::Corruption(what + "sent twice");
      }
      Inbound in;
      const int64_t t0 = NowNanos();
      QR_RETURN_IF_ERROR(OpenRowSubSlice(m, opt_.pipeline.ranges, planner::RowPlace{opt_.partitions, opt_.partition}, &in.slice));
      in.plan_ns = NowNanos() - t0;
      if (opt_.replicate && opt_.replicate_input != !m.input.empty()) {
        return Status::Corruption(what + (m.input.empty() ? "without its home slice's input" : "with its home slice's input") +
                                  ": every node of the row must run the same replication.point (this one: " +
                                  (opt_.replicate_input ? "input" : opt_.replicate_writes ? "writes" : "plan") + ")");
      }
      if (opt_.replicate && opt_.replicate_input) {
        // The followers get the home slice's input and plan it themselves (row_input.h).
        in.bytes = EncodeRowMessage(RowHomeInput{m.batch, m.slice, m.from, std::move(m.input)});
      } else if (opt_.replicate) {
        in.bytes = std::move(m.slice_bytes);  // the followers get it as it came (reads included)
      }
      {
        MutexLock lk(mu_);
        inbox_.emplace(std::make_pair(m.batch, m.slice), std::move(in));
        if (static_cast<int64_t>(m.batch) > peer_opened_) {
          peer_opened_ = static_cast<int64_t>(m.batch);
          peer_opened_fast_.store(peer_opened_);
        }
      }
      cv_.notify_all();
      if (planner_) planner_->Kick();
      return Status::Ok();
    }
    case RowMsgKind::kHomeBundle:
      return Status::Corruption("a home bundle over the row transport (it is a home's log entry, never sent)");
    case RowMsgKind::kBatchEnd:
      return Status::Corruption("a batch-end record over the row transport (it is a leader's log entry, never sent)");
    case RowMsgKind::kHomeInput:
      return Status::Corruption("a home input over the row transport (it is a group's log entry, never sent)");
    case RowMsgKind::kBatchWrites:
      return Status::Corruption("a batch's writes over the row transport (it is a leader's log entry, never sent)");
    case RowMsgKind::kResume: {
      RowResume m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      if (opt_.failover_timeout_ms <= 0) return Status::Corruption("a resume, in a row without failover (no followers)");
      {
        MutexLock lk(mu_);
        if (m.answer) {
          if (!opt_.successor) return Status::Corruption("an answer to a resume this node never sent");
          answers_[from] = m;
        } else {
          if (resumes_.size() >= nparts_) return Status::Corruption("more resumes than the row has peers");
          resumes_.push_back(ResumeRequest{from, std::move(m)});
        }
      }
      cv_.notify_all();
      return Status::Ok();
    }
    case RowMsgKind::kDepValues: {
      RowDepValues m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      if (opt_.replicate) QR_RETURN_IF_ERROR(RecordValues(m));  // before any executor can use one
      for (const RowDepValue& v : m.values) pipeline_->DeliverDepValue(m.batch, m.slice, v.slot, v.value, from);
      return Status::Ok();
    }
    case RowMsgKind::kVotes: {
      RowVotes m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      pipeline_->DeliverVotes(m.batch, from, m.round, std::move(m.ids));
      return Status::Ok();
    }
    case RowMsgKind::kReport: {
      RowReport m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      if (m.slice / per_home_ != opt_.partition || m.slice >= slices_) {
        return Status::Corruption("a report of slice " + std::to_string(m.slice) + ", not one this home planned");
      }
      commit_->Report(from, m.batch, m.slice, std::move(m.report));
      return commit_->health();
    }
    case RowMsgKind::kControl: {
      RowControl m;
      QR_RETURN_IF_ERROR(DecodeRowMessage(frame, &m));
      QR_RETURN_IF_ERROR(check_from(m.from));
      if (m.what == RowControlKind::kHeartbeat) return Status::Ok();
      if (m.what == RowControlKind::kDurable) {
        TrimRetained(from, m.batch);
        return Status::Ok();
      }
      if (m.what == RowControlKind::kFinished) {
        {
          MutexLock lk(mu_);
          finished_[from] = 1;
        }
        transport_->ExpectClose(from);  // it closes once the whole row finished
        cv_.notify_all();
        return Status::Ok();
      }
      bool known = false;
      uint64_t row_end = 0;
      {
        MutexLock lk(mu_);
        if (ends_[from] >= 0) return Status::Corruption("its input ended twice");
        known = NoteEndLocked(from, m.batch);
        row_end = row_end_;
      }
      cv_.notify_all();
      if (planner_) planner_->Kick();
      if (known) pipeline_->EndInput(row_end);
      Logger("row")->info("[partition {}] partition {}'s input ended at batch {}", opt_.partition, from, m.batch);
      if (on_row_ending_) on_row_ending_(from);
      MaybeFinish();
      return Status::Ok();
    }
  }
  return Status::Corruption("unknown row message");
}

}  // namespace qrstore::cluster
