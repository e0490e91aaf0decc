// The pure Raft core: one member of one Raft group, as a deterministic state machine
// (core.cc; compaction, stranded members and snapshots in core_compaction.cc).
//
// What it is. Core implements leader election and log replication (Raft, Ongaro & Ousterhout,
// sections 5.1-5.4) with no I/O, no clock, no threads and no global state. The caller (the
// driver, replication/raft/driver.h; or the simulation in tests/sim/) feeds it inputs:
//   Tick()       one unit of logical time (the driver maps ticks to milliseconds),
//   Step(msg)    a message from a peer,
//   Propose(d)   new data (leader only),
// and collects its outputs through the Ready/Advance protocol (below). Given the same
// CoreOptions, the same restored PersistentState and the same sequence of inputs, a Core
// produces bit-for-bit the same outputs: its election timeouts come from its own Rng seeded by
// CoreOptions::seed, and nothing iterates an unordered container.
//
// Owner and threads. A Core is owned by exactly one thread (the driver's "raft" thread). It is
// not thread-safe and never calls back: it only returns values.
//
// The Ready/Advance contract (durability). After inputs, while HasReady(), the owner calls
// TakeReady() and processes the Ready IN THIS ORDER:
//   1. persist ready.hard_state (if set) and ready.entries (truncating the stored log from
//      entries[0].index first if that index is <= the last stored index), and make them as
//      durable as its fsync policy says;
//   2. send ready.messages (only now: a vote or an append acknowledgement in them promises that
//      step 1 is durable);
//   3. deliver ready.committed to the application, in order;
//   4. call Advance().
// The hard state and the entries of one Ready may be written in either order: the hard
// state's commit only covers entries made durable by earlier Readies, and restoring entries
// newer than the hard state's term is handled (see the constructor).
// Exactly one Ready may be outstanding: Advance() must be called before the next TakeReady().
// Tick/Step/Propose may be called between TakeReady() and Advance(); their effects go into the
// next Ready. A leader counts its own copy of an entry toward the commit quorum only after the
// Advance() that follows the Ready carrying that entry.
//
// Invariants (checked with QR_CHECK; a failure is a bug):
//  - the in-memory log holds entries [first_index(), last_index()] with consecutive indexes;
//    the term of entry first_index()-1 is remembered (0 for index 0);
//  - term() never decreases; at most one vote per term (voted_for persisted before any
//    message that reveals it);
//  - commit_index() never decreases and never exceeds last_index(); committed entries are
//    never truncated;
//  - a leader never overwrites or deletes entries of its own log (Leader Append-Only);
//  - the leader advances commit only to an entry of its current term, counted at a majority
//    (section 5.4.2); earlier entries become committed with it.
//
// Leadership changes and proposals. Propose returns the index the entry got. The entry is
// committed iff a later Ready.committed carries an entry with that index AND the same term as
// term() at Propose time; if an entry with that index commits with another term, the proposal
// was overwritten (leadership lost) and the driver should fail it (kUnavailable).
//
// Memory. The in-memory log holds every entry not yet compacted; Compact() drops a prefix.
// Proposals are refused (kResourceExhausted) while the uncommitted suffix exceeds
// CoreOptions::max_uncommitted_bytes, so a leader that cannot reach a quorum cannot grow
// without bound. Every outgoing AppendRequest is bounded by max_append_bytes (at least one
// entry), at most max_inflight_appends are outstanding per follower, and one Ready carries
// at most max_apply_bytes of committed entries (at least one entry).
//
// Replication mechanics (why messages look the way they do). The leader keeps a Progress per
// follower. In probe mode it sends one append at a time (from its guess `next`) and moves
// `next` back with the follower's conflict hint on a rejection; after a success it switches
// to replicate mode and pipelines up to max_inflight_appends appends. Every heartbeat_ticks it
// sends each follower an append (entries if any can go, else an empty one whose prev is the
// follower's known match, which a member of this term always accepts: it resets the
// follower's election timer and carries the commit). Nothing is ever "lost" for good: an
// outstanding append that sees no progress for max(2*heartbeat_ticks, election_ticks/2) ticks
// is resent (replicate mode falls back to probing from the match). With check_quorum, a
// leader that heard from less than a majority during two election timeouts steps down, and a
// member that heard from its leader within the last election timeout ignores requests for votes
// in a higher term (the leader's lease). With pre_vote, a member whose election timer fires
// first asks for pre-votes (kPreVoteRequest for term + 1, its own term unchanged) and campaigns
// only with a majority's yes: a member that was cut off or paused cannot raise the group's term
// and depose a working leader when it comes back (Ongaro's thesis, 9.6).
// Proposals are batched: appends for them are built at the next TakeReady().
//
// Snapshots. A member whose next needed entry was compacted away on the leader cannot be caught
// up from the log. The leader reports it by lagging_members(). If its owner named the state
// that stands in for the compacted prefix (SetSnapshotTag: an opaque tag, e.g. "a checkpoint at
// or after batch B"), each heartbeat to that member is a kSnapshotRequest: "every entry up to my
// first index - 1 is committed; continue after it if your application holds state `tag`". The
// member records the offer (snapshot_offer()); its owner, once its application holds that state
// (it may have to fetch it from a peer, outside Raft), calls InstallSnapshot(): the member drops
// its whole log, continues at the offer's index + 1 (the next Ready carries `snapshot` for its
// storage) and answers, so the leader catches it up from there. Without a tag the member is only
// told it is stranded (heartbeats carry hint = the leader's first index; stranded_log_start()).
// Why dropping the member's whole log is safe: it keeps its log when its entry at the offer's
// index has the offer's term (log matching: nothing to drop); otherwise its entries after that
// index all differ from the leader's (log matching again), so none of them is committed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.h"
#include "common/shared_bytes.h"
#include "common/status.h"

