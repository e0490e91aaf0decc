#include "replication/raft/core.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "common/check.h"
#include "common/hash.h"

namespace qrstore::replication::raft {

uint64_t EntryChecksum(std::string_view bytes) {
  constexpr uint64_t kSeed = 0x72616674656e7431ULL;  // "raftent1"
  return BulkHash64(bytes.data(), bytes.size(), kSeed);
}

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kVoteRequest: return "VoteRequest";
    case MessageType::kVoteResponse: return "VoteResponse";
    case MessageType::kAppendRequest: return "AppendRequest";
    case MessageType::kAppendResponse: return "AppendResponse";
    case MessageType::kPreVoteRequest: return "PreVoteRequest";
    case MessageType::kPreVoteResponse: return "PreVoteResponse";
    case MessageType::kSnapshotRequest: return "SnapshotRequest";
  }
  return "Unknown";
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kFollower: return "follower";
    case Role::kCandidate: return "candidate";
    case Role::kLeader: return "leader";
  }
  return "unknown";
}

namespace {

// Each member gets its own timeout sequence even if the driver hands every member the same
// seed: identical sequences would make split votes repeat forever.
uint64_t CoreSeed(const CoreOptions& o) {
  return Mix64(o.seed ^ Mix64((static_cast<uint64_t>(o.group) << 32) | o.id));
}

}  // namespace

Core::Core(CoreOptions options, PersistentState restored)
    : options_(std::move(options)), rng_(CoreSeed(options_)) {
  election_ticks_ = options_.election_ticks;
  QR_CHECK(options_.election_ticks > 0 && options_.heartbeat_ticks > 0 &&
               options_.heartbeat_ticks < options_.election_ticks,
           "election_ticks %d must exceed heartbeat_ticks %d > 0", options_.election_ticks,
           options_.heartbeat_ticks);
  QR_CHECK(options_.max_inflight_appends > 0, "max_inflight_appends must be > 0");
  QR_CHECK(IsMember(options_.id), "member %u is not in its own member list", options_.id);
  {
    std::vector<NodeId> sorted = options_.members;
    std::sort(sorted.begin(), sorted.end());
    QR_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
             "duplicate member id");
    QR_CHECK(std::find(sorted.begin(), sorted.end(), kNoNode) == sorted.end(),
             "member id kNoNode is reserved");
  }

  // The restored log must be well formed: consecutive indexes, non-decreasing terms.
  QR_CHECK_GE(restored.first_index, 1u);
  QR_CHECK(restored.first_index > 1 || restored.prev_term == 0, "prev_term of index 0 must be 0");
  first_index_ = restored.first_index;
  prev_term_ = restored.prev_term;
  Term t = prev_term_;
  for (size_t i = 0; i < restored.entries.size(); ++i) {
    Entry& e = restored.entries[i];
    QR_CHECK_EQ(e.index, first_index_ + i);
    QR_CHECK_GE(e.term, t);
    t = e.term;
    end_bytes_.push_back((end_bytes_.empty() ? 0 : end_bytes_.back()) + e.data.size());
    entries_.push_back(std::move(e));
  }

  // A crash between persisting entries and the hard state can leave entries of a term newer
  // than the persisted term. No vote in that newer term was ever made durable (it would have
  // been persisted with the term), so adopting the term without a vote is safe, and needed:
  // a later leader must never append entries with a term below the log's last term.
  term_ = restored.hard.term;
  voted_for_ = restored.hard.voted_for;
  if (last_term() > term_) {
    term_ = last_term();
    voted_for_ = kNoNode;
  }
  // Compacted entries were applied, hence committed; a persisted commit beyond the log (the
  // hard state survived, the entries did not) is clamped: commit is volatile in Raft.
  commit_ = std::clamp(restored.hard.commit, first_index_ - 1, last_index());
  applied_ = std::max(options_.applied, first_index_ - 1);
  QR_CHECK(applied_ <= last_index(),
           "applied %llu beyond the restored log (last %llu): application state without its log",
           static_cast<unsigned long long>(applied_),
           static_cast<unsigned long long>(last_index()));
  commit_ = std::max(commit_, applied_);

  persisted_ = handed_ = pending_persisted_ = last_index();
  last_hard_state_ = restored.hard;
  caught_up_ = !options_.vote_after_catch_up;
  ResetElectionTimer();
}

bool Core::IsMember(NodeId id) const {
  return std::find(options_.members.begin(), options_.members.end(), id) !=
         options_.members.end();
}

