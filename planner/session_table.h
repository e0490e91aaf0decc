// SessionTable: the replicated client-session table behind exactly-once transactions across
// leader failovers. A client opens a session (an "open session" entry in the replicated log)
// and numbers its transactions seq = 1, 2, 3, ... At planning time the leader asks Check()
// whether (session, seq) is new (plan it) or already decided (answer from the table, never
// execute again); duplicates never enter the log.
//
// Who owns it, who calls it. Every replica owns one table and applies the log's entries to it
// (Open, Record) in commit order, the global planned order (batch, planner, index), so every
// replica's table is the same function of the log and Digest() can be compared across
// replicas. The leader additionally calls Check() and MarkInFlight() while planning; that
// in-flight set is leader-only and not part of the digest or the encoding. No locking inside:
// the caller serializes every call (one owning thread, or the caller's lock).
//
// Determinism. Nothing here reads a clock or an RNG, and nothing iterates an unordered
// container to decide anything: sessions, outcomes and the forgetting FIFO are ordered maps
// keyed by ids, seqs and an apply counter, so the same entries in the same order give the same
// table on every replica. All replicas must use the same SessionLimits (they decide what is
// forgotten): treat them as replicated configuration.
//
// Cost. Record and the planning check run for every session txn (Record on every replica), so
// a session's outcomes and in-flight marks are sorted rings (planner/sorted_ring.h: appended at
// the largest seq, dropped at the smallest, O(1) without allocation once warm) and the
// record-order FIFO drops forgotten entries lazily; only the eviction order of sessions is a
// tree (<= max_sessions nodes, re-keyed in place). Out-of-order seqs (retries) cost a shift of
// the ring; a Decode of a table whose outcomes are in reverse seq order is quadratic in a
// session's outcomes.
//
// State (replicated, in the digest and the encoding):
//  - next_id: the id the next Open gets (ids 1, 2, 3, ... in log order; never reused);
//  - per session: id, last activity (the position of its last Open or accepted Record),
//    floor (every seq below it is answered kExpired), highest (the highest recorded seq);
//  - per remembered outcome: session, seq, status, pos; all of them in one FIFO in the order
//    they were recorded.
// Local to this node (not in the digest; values are in the encoding, in-flight marks are not):
//  - an outcome's read values and values_known. A follower may not capture read values
//    (planner/eq.h SliceEncoding::kWithoutReads) while the leader does, so nothing replicated
//    may depend on them;
//  - the leader's in-flight marks.
//
// Invariants (checked by Decode; kept by every mutation):
//  1 <= id < next_id for every session; sessions <= max_sessions;
//  1 <= floor <= highest + 1; every remembered seq s has floor <= s <= highest;
//  outcomes of a session <= max_outcomes_per_session; outcomes <= max_outcomes;
//  value_bytes (sum of the sizes of the values held) <= max_value_bytes.
//
// Decisions the design left open (made here, for the integrator):
//  - max_value_bytes does NOT forget outcomes. Which outcomes carry values differs between
//    nodes, so a byte cap that forgot outcomes (and raised floors) would make the leader's table
//    differ from a follower's. Beyond the cap the oldest outcomes' values are dropped instead
//    (values_known becomes false; status, pos and the floor stay): a retry of such a txn gets
//    kDone with values_known == false, and the caller must say "committed, read values no
//    longer available" rather than execute it again. A single value larger than the whole cap
//    is not kept at all. Only max_outcomes and max_outcomes_per_session forget whole outcomes.
//  - "The session's oldest" (max_outcomes_per_session) is its smallest remembered seq: that
//    raises the floor the least. When the global FIFO forgets an outcome whose session still
//    remembers smaller seqs (a client whose txns committed out of seq order), those become
//    unreachable below the raised floor and are forgotten with it.
//  - Record of a seq below the floor, of seq 0, or of a seq already remembered (a duplicate in
//    the log would be a leader bug) is refused like an unknown session: false, nothing changes
//    except that a matching in-flight mark is cleared. The first outcome stays.
//  - Record returns true when it applied the outcome, even if a cap forgets it at once (its
//    seq is then below the floor, which is what Check reports).
//  - Check's "highest seq the session has seen" for kBadSeq is the highest recorded seq or the
//    highest in-flight seq, whichever is larger: a client may pipeline max_outcomes_per_session
//    txns past what has committed.
//  - An evicted session takes its outcomes and its in-flight marks with it; its id is never
//    reused, so its txns are answered kUnknownSession forever.
//  - Decode refuses a table beyond the given limits (it does not evict: eviction happens only
//    when the log says so). Lowering the limits therefore needs a fresh table.
//  - A new leader must have applied every entry of its log (or marked the uncommitted ones in
//    flight) before its first Check, or it may call a txn of an earlier term kNew.
//  - Positions: an Open carries the position of its log entry like a txn does, and positions
//    are non-decreasing in apply order; "least recently active" compares them (ties: smaller id).
//  - Check builds `why` only when asked: pass nullptr on the planning hot path.
//  - PlannedPos and TxnStatus come from storage/txn_order.h (below the planner and commit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "common/status.h"
#include "planner/sorted_ring.h"
#include "storage/txn_order.h"