namespace qrstore::replication::raft {

using NodeId = uint32_t;
using Term = uint64_t;
using Index = uint64_t;
constexpr NodeId kNoNode = UINT32_MAX;

// An entry's payload: immutable bytes shared by every holder, with their checksum. The core's
// log, each Ready, each AppendRequest to each follower and the memory log storage all point at
// one buffer, so copying an Entry (or a Message) copies a pointer, not the payload; a follower's
// entries are views into the buffer its transport received them in. The checksum
// (EntryChecksum) is computed once, where the bytes are created (the proposing application
// thread), and travels with the entry: the transport sends it in the message head and the
// receiver checks the bytes against it, so no hop re-hashes for its own sake.
// Immutability is what makes the sharing safe across threads. Compares by content.
uint64_t EntryChecksum(std::string_view bytes);

class EntryData {
 public:
  EntryData() = default;
  // Takes the bytes and computes their checksum. Implicit on purpose: a payload is just bytes
  // (Entry{term, index, "bytes"} reads well).
  EntryData(std::string bytes)  // NOLINT(google-explicit-constructor)
      : EntryData(SharedBytes(std::move(bytes))) {}
  EntryData(const char* bytes) : EntryData(std::string(bytes)) {}  // NOLINT
  explicit EntryData(SharedBytes bytes) : bytes_(std::move(bytes)), checksum_(EntryChecksum(bytes_)) {}
  // Bytes whose checksum the caller already checked (a receiver, after verifying them).
  EntryData(SharedBytes bytes, uint64_t checksum) : bytes_(std::move(bytes)), checksum_(checksum) {}

  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  const char* data() const { return bytes_.data(); }
  std::string_view view() const { return bytes_.view(); }
  operator std::string_view() const { return bytes_.view(); }  // NOLINT(google-explicit-constructor)
  const SharedBytes& bytes() const { return bytes_; }
  uint64_t checksum() const { return checksum_; }
  bool operator==(const EntryData& other) const { return bytes_ == other.bytes_; }