Term Core::last_term() const { return entries_.empty() ? prev_term_ : entries_.back().term; }

std::optional<Term> Core::TermAt(Index i) const {
  if (i == 0) return Term{0};
  if (i + 1 == first_index_) return prev_term_;
  if (i < first_index_ || i > last_index()) return std::nullopt;
  return entries_[i - first_index_].term;
}

const Entry* Core::EntryAt(Index i) const {
  if (i < first_index_ || i > last_index()) return nullptr;
  return &entries_[i - first_index_];
}

Core::Progress* Core::FindProgress(NodeId id) {
  for (auto& p : progress_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

const Core::Progress* Core::FindProgress(NodeId id) const {
  for (const auto& p : progress_) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

int Core::RetryTicks() const {
  return std::max(2 * options_.heartbeat_ticks, options_.election_ticks / 2);
}

void Core::ResetElectionTimer() {
  election_elapsed_ = 0;
  randomized_election_ticks_ =
      election_ticks_ + static_cast<int>(rng_.Uniform(static_cast<uint64_t>(election_ticks_)));
}

// ---- Log mutation ----

void Core::AppendEntry(Entry e) {
  QR_CHECK_EQ(e.index, last_index() + 1);
  QR_CHECK_GE(e.term, last_term());
  QR_CHECK_LE(e.term, term_);
  end_bytes_.push_back((end_bytes_.empty() ? base_bytes_ : end_bytes_.back()) + e.data.size());
  entries_.push_back(std::move(e));
}

void Core::TruncateFrom(Index i) {
  // Committed entries are never removed, and a leader never removes its own entries.
  QR_CHECK_GT(i, commit_);
  QR_CHECK(role_ != Role::kLeader, "a leader never truncates its log");
  QR_CHECK_GE(i, first_index_);
  QR_CHECK_LE(i, last_index());
  stats_.entries_truncated += last_index() - i + 1;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i - first_index_),
                 entries_.end());
  end_bytes_.erase(end_bytes_.begin() + static_cast<std::ptrdiff_t>(i - first_index_), end_bytes_.end());
  // The owner's stored copy of [i, ...] is now wrong: the next Ready re-sends from i (which
  // tells it to truncate), and none of it counts as persisted.
  handed_ = std::min(handed_, i - 1);
  persisted_ = std::min(persisted_, i - 1);
  pending_persisted_ = std::min(pending_persisted_, i - 1);
}

// ---- Role transitions ----

void Core::BecomeFollower(Term term, NodeId leader) {
  QR_CHECK_GE(term, term_);
  if (term > term_) {
    term_ = term;
    voted_for_ = kNoNode;
  }
  role_ = Role::kFollower;
  pre_campaign_ = false;
  if (leader != leader_) stranded_log_start_ = 0;  // only the leader that said so knows
  if (snapshot_offer_ && (snapshot_offer_->leader != leader || snapshot_offer_->term != term_)) snapshot_offer_.reset();
  leader_ = leader;
  progress_.clear();
  votes_granted_.clear();
  votes_rejected_.clear();
  append_pending_ = false;
  ResetElectionTimer();
}

void Core::BecomeCandidate() {
  pre_campaign_ = false;
  term_ += 1;
  voted_for_ = options_.id;
  role_ = Role::kCandidate;
  leader_ = kNoNode;
  progress_.clear();
  votes_granted_.assign(1, options_.id);
  votes_rejected_.clear();
  ResetElectionTimer();
  stats_.elections_started++;
}

void Core::BecomeLeader() {
  QR_CHECK(role_ == Role::kCandidate, "only a candidate becomes leader");
  role_ = Role::kLeader;
  leader_ = options_.id;
  stats_.times_leader++;
  heartbeat_elapsed_ = 0;
  quorum_check_elapsed_ = 0;
  progress_.clear();
  for (NodeId m : options_.members) {
    if (m == options_.id) continue;
    Progress p;
    p.id = m;
    p.match = 0;
    p.next = last_index() + 1;
    p.probing = true;
    p.active = true;  // a fresh leader gives everyone one check-quorum round
    p.last_heard_tick = ticks_;  // and one election timeout to show it is alive
    progress_.push_back(std::move(p));
  }
  uncommitted_bytes_ = 0;
  for (Index i = commit_ + 1; i <= last_index(); ++i) uncommitted_bytes_ += EntryAt(i)->data.size();
  // The no-op lets the new leader commit (and so learn the commit point of) entries of
  // earlier terms, which it may only commit through an entry of its own term (section 5.4.2).
  AppendEntry(Entry{term_, last_index() + 1, std::string()});
  BroadcastAppends(/*heartbeat=*/false);
}

void Core::PreCampaign() {
  pre_campaign_ = true;
  leader_ = kNoNode;  // it timed out on its leader
  votes_granted_.assign(1, options_.id);
  votes_rejected_.clear();
  ResetElectionTimer();
  if (votes_granted_.size() >= Quorum()) {
    Campaign();
    return;
  }
  for (NodeId m : options_.members) {
    if (m == options_.id) continue;
    Message req = NewMessage(MessageType::kPreVoteRequest, m);
    req.term = term_ + 1;
    req.log_index = last_index();
    req.log_term = last_term();
    Send(std::move(req));
  }
}

bool Core::InLease() const {
  if (!options_.check_quorum) return false;
  if (role_ == Role::kLeader) return true;  // it steps down by check_quorum instead
  return leader_ != kNoNode && election_elapsed_ < election_ticks_;
}

void Core::SetElectionTicks(int ticks) {
  QR_CHECK(ticks > options_.heartbeat_ticks, "election ticks %d must exceed heartbeat_ticks %d", ticks,
           options_.heartbeat_ticks);
  if (ticks == election_ticks_) return;
  election_ticks_ = ticks;
  if (role_ != Role::kLeader) ResetElectionTimer();  // a new timeout, from now
}

void Core::Campaign() {
  BecomeCandidate();
  if (votes_granted_.size() >= Quorum()) {
    BecomeLeader();
    return;
  }
  for (NodeId m : options_.members) {
    if (m == options_.id) continue;
    Message req = NewMessage(MessageType::kVoteRequest, m);
    req.log_index = last_index();
    req.log_term = last_term();
    Send(std::move(req));
  }
}

// ---- Inputs ----

void Core::Tick() {
  ++ticks_;
  if (!first_tick_done_) {
    first_tick_done_ = true;
    if (options_.preferred_leader == options_.id && term_ == 0 && role_ == Role::kFollower && caught_up_) {
      Campaign();
      return;
    }
  }
  if (role_ != Role::kLeader) {
    if (++election_elapsed_ >= randomized_election_ticks_ && !caught_up_) {
      ResetElectionTimer();  // not a candidate before it caught up (vote_after_catch_up)
    } else if (election_elapsed_ >= randomized_election_ticks_) {
      // A candidate whose election went nowhere campaigns again in a new term (it already won
      // the pre-vote); a follower asks for pre-votes first.
      if (options_.pre_vote && role_ == Role::kFollower) {
        PreCampaign();
      } else {
        Campaign();
      }
    }
    return;
  }

  if (options_.check_quorum && ++quorum_check_elapsed_ >= 2 * election_ticks_) {
    quorum_check_elapsed_ = 0;
    size_t active = 1;  // self
    for (auto& p : progress_) {
      if (p.active) active++;
      p.active = false;
    }
    if (active < Quorum()) {
      BecomeFollower(term_, kNoNode);
      return;
    }
  }

  const int retry = RetryTicks();
  for (auto& p : progress_) {
    const bool waiting = p.probing ? p.probe_sent : !p.inflight.empty();
    if (!waiting) {
      p.stall_ticks = 0;
      continue;
    }
    if (++p.stall_ticks < retry) continue;
    // An append (or its response) was probably lost. A probe is simply resent (its next came
    // from a hint); a pipeline restarts from the last known match.
    p.stall_ticks = 0;
    p.probe_sent = false;
    if (!p.probing) {
      p.probing = true;
      p.inflight.clear();
      p.next = p.match + 1;
    }
  }

  if (++heartbeat_elapsed_ >= options_.heartbeat_ticks) {
    heartbeat_elapsed_ = 0;
    // Any AppendRequest resets a follower's election timer and carries the commit index, so a
    // follower sent one within the last heartbeat interval needs no heartbeat: under load the
    // appends are the heartbeats (fewer messages and wake-ups on every member).
    for (auto& p : progress_) {
      MaybeSendAppend(&p, /*heartbeat=*/ticks_ - p.last_sent_tick >= options_.heartbeat_ticks);
    }
  }
}

bool Core::ValidAppendRequest(const Message& m) const {
  Term t = m.log_term;
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const Entry& e = m.entries[i];
    if (e.index != m.log_index + 1 + i || e.term < t || e.term > m.term) return false;
    t = e.term;
  }
  return m.log_term <= m.term;
}