namespace qrstore::planner {

using storage::PlannedPos;

struct SessionLimits {
  uint32_t max_sessions = 4096;
  uint32_t max_outcomes_per_session = 100000;
  uint64_t max_outcomes = 1000000;
  uint64_t max_value_bytes = 256ull << 20;  // read values held (local, see above)

  // Every violation, each naming its field ("session.max_sessions: must be >= 1").
  Status Validate() const;
};

struct SessionOutcome {
  storage::TxnStatus status = storage::TxnStatus::kCommitted;
  PlannedPos pos;
  std::string values;         // the txn's read values, when values_known
  bool values_known = false;  // false: this node did not capture them, or dropped them for the cap
};

enum class Verdict : uint8_t {
  kNew,             // plan it
  kDone,            // decided: answer from the table, never execute again
  kInFlight,        // planned by this leader, not committed yet
  kExpired,         // below the floor: outcome forgotten (or never ran), never execute
  kUnknownSession,  // id 0, never opened, or evicted (indistinguishable), never execute
  kBadSeq,          // seq 0, or more than max_outcomes_per_session past the highest seen
};
const char* VerdictName(Verdict v);

class SessionTable {
 public:
  // `limits` must be valid (Validate().ok(); checked).
  explicit SessionTable(SessionLimits limits = SessionLimits());

  // --- Applied in log order on every replica ---

  // A new session at `pos`; returns its id. At max_sessions, first evicts the least recently
  // active session (smallest last activity; ties: smaller id) with everything it remembers.
  uint64_t Open(PlannedPos pos);
  // Txn (session, seq) was decided at `pos`. Remembers its outcome and returns true, or
  // returns false and changes nothing replicated when the session is unknown, seq is 0, below
  // the floor or already remembered. Clears a matching in-flight mark either way. `values` are
  // kept only when values_known.
  bool Record(uint64_t session, uint64_t seq, PlannedPos pos, storage::TxnStatus status, std::string_view values,
              bool values_known);

  // --- Leader, at planning ---

  // The verdict for (session, seq); on kDone *done (if given) points at the outcome, valid
  // until the next non-const call. `why` (if given) says it for people.
  Verdict Check(uint64_t session, uint64_t seq, const SessionOutcome** done = nullptr,
                std::string* why = nullptr) const;
  // After Check said kNew (checked): the leader planned (session, seq) at `pos`. The caller
  // bounds the marks (by its batches in flight); Record clears them one by one.
  void MarkInFlight(uint64_t session, uint64_t seq, PlannedPos pos);
  // Check, then MarkInFlight when it says kNew: the planning hot path, in one look-up.
  Verdict CheckAndMark(uint64_t session, uint64_t seq, PlannedPos pos, const SessionOutcome** done = nullptr);
  // Forgets every in-flight mark (leadership lost).
  void ClearInFlight();

  // Of the replicated state only (next id, sessions, outcomes' seq/status/pos); never of values,
  // values_known or in-flight marks. Maintained on every change: O(1).
  uint64_t Digest() const;