 private:
  static uint64_t EmptyChecksum() {
    static const uint64_t kEmpty = EntryChecksum({});  // computed once, not per empty entry
    return kEmpty;
  }
  SharedBytes bytes_;
  uint64_t checksum_ = EmptyChecksum();
};

// One log entry. Empty data marks the no-op a new leader appends (Propose refuses empty data,
// so the application never sees an empty entry that it proposed).
struct Entry {
  Term term = 0;
  Index index = 0;
  EntryData data;
  bool operator==(const Entry&) const = default;
};

enum class MessageType : uint8_t {
  kVoteRequest,
  kVoteResponse,
  kAppendRequest,
  kAppendResponse,
  kPreVoteRequest,   // CoreOptions::pre_vote: "would you vote for me in term `term`?"
  kPreVoteResponse,
  kSnapshotRequest,  // leader -> a member its log can no longer catch up (see Snapshots above)
};
const char* MessageTypeName(MessageType type);

// A Raft RPC. Field use by type:
//   kVoteRequest:    term, log_index/log_term = the candidate's last entry.
//   kVoteResponse:   term, reject (true = vote not granted).
//   kPreVoteRequest: term = the term the sender would campaign in (its own term + 1: the
//                    sender's term does not change), log_index/log_term = its last entry.
//   kPreVoteResponse: reject; term = the request's term when granted, else the responder's
//                    own (a higher one tells the pre-candidate a newer term exists).
//   kAppendRequest:  term, log_index/log_term = the entry just before `entries` (prev),
//                    entries (consecutive indexes from log_index+1), commit = leader commit,
//                    hint = 0, or (an empty append to a member whose next entry was compacted
//                    away) the index the leader's log starts at: "you are stranded".
//   kSnapshotRequest: term, log_index/log_term = the entry before the leader's first one (all
//                    committed), commit, hint = the leader's snapshot tag (opaque, non-zero).
//                    Answered with a kAppendResponse: success (hint = match) once installed or
//                    when the member's log already agrees at log_index; else rejected with
//                    log_index echoed and hint = its last index + 1 (the leader stays in touch).
//   kAppendResponse: term, log_index = the request's prev index (to spot stale responses),
//                    reject=false: hint = the follower's match index (last entry known to
//                    agree with the leader); reject=true: hint = the index the leader should
//                    try next (the follower's first index of the conflicting term, or its
//                    last index + 1 when prev was beyond its log).
// Wire format: replication/raft/message_codec.h.
struct Message {
  MessageType type = MessageType::kVoteRequest;
  uint32_t group = 0;
  NodeId from = 0, to = 0;
  Term term = 0;
  Index log_index = 0;
  Term log_term = 0;
  std::vector<Entry> entries;
  Index commit = 0;
  bool reject = false;
  Index hint = 0;
  bool operator==(const Message&) const = default;
};

// The part of a member's state that must survive a restart, besides the log.
struct HardState {
  Term term = 0;
  NodeId voted_for = kNoNode;  // vote cast in `term`
  Index commit = 0;            // an optimization: restoring a smaller value is safe
  bool operator==(const HardState&) const = default;
};

// What the driver restores a Core from: the durable hard state and log.
struct PersistentState {
  HardState hard;
  std::vector<Entry> entries;  // consecutive indexes from first_index (may be empty)
  Index first_index = 1;       // index of entries[0] (or of the next entry, if empty)
  Term prev_term = 0;          // term of entry first_index - 1 (0 when first_index == 1);
                               // the driver keeps it when it compacts its stored log
};

// A leader's offer to this member (kSnapshotRequest): continue after `index` (term
// `index_term`) once the application holds the state `tag` names.
struct SnapshotOffer {
  NodeId leader = kNoNode;
  Term term = 0;        // the leader's term
  Index index = 0;
  Term index_term = 0;
  uint64_t tag = 0;
  bool operator==(const SnapshotOffer&) const = default;
};

// An installed snapshot: the log is empty and continues at index + 1, after an entry of `term`.
struct SnapshotPoint {
  Index index = 0;
  Term term = 0;
};

// The outputs of a Core since the last TakeReady(); see the contract at the top.
struct Ready {
  // Persist FIRST when set: drop the whole stored log, which then continues at index + 1
  // (hard_state and entries below come after it).
  std::optional<SnapshotPoint> snapshot;
  std::optional<HardState> hard_state;  // persist if set
  std::vector<Entry> entries;   // append to the log; if entries[0].index <= last stored index,
                                // truncate the stored log from entries[0].index first
  std::vector<Message> messages;  // send only AFTER hard_state and entries are persisted
  std::vector<Entry> committed;   // newly committed entries, in index order: deliver/apply
};

struct CoreOptions {
  uint32_t group = 0;
  NodeId id = 0;
  std::vector<NodeId> members;  // includes id; no duplicates
  int election_ticks = 10;      // randomized in [election_ticks, 2*election_ticks) from `seed`
  int heartbeat_ticks = 1;      // must be < election_ticks
  uint64_t seed = 0;            // the core's own Rng: no global randomness
  size_t max_append_bytes = 4 << 20;   // per AppendRequest (entry data bytes; >= 1 entry)
  size_t max_inflight_appends = 64;    // per follower (pipelining)
  size_t max_uncommitted_bytes = 64 << 20;  // Propose refuses beyond this (leader)
  size_t max_apply_bytes = 64 << 20;        // committed entry bytes per Ready (>= 1 entry)
  // Campaigns on its first tick if the restored term is 0 (a fresh group): a fast,
  // predictable start. Restarted members wait for a normal election timeout instead, so a
  // restarting preferred member does not depose a working leader.
  NodeId preferred_leader = kNoNode;
  // A leader that has not heard from a majority within two election timeouts steps down, so a
  // leader cut off in a minority stops accepting proposals that cannot commit. Two, not one: a
  // follower campaigns only after [1, 2) timeouts of silence and, with pre_vote, only with a
  // majority that lost the leader too, while one timeout of silence both ways happens to a
  // working leader whose heartbeats and answers wait for CPU on a loaded host (its followers
  // then keep it, but it would give up by itself). With it, a member
  // that heard from its leader within the last election timeout also ignores requests for votes
  // in a higher term (the leader's lease): a member that was cut off cannot depose a leader the
  // majority still hears.
  bool check_quorum = true;
  // PreVote (Ongaro's thesis, section 9.6): an election timeout first asks the members whether
  // they would vote (kPreVoteRequest, for term + 1, without raising its own term); only with a
  // majority's yes does it campaign for real. A member that was cut off, paused or restarted
  // therefore cannot raise the group's term and depose a working leader when it comes back.
  bool pre_vote = false;
  // Refuse to grant votes during the first N ticks after construction. For a member whose
  // storage does not keep votes (an in-memory log): after a restart it does not know whom it
  // voted for in the current term, and waiting one election timeout (election_ticks) lets
  // that election finish before it votes again. A heuristic, not a proof: durable storage
  // needs 0.
  int no_vote_ticks = 0;
  // A member that may have forgotten its votes and acknowledgements (its log did not survive a
  // restart: the in-memory log) neither votes, pre-votes nor campaigns until an append from a
  // leader brought its log up to that leader's commit (caught_up()). Liveness cost: while it is
  // not caught up the group needs a majority without it.
  bool vote_after_catch_up = false;
  // Entries <= applied were already applied before the restart (the application keeps its
  // own state durable); the first Ready re-delivers committed entries after it. 0: the
  // application is in-memory and every committed entry still in the log is re-delivered.
  Index applied = 0;
};

enum class Role : uint8_t { kFollower, kCandidate, kLeader };

// A leader's view of one follower (Core::member_progress).
struct MemberProgress {
  NodeId id = kNoNode;
  Index match = 0;          // last entry known replicated on it
  uint64_t lag_bytes = 0;   // entry-data bytes after match (everything held, if compacted)
  bool live = false;        // answered within 2 election timeouts
  bool stranded = false;    // its next entry was compacted away: it cannot be caught up
};
const char* RoleName(Role role);

// Counters for the driver's periodic stats line (monotonic since construction).
struct CoreStats {
  uint64_t elections_started = 0;
  uint64_t times_leader = 0;
  uint64_t messages_ignored = 0;  // other group, unknown sender, stale term, impossible state
  uint64_t appends_rejected = 0;  // AppendRequests this member rejected (log mismatch)
  uint64_t entries_truncated = 0; // conflicting suffix entries dropped by this member
  uint64_t snapshots_sent = 0;    // leader: kSnapshotRequests sent
  uint64_t snapshots_installed = 0;
};

class Core {
 public:
  // QR_CHECKs that options are sane (id in members, no duplicates, ticks > 0) and that the
  // restored log is well formed.
  Core(CoreOptions options, PersistentState restored);