void Core::Step(const Message& m) {
  if (m.group != options_.group || m.to != options_.id || m.from == options_.id ||
      !IsMember(m.from)) {
    stats_.messages_ignored++;
    return;
  }
  if (m.type == MessageType::kAppendRequest && !ValidAppendRequest(m)) {
    stats_.messages_ignored++;
    return;
  }
  // Pre-votes never change a term here: a request carries the term its sender would campaign
  // in, a granted response echoes it.
  if (m.type == MessageType::kPreVoteRequest) {
    StepPreVoteRequest(m);
    return;
  }
  if (m.type == MessageType::kPreVoteResponse) {
    if (m.reject && m.term > term_) {
      BecomeFollower(m.term, kNoNode);  // a newer term exists
      return;
    }
    StepPreVoteResponse(m);
    return;
  }
  if (m.type == MessageType::kVoteRequest && m.term > term_ && InLease()) {
    // The leader's lease: this member heard from its leader within the election timeout, so a
    // candidate of a higher term is one that lost touch, not a sign the leader is gone.
    stats_.messages_ignored++;
    return;
  }
  if (m.term > term_) {
    // Only a leader sends AppendRequests (and snapshot requests), so its sender is this term's
    // leader.
    const bool from_leader = m.type == MessageType::kAppendRequest || m.type == MessageType::kSnapshotRequest;
    BecomeFollower(m.term, from_leader ? m.from : kNoNode);
  } else if (m.term < term_) {
    // Answer stale requests with our term so the stale candidate or leader steps down;
    // stale responses carry nothing of use.
    if (m.type == MessageType::kVoteRequest) {
      Message r = NewMessage(MessageType::kVoteResponse, m.from);
      r.reject = true;
      Send(std::move(r));
    } else if (m.type == MessageType::kAppendRequest || m.type == MessageType::kSnapshotRequest) {
      Message r = NewMessage(MessageType::kAppendResponse, m.from);
      r.reject = true;
      r.log_index = m.log_index;
      Send(std::move(r));
    } else {
      stats_.messages_ignored++;
    }
    return;
  }

  switch (m.type) {
    case MessageType::kVoteRequest: StepVoteRequest(m); break;
    case MessageType::kVoteResponse: StepVoteResponse(m); break;
    case MessageType::kAppendRequest: StepAppendRequest(m); break;
    case MessageType::kAppendResponse: StepAppendResponse(m); break;
    case MessageType::kSnapshotRequest: StepSnapshotRequest(m); break;
    case MessageType::kPreVoteRequest:
    case MessageType::kPreVoteResponse: break;  // handled above
  }
}