  // Canonical bytes of the replicated state plus the values held (not the in-flight marks):
  // Encode(Decode(x)) == x for every x Decode accepts.
  std::string Encode() const;
  // kCorruption for malformed bytes or a broken invariant, kInvalidArgument for bad limits or a
  // table beyond them. Never allocates more than the input's size justifies.
  static Result<SessionTable> Decode(std::string_view bytes, SessionLimits limits);

  size_t sessions() const { return sessions_.size(); }
  uint64_t outcomes() const { return fifo_.live; }
  uint64_t value_bytes() const { return value_bytes_; }
  size_t in_flight() const { return in_flight_count_; }
  uint64_t next_id() const { return next_id_; }
  // Approximate heap bytes (nodes, values, in-flight marks).
  size_t MemoryBytes() const;
  const SessionLimits& limits() const { return limits_; }

 private:
  struct Stored {
    SessionOutcome outcome;
    uint64_t stamp = 0;  // its key in fifo_
  };
  struct Session {
    PlannedPos activity;
    uint64_t floor = 1;
    uint64_t highest = 0;
    SortedRing<Stored> outcomes;      // by seq
    SortedRing<PlannedPos> in_flight;  // leader-only, by seq
  };
  struct OutcomeRef {
    uint64_t session = 0;
    uint64_t seq = 0;
    bool live = false;
  };
  // Every remembered outcome in record order (by stamp). A forgotten one is marked dead and
  // dropped once it reaches the front; the ring is compacted when most of it is dead, so it
  // holds at most about twice the live outcomes.
  struct Fifo {
    SortedRing<OutcomeRef> ring;
    uint64_t live = 0;
    void Push(uint64_t stamp, uint64_t session, uint64_t seq) {
      ring.Insert(stamp, OutcomeRef{session, seq, true});
      ++live;
    }
    void Kill(uint64_t stamp);
    // The oldest live outcome (live > 0).
    const OutcomeRef& Front() const { return ring.front().second; }
    const OutcomeRef& At(uint64_t stamp) const { return ring.Find(stamp)->second; }
  };
  using ActivityKey = std::tuple<uint64_t, uint32_t, uint32_t, uint64_t>;  // (pos, id)
  static ActivityKey KeyOf(uint64_t id, const Session& s) {
    return {s.activity.batch, s.activity.planner, s.activity.index, id};
  }

  Verdict Decide(uint64_t session, uint64_t seq, const SessionOutcome** done) const;
  std::string Explain(uint64_t session, uint64_t seq, Verdict v) const;
  static uint64_t HighestSeen(const Session& s);
  static uint64_t SessionHash(uint64_t id, const Session& s);
  static uint64_t OutcomeHash(uint64_t session, uint64_t seq, const SessionOutcome& o);

  // Changes a session's replicated fields in `change`, keeping by_activity_ and the digest.
  template <typename F>
  void Mutate(uint64_t id, Session& s, F change);
  void AddSession(uint64_t id, Session s);
  void Evict(std::map<uint64_t, Session>::iterator it);
  // Forgets outcome `seq` of session `id` and everything of it below the raised floor.
  void Forget(uint64_t id, Session& s, uint64_t seq);
  // The same inside a Mutate of `s` (no digest or re-keying of its own).
  void ForgetBelow(uint64_t id, Session& s, uint64_t seq);
  void EraseOutcomeAt(uint64_t id, Session& s, size_t i);
  void DropValues(Stored& st);
  void Enforce(uint64_t id);
  // Adds an outcome (no caps): the shared part of Record and Decode.
  void Insert(uint64_t id, Session& s, uint64_t seq, SessionOutcome outcome);

  SessionLimits limits_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Session> sessions_;
  std::set<ActivityKey> by_activity_;       // eviction order
  Fifo fifo_;                               // by stamp: every remembered outcome, record order
  std::set<uint64_t> valued_;               // stamps of the outcomes holding values
  uint64_t next_stamp_ = 0;                 // local: only the order of stamps matters
  uint64_t value_bytes_ = 0;
  size_t in_flight_count_ = 0;
  uint64_t sum_ = 0;  // sum of SessionHash and OutcomeHash over the state (mod 2^64)
};

}  // namespace qrstore::planner