  void Tick();
  // Ignores messages for other groups or other recipients, from non-members, and stale
  // responses; answers stale requests with its own term so the sender steps down.
  void Step(const Message& m);
  // Leader only (else kUnavailable with the known leader in the message). Empty data is
  // refused (kInvalidArgument: empty marks the leader no-op). Returns the entry's index.
  Result<Index> Propose(EntryData data);

  // False while a Ready is outstanding (taken, not yet Advanced).
  bool HasReady() const;
  Ready TakeReady();
  // The owner persisted (and synced, per policy) everything of the last Ready, sent its
  // messages and delivered its committed entries.
  void Advance();

  // Back-pressure from the application: while paused, Ready.committed stays empty (commit
  // still advances; the entries are delivered after unpausing).
  void SetApplyPaused(bool paused);

  Role role() const { return role_; }
  Term term() const { return term_; }
  NodeId leader() const { return leader_; }
  NodeId id() const { return options_.id; }
  uint32_t group() const { return options_.group; }
  NodeId voted_for() const { return voted_for_; }
  Index commit_index() const { return commit_; }
  Index applied_index() const { return applied_; }  // last entry handed out in Ready.committed
  Index last_index() const { return first_index_ + entries_.size() - 1; }
  Term last_term() const;
  Index first_index() const { return first_index_; }
  // The term of entry i, for first_index()-1 <= i <= last_index(); nullopt otherwise.
  std::optional<Term> TermAt(Index i) const;
  // Entry i, for first_index() <= i <= last_index(); nullptr otherwise. Valid until the next
  // non-const call.
  const Entry* EntryAt(Index i) const;
  const CoreStats& stats() const { return stats_; }