void Core::StepVoteRequest(const Message& m) {
  // One vote per term; a member that knows this term's leader does not vote for another.
  const bool can_vote =
      voted_for_ == m.from || (voted_for_ == kNoNode && leader_ == kNoNode);
  // Section 5.4.1: grant only to a candidate whose log is at least as up to date as ours.
  const bool log_ok =
      m.log_term > last_term() || (m.log_term == last_term() && m.log_index >= last_index());
  const bool settled = ticks_ >= options_.no_vote_ticks && caught_up_;
  Message r = NewMessage(MessageType::kVoteResponse, m.from);
  if (can_vote && log_ok && settled) {
    voted_for_ = m.from;  // persisted (Ready.hard_state) before the response is sent
    ResetElectionTimer();
    r.reject = false;
  } else {
    r.reject = true;
  }
  Send(std::move(r));
}

void Core::StepPreVoteRequest(const Message& m) {
  // Would this member vote for the sender in term m.term? Not while it hears from its leader
  // (the lease), not for an older term, and only for a log at least as up to date as its own.
  const bool can_vote = m.term > term_ || (m.term == term_ && (voted_for_ == m.from ||
                                                               (voted_for_ == kNoNode && leader_ == kNoNode)));
  const bool log_ok =
      m.log_term > last_term() || (m.log_term == last_term() && m.log_index >= last_index());
  const bool settled = ticks_ >= options_.no_vote_ticks && caught_up_;
  Message r = NewMessage(MessageType::kPreVoteResponse, m.from);
  if (!InLease() && can_vote && log_ok && settled) {
    r.term = m.term;  // nothing is recorded: a pre-vote promises nothing
    r.reject = false;
  } else {
    r.reject = true;  // with this member's own term
  }
  Send(std::move(r));
}

