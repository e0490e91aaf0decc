// The Core's log prefix (core.h): compaction, the members it leaves behind (stranded, and
// what flow control counts), and the snapshot offers that bring them back. The rest of the
// Core (elections, the append protocol, Ready/Advance) is in core.cc.
#include <algorithm>
#include <utility>

#include "common/check.h"
#include "replication/raft/core.h"

namespace qrstore::replication::raft {

// ---- Snapshots ----

void Core::SendSnapshot(Progress* p) {
  Message m = NewMessage(MessageType::kSnapshotRequest, p->id);
  m.log_index = first_index_ - 1;
  m.log_term = prev_term_;
  m.commit = commit_;
  m.hint = snapshot_tag_;
  p->last_sent_tick = ticks_;
  stats_.snapshots_sent++;
  Send(std::move(m));
}

void Core::StepSnapshotRequest(const Message& m) {
  if (role_ == Role::kLeader) {
    stats_.messages_ignored++;  // two leaders in one term cannot happen
    return;
  }
  if (role_ == Role::kCandidate) BecomeFollower(term_, m.from);
  pre_campaign_ = false;
  if (leader_ != m.from) snapshot_offer_.reset();
  leader_ = m.from;
  ResetElectionTimer();
  stranded_log_start_ = m.log_index + 1;

  Message r = NewMessage(MessageType::kAppendResponse, m.from);
  r.log_index = m.log_index;
  if (m.log_index < commit_ || TermAt(m.log_index) == m.log_term) {
    // Nothing to install: this log holds what the leader's does up to there (committed, or the
    // same term at m.log_index). The leader goes on with appends from the match.
    snapshot_offer_.reset();
    stranded_log_start_ = 0;
    r.hint = m.log_index < commit_ ? commit_ : m.log_index;
    Send(std::move(r));
    return;
  }
  snapshot_offer_ = SnapshotOffer{m.from, m.term, m.log_index, m.log_term, m.hint};
  r.reject = true;
  r.hint = last_index() + 1;
  Send(std::move(r));
}

void Core::InstallSnapshot() {
  QR_CHECK(snapshot_offer_.has_value(), "InstallSnapshot without an offer");
  QR_CHECK(!ready_outstanding_, "InstallSnapshot with a Ready outstanding");
  const SnapshotOffer o = *snapshot_offer_;
  snapshot_offer_.reset();
  if (role_ != Role::kFollower || o.leader != leader_ || o.term != term_ || o.index < commit_) return;
  entries_.clear();
  end_bytes_.clear();
  base_bytes_ = 0;
  first_index_ = o.index + 1;
  prev_term_ = o.index_term;
  commit_ = applied_ = o.index;
  persisted_ = handed_ = pending_persisted_ = o.index;
  stranded_log_start_ = 0;
  snapshot_installed_ = SnapshotPoint{o.index, o.index_term};
  stats_.snapshots_installed++;
  Message r = NewMessage(MessageType::kAppendResponse, leader_);
  r.log_index = o.index;
  r.hint = o.index;
  Send(std::move(r));
}

// ---- Compaction ----

void Core::Compact(Index upto) {
  QR_CHECK_LE(upto, applied_);
  if (upto < first_index_) return;
  prev_term_ = *TermAt(upto);
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(upto - first_index_ + 1));
  base_bytes_ = end_bytes_[upto - first_index_];
  end_bytes_.erase(end_bytes_.begin(), end_bytes_.begin() + static_cast<std::ptrdiff_t>(upto - first_index_ + 1));
  first_index_ = upto + 1;
}

Index Core::compactable_index() const {
  Index upto = applied_;
  if (role_ == Role::kLeader) {
    for (const auto& p : progress_) upto = std::min(upto, p.match);
  }
  return upto;
}

uint64_t Core::BytesAfter(Index index) const {
  const uint64_t last_end = end_bytes_.empty() ? base_bytes_ : end_bytes_.back();
  if (index < first_index_) return last_end - base_bytes_;  // compacted: at least everything held
  if (index > last_index()) return 0;
  return last_end - end_bytes_[index - first_index_];
}

bool Core::Live(const Progress& p) const {
  return ticks_ - p.last_heard_tick <= 2 * static_cast<int64_t>(options_.election_ticks);
}

uint64_t Core::quorum_lag_bytes() const {
  if (role_ != Role::kLeader) return 0;
  // The lags of the followers that can still count toward a quorum: live (heard from within
  // 2 election timeouts) and not stranded (their next entry is still in this log).
  std::vector<uint64_t> lags;
  lags.reserve(progress_.size());
  for (const auto& p : progress_) {
    if (Live(p) && p.next >= first_index_) lags.push_back(BytesAfter(p.match));
  }
  // A commit needs Quorum() - 1 followers besides the leader: the best-placed ones. Whoever
  // is behind them is not needed, and must never hold the group back.
  const size_t needed = Quorum() - 1;
  if (needed == 0 || lags.empty()) return 0;
  std::sort(lags.begin(), lags.end());
  return lags[std::min(needed, lags.size()) - 1];
}

std::vector<MemberProgress> Core::member_progress() const {
  std::vector<MemberProgress> out;
  if (role_ != Role::kLeader) return out;
  for (const auto& p : progress_) {
    out.push_back({p.id, p.match, BytesAfter(p.match), Live(p), p.next < first_index_});
  }
  return out;
}

std::vector<NodeId> Core::lagging_members() const {
  std::vector<NodeId> out;
  if (role_ != Role::kLeader) return out;
  for (const auto& p : progress_) {
    if (p.next < first_index_) out.push_back(p.id);
  }
  return out;
}

Index Core::match_index(NodeId member) const {
  if (role_ != Role::kLeader) return 0;
  if (member == options_.id) return persisted_;
  const Progress* p = FindProgress(member);
  return p ? p->match : 0;
}

}  // namespace qrstore::replication::raft