  // Memory bound: drops entries <= upto from the in-memory log. Requires upto <= applied;
  // call it after Advance (the entries are then durable in the owner's storage, which keeps
  // prev_term for its own compacted prefix).
  // On a leader, dropping entries that a member still needs makes that member impossible to
  // catch up (it shows in lagging_members()); compactable_index() avoids that.
  void Compact(Index upto);
  // The highest index Compact may take without stranding a member: applied_index(), and on a
  // leader also <= every member's match index.
  Index compactable_index() const;
  // Leader only: members whose next needed entry was compacted away (empty elsewhere).
  std::vector<NodeId> lagging_members() const;
  // Leader only (0 elsewhere): the entry-data bytes the group's quorum still lacks: among
  // the followers that can count toward a quorum (heard from within 2 election timeouts, and
  // not stranded), the lag of the one the quorum needs last (with 3 members: the better
  // placed follower). The owner uses it for flow control: it stops proposing while the
  // quorum is further behind than its budget, so compaction never strands a member the
  // quorum needs. A member behind the quorum, dead, paused or stranded never holds the group
  // back: a majority must never wait for a minority (it may fall out of the log instead).
  uint64_t quorum_lag_bytes() const;
  // Leader only (empty elsewhere): every follower's position, in member order.
  std::vector<MemberProgress> member_progress() const;
  // False while vote_after_catch_up keeps this member from voting (see CoreOptions).
  bool caught_up() const { return caught_up_; }
  // Follower: asking for pre-votes (pre_vote), its term unchanged.
  bool pre_campaigning() const { return pre_campaign_; }
  // Follower: non-zero when the current leader said it can no longer catch this member up
  // from its log (the entries it needs were compacted away): the index the leader's log
  // starts at. Reset by the next append that says otherwise, or a new leader.
  Index stranded_log_start() const { return stranded_log_start_; }
  // Leader: the tag its snapshot requests carry (0: none are sent; stranded members are only
  // told so). The owner keeps it true: an application holding the state `tag` names needs no
  // entry at or below first_index() - 1, whenever this is called and as the log is compacted.
  void SetSnapshotTag(uint64_t tag) { snapshot_tag_ = tag; }
  // The election timeout in ticks from now on (> heartbeat_ticks; options().election_ticks
  // at construction): a follower campaigns after [ticks, 2 ticks) without a leader (its timer
  // restarts), ignores votes for that long after hearing one (check_quorum), and a leader
  // checks its quorum every 2 `ticks`. The owner lengthens it while this member's application
  // replays its log after a restart: busy members then do not depose a leader as busy as they
  // are (the CPU they all share delays every heartbeat), at the price of a later election if
  // that leader dies meanwhile.
  void SetElectionTicks(int ticks);
  int election_ticks() const { return election_ticks_; }
  uint64_t snapshot_tag() const { return snapshot_tag_; }
  // Follower: the current leader's standing offer (cleared by a new leader or term, or by
  // an append that catches this member up without it).
  const std::optional<SnapshotOffer>& snapshot_offer() const { return snapshot_offer_; }
  // Follower, with an offer, no Ready outstanding: takes it (see Snapshots above). The next
  // Ready carries `snapshot` (persist it first) and the acknowledgement to the leader.
  void InstallSnapshot();
  // Data bytes of the entries after `index` (all held entries if index was compacted).
  uint64_t BytesAfter(Index index) const;
  // Leader only: the replication progress of member id (match index; 0 if unknown).
  Index match_index(NodeId member) const;