void Core::StepPreVoteResponse(const Message& m) {
  if (role_ != Role::kFollower || !pre_campaign_ || m.term != term_ + 1) return;  // stale
  auto seen = [&](const std::vector<NodeId>& v) {
    return std::find(v.begin(), v.end(), m.from) != v.end();
  };
  if (seen(votes_granted_) || seen(votes_rejected_)) return;  // duplicate delivery
  (m.reject ? votes_rejected_ : votes_granted_).push_back(m.from);
  if (votes_granted_.size() >= Quorum()) {
    Campaign();
  } else if (votes_rejected_.size() >= Quorum()) {
    pre_campaign_ = false;  // stays a follower of its term; asks again at its next timeout
  }
}

void Core::StepVoteResponse(const Message& m) {
  if (role_ != Role::kCandidate) return;
  auto seen = [&](const std::vector<NodeId>& v) {
    return std::find(v.begin(), v.end(), m.from) != v.end();
  };
  if (seen(votes_granted_) || seen(votes_rejected_)) return;  // duplicate delivery
  (m.reject ? votes_rejected_ : votes_granted_).push_back(m.from);
  if (votes_granted_.size() >= Quorum()) {
    BecomeLeader();
  } else if (votes_rejected_.size() >= Quorum()) {
    BecomeFollower(term_, kNoNode);
  }
}

void Core::StepAppendRequest(const Message& m) {
  if (role_ == Role::kLeader) {
    // Two leaders in one term cannot happen (election safety); never act on it.
    stats_.messages_ignored++;
    return;
  }
  if (role_ == Role::kCandidate) BecomeFollower(term_, m.from);
  pre_campaign_ = false;  // its leader is alive after all
  leader_ = m.from;
  ResetElectionTimer();
  // The leader says whether it can still catch this member up (hint: where its log starts
  // when it cannot). Every append from it carries the answer, so this is always its latest.
  stranded_log_start_ = m.hint;

  Message r = NewMessage(MessageType::kAppendResponse, m.from);
  r.log_index = m.log_index;
  if (m.log_index < commit_) {
    // Everything up to our commit agrees with the leader's log (log matching + leader
    // completeness); report it as our match so the leader resends from there.
    r.hint = commit_;
    Send(std::move(r));
    return;
  }
  const std::optional<Term> prev_term = TermAt(m.log_index);
  if (!prev_term || *prev_term != m.log_term) {
    if (m.log_index == commit_) {
      // Our committed entry disagrees with the leader's log: impossible in a correct cluster.
      stats_.messages_ignored++;
      return;
    }
    stats_.appends_rejected++;
    r.reject = true;
    if (!prev_term) {
      r.hint = last_index() + 1;
    } else {
      // Skip the whole conflicting term at once: the leader retries from its first index.
      Index i = m.log_index;
      while (i - 1 > commit_ && TermAt(i - 1) == prev_term) --i;
      r.hint = i;
    }
    Send(std::move(r));
    return;
  }

  for (const Entry& e : m.entries) {
    if (e.index <= last_index()) {
      if (TermAt(e.index) == e.term) continue;  // already have it (duplicate or reordered)
      TruncateFrom(e.index);  // conflicting suffix (section 5.3)
    }
    AppendEntry(e);
  }
  const Index last_new = m.log_index + m.entries.size();
  if (m.hint == 0) snapshot_offer_.reset();  // the leader catches this member up from its log
  // Entries after last_new may be stale leftovers of an older term: never commit beyond it.
  const Index new_commit = std::min(m.commit, last_new);
  if (new_commit > commit_) commit_ = new_commit;
  if (last_new >= m.commit) caught_up_ = true;  // it holds all its leader had committed
  r.hint = last_new;
  Send(std::move(r));
}