 private:
  // Leader's view of one follower.
  struct Progress {
    NodeId id = kNoNode;
    Index match = 0;      // highest index known replicated (and durable) on the follower
    Index next = 1;       // next index to send
    bool probing = true;  // probe: one append per heartbeat until a success is seen
    bool probe_sent = false;
    std::deque<Index> inflight;  // last index of each outstanding append (replicate mode)
    Index commit_told = 0;  // highest commit an append sent to it could make it adopt
    int stall_ticks = 0;  // ticks without progress while an append is outstanding
    bool active = false;  // heard from since the last check-quorum round
    int64_t last_heard_tick = 0;  // ticks_ when it last answered an append
    int64_t last_sent_tick = INT64_MIN / 2;  // ticks_ when an AppendRequest last went to it
  };

  void BecomeFollower(Term term, NodeId leader);
  void BecomeCandidate();
  void BecomeLeader();
  void Campaign();
  // pre_vote: asks for pre-votes for term + 1; campaigns for real once a majority says yes.
  void PreCampaign();
  // check_quorum: this member heard from its leader within the last election timeout (a leader:
  // always), so it ignores requests for votes in a higher term.
  bool InLease() const;
  void ResetElectionTimer();
  size_t Quorum() const { return options_.members.size() / 2 + 1; }

  void StepVoteRequest(const Message& m);
  void StepVoteResponse(const Message& m);
  void StepPreVoteRequest(const Message& m);
  void StepPreVoteResponse(const Message& m);
  void StepAppendRequest(const Message& m);
  void StepAppendResponse(const Message& m);
  void StepSnapshotRequest(const Message& m);