void Core::StepAppendResponse(const Message& m) {
  if (role_ != Role::kLeader) return;
  Progress* p = FindProgress(m.from);
  QR_CHECK(p != nullptr, "member %u has no progress", m.from);
  p->active = true;
  p->last_heard_tick = ticks_;

  if (m.reject) {
    // Stale: a rejection of an append older than what is known to match, or (while probing)
    // of another append than the outstanding probe.
    if (m.log_index < p->match) return;
    if (p->probing && m.log_index + 1 != p->next) return;
    const Index hint = std::min(m.hint, m.log_index);
    // [raft-driver] A member whose log now ends at or below what it had acknowledged lost its
    // log (an in-memory member restarted, log_storage.h): forget its match so it is caught
    // up from `hint` like a new member. Durable members never send this.
    if (hint >= 1 && hint <= p->match) p->match = hint - 1;
    p->next = std::max(p->match + 1, hint);
    p->probing = true;
    p->probe_sent = false;
    p->inflight.clear();
    p->stall_ticks = 0;
    MaybeSendAppend(p, /*heartbeat=*/false);
    return;
  }

  if (m.hint > last_index()) {
    stats_.messages_ignored++;  // a follower cannot match beyond our log
    return;
  }
  if (m.hint > p->match) {
    p->match = m.hint;
    p->stall_ticks = 0;
  }
  p->next = std::max(p->next, m.hint + 1);
  while (!p->inflight.empty() && p->inflight.front() <= m.hint) p->inflight.pop_front();
  if (p->probing) {
    p->probing = false;
    p->probe_sent = false;
    p->inflight.clear();
    p->next = p->match + 1;
    p->stall_ticks = 0;
  }
  if (MaybeAdvanceCommit()) {
    // Tell every follower the new commit right away (their application waits on it).
    BroadcastAppends(/*heartbeat=*/true);
  } else {
    MaybeSendAppend(p, /*heartbeat=*/false);
  }
}

Result<Index> Core::Propose(EntryData data) {
  if (role_ != Role::kLeader) {
    return Status::Unavailable(leader_ == kNoNode
                                   ? std::string("not leader; no leader known")
                                   : "not leader; leader is member " + std::to_string(leader_));
  }
  if (data.empty()) return Status::InvalidArgument("empty entry data is reserved for no-ops");
  if (uncommitted_bytes_ > 0 && uncommitted_bytes_ + data.size() > options_.max_uncommitted_bytes) {
    return Status::ResourceExhausted("too many uncommitted bytes (" +
                                     std::to_string(uncommitted_bytes_) + "); retry later");
  }
  const Index index = last_index() + 1;
  uncommitted_bytes_ += data.size();
  AppendEntry(Entry{term_, index, std::move(data)});
  append_pending_ = true;  // sent at TakeReady, batched with other proposals
  return index;
}

// ---- Leader replication ----

Message Core::NewMessage(MessageType type, NodeId to) const {
  Message m;
  m.type = type;
  m.group = options_.group;
  m.from = options_.id;
  m.to = to;
  m.term = term_;
  return m;
}

void Core::Send(Message m) { outbox_.push_back(std::move(m)); }

void Core::BroadcastAppends(bool heartbeat) {
  for (auto& p : progress_) MaybeSendAppend(&p, heartbeat);
}

Index Core::SendEntries(Progress* p, Index from) {
  Message m = NewMessage(MessageType::kAppendRequest, p->id);
  m.log_index = from - 1;
  const std::optional<Term> prev = TermAt(from - 1);
  QR_CHECK(prev.has_value(), "no term for prev index %llu", static_cast<unsigned long long>(from - 1));
  m.log_term = *prev;
  size_t bytes = 0;
  for (Index i = from; i <= last_index(); ++i) {
    const Entry* e = EntryAt(i);
    if (!m.entries.empty() && bytes + e->data.size() > options_.max_append_bytes) break;
    bytes += e->data.size();
    m.entries.push_back(*e);
  }
  m.commit = commit_;
  const Index last = m.log_index + m.entries.size();
  p->commit_told = std::max(p->commit_told, std::min(commit_, last));
  p->last_sent_tick = ticks_;
  Send(std::move(m));
  return last;
}

void Core::SendHeartbeat(Progress* p, Index stranded_from) {
  Message m = NewMessage(MessageType::kAppendRequest, p->id);
  m.hint = stranded_from;
  const std::optional<Term> t = TermAt(p->match);
  // If the match entry was compacted away, (0, 0) still matches on every member: index 0 is
  // below any member's commit or it is the empty prefix.
  m.log_index = t ? p->match : 0;
  m.log_term = t ? *t : 0;
  m.commit = commit_;
  p->commit_told = std::max(p->commit_told, std::min(commit_, m.log_index));
  p->last_sent_tick = ticks_;
  Send(std::move(m));
}