  void Send(Message m);
  Message NewMessage(MessageType type, NodeId to) const;
  // Leader: sends appends to every follower that can take one (or a heartbeat when
  // `heartbeat` and nothing else goes out).
  void BroadcastAppends(bool heartbeat);
  // Leader: sends p what it may (a probe, or entries up to the in-flight limit; or, with
  // `heartbeat` or when p has not been told the commit, an empty append); returns whether
  // anything was sent.
  bool MaybeSendAppend(Progress* p, bool heartbeat);
  // Leader: sends entries from `from` (bounded by max_append_bytes) to p; returns the last
  // index sent (from - 1 if none).
  Index SendEntries(Progress* p, Index from);
  // Leader: an append with no entries whose prev is p's match index (always accepted by a
  // member that is still in this term): keeps p from campaigning and carries the commit.
  // `stranded_from` (hint) non-zero tells p that this log starts there, past what it needs.
  void SendHeartbeat(Progress* p, Index stranded_from = 0);
  // Leader: a kSnapshotRequest to p (whose next entry was compacted away).
  void SendSnapshot(Progress* p);
  // Leader: p answered within 2 election timeouts.
  bool Live(const Progress& p) const;
  // Ticks without progress after which an outstanding append is considered lost.
  int RetryTicks() const;
  bool IsMember(NodeId id) const;
  bool ValidAppendRequest(const Message& m) const;
  bool MaybeAdvanceCommit();
  Progress* FindProgress(NodeId id);
  const Progress* FindProgress(NodeId id) const;

  // Log mutation (the only places that change entries_).
  void AppendEntry(Entry e);
  void TruncateFrom(Index i);  // drops [i, last]; i > commit_

  // The hard state to persist. Its commit never exceeds persisted_ (entries made durable by
  // earlier Readies), so a crash between writing the hard state and the entries of one Ready
  // can never leave a durable commit that points at an entry that is not durable (or at a
  // stale entry the same Ready was replacing): the driver may write them in either order.
  HardState CurrentHardState() const { return {term_, voted_for_, std::min(commit_, persisted_)}; }

  CoreOptions options_;
  Rng rng_;

  // Persistent state (mirrored to storage through Ready.hard_state / Ready.entries).
  Term term_ = 0;
  NodeId voted_for_ = kNoNode;
  std::deque<Entry> entries_;  // [first_index_, last_index()]
  // Byte positions: end_bytes_[k] = data bytes of every entry ever appended up to and
  // including entries_[k] (restored entries count from 0); base_bytes_ = the position before
  // entries_[0]. They make "bytes after index i" O(1) for flow control.
  std::deque<uint64_t> end_bytes_;
  uint64_t base_bytes_ = 0;
  Index first_index_ = 1;
  Term prev_term_ = 0;  // term of first_index_ - 1

  // Volatile state.
  Role role_ = Role::kFollower;
  NodeId leader_ = kNoNode;
  Index commit_ = 0;
  Index applied_ = 0;
  Index stranded_log_start_ = 0;  // follower: see stranded_log_start()
  uint64_t snapshot_tag_ = 0;     // leader: SetSnapshotTag
  std::optional<SnapshotOffer> snapshot_offer_;  // follower
  std::optional<SnapshotPoint> snapshot_installed_;  // for the next Ready
  bool apply_paused_ = false;
  int election_ticks_ = 0;  // SetElectionTicks; options_.election_ticks at construction
  int election_elapsed_ = 0;
  int randomized_election_ticks_ = 0;
  int heartbeat_elapsed_ = 0;
  int quorum_check_elapsed_ = 0;
  bool first_tick_done_ = false;
  bool caught_up_ = true;  // CoreOptions::vote_after_catch_up
  int64_t ticks_ = 0;  // ticks since construction (for no_vote_ticks)
  std::vector<NodeId> votes_granted_;   // candidate: votes; pre-candidate: pre-votes
  std::vector<NodeId> votes_rejected_;
  bool pre_campaign_ = false;           // a follower asking for pre-votes
  std::vector<Progress> progress_;  // leader: one per member except self, in member order
  size_t uncommitted_bytes_ = 0;    // leader: data bytes in (commit_, last_index()]
  bool append_pending_ = false;     // leader: entries proposed since the last broadcast

  // Ready bookkeeping.
  Index persisted_ = 0;      // last index durable in the owner's storage (after Advance)
  Index handed_ = 0;         // last index handed out in a Ready (>= persisted_)
  Index pending_persisted_ = 0;  // handed_ at the last TakeReady, adopted at Advance
  bool ready_outstanding_ = false;
  HardState last_hard_state_;  // last hard state handed out (or restored)
  std::vector<Message> outbox_;

  CoreStats stats_;
};

}  // namespace qrstore::replication::raft