bool Core::MaybeSendAppend(Progress* p, bool heartbeat) {
  if (p->next < first_index_) {
    // Its next entry was compacted away: it cannot be caught up from the log (see
    // lagging_members()). Each heartbeat offers it a snapshot (with a tag), or only keeps it
    // from starting elections and tells it so (hint = where this log starts now).
    if (heartbeat && snapshot_tag_ != 0) {
      SendSnapshot(p);
    } else if (heartbeat) {
      SendHeartbeat(p, /*stranded_from=*/first_index_);
    }
    return heartbeat;
  }
  if (p->probing) {
    if (p->probe_sent) {
      if (heartbeat) SendHeartbeat(p);
      return heartbeat;
    }
    SendEntries(p, p->next);
    p->probe_sent = true;
    p->stall_ticks = 0;
    return true;
  }
  // Pipeline: fill the window.
  bool sent = false;
  while (p->next <= last_index() && p->inflight.size() < options_.max_inflight_appends) {
    const Index last = SendEntries(p, p->next);
    p->next = last + 1;
    p->inflight.push_back(last);
    sent = true;
  }
  if (!sent && (heartbeat || p->commit_told < std::min(commit_, p->match))) {
    SendHeartbeat(p);
    sent = true;
  }
  return sent;
}

bool Core::MaybeAdvanceCommit() {
  std::vector<Index> matches;
  matches.reserve(options_.members.size());
  matches.push_back(persisted_);  // our own copy counts only once it is durable
  for (const auto& p : progress_) matches.push_back(p.match);
  std::sort(matches.begin(), matches.end(), std::greater<Index>());
  const Index n = matches[Quorum() - 1];
  // Section 5.4.2: only an entry of the current term is committed by counting replicas.
  if (n <= commit_ || TermAt(n) != term_) return false;
  for (Index i = commit_ + 1; i <= n; ++i) {
    const size_t sz = EntryAt(i)->data.size();
    uncommitted_bytes_ -= std::min(uncommitted_bytes_, sz);
  }
  commit_ = n;
  return true;
}

// ---- Ready / Advance ----

bool Core::HasReady() const {
  if (ready_outstanding_) return false;
  // A change of commit alone does not need its own Ready (and fsync): commit is only an
  // optimization on disk, and it rides along with the next Ready.
  const HardState hs = CurrentHardState();
  if (hs.term != last_hard_state_.term || hs.voted_for != last_hard_state_.voted_for) return true;
  if (last_index() > handed_ || !outbox_.empty() || snapshot_installed_) return true;
  if (role_ == Role::kLeader && append_pending_) return true;
  return !apply_paused_ && applied_ < commit_;
}

Ready Core::TakeReady() {
  QR_CHECK(!ready_outstanding_, "TakeReady called twice without Advance");
  if (role_ == Role::kLeader && append_pending_) {
    append_pending_ = false;
    BroadcastAppends(/*heartbeat=*/false);
  }
  Ready rd;
  rd.snapshot = snapshot_installed_;
  snapshot_installed_.reset();
  const HardState hs = CurrentHardState();
  if (hs != last_hard_state_) {
    rd.hard_state = hs;
    last_hard_state_ = hs;
  }
  for (Index i = handed_ + 1; i <= last_index(); ++i) rd.entries.push_back(*EntryAt(i));
  handed_ = last_index();
  rd.messages = std::move(outbox_);
  outbox_.clear();
  if (!apply_paused_) {
    size_t bytes = 0;
    while (applied_ < commit_ && (rd.committed.empty() || bytes < options_.max_apply_bytes)) {
      const Entry* e = EntryAt(applied_ + 1);
      QR_CHECK(e != nullptr, "committed entry %llu missing",
               static_cast<unsigned long long>(applied_ + 1));
      bytes += e->data.size();
      rd.committed.push_back(*e);
      applied_++;
    }
  }
  pending_persisted_ = handed_;
  ready_outstanding_ = true;
  return rd;
}

void Core::Advance() {
  QR_CHECK(ready_outstanding_, "Advance without a Ready");
  ready_outstanding_ = false;
  // A truncation after TakeReady lowered pending_persisted_: only the surviving prefix counts.
  persisted_ = std::max(persisted_, pending_persisted_);
  if (role_ == Role::kLeader && MaybeAdvanceCommit()) BroadcastAppends(/*heartbeat=*/true);
}

void Core::SetApplyPaused(bool paused) { apply_paused_ = paused; }

}  // namespace qrstore::replication::raft
