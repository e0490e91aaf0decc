// SessionStore: a node's replicated client-session table (planner/session_table.h) with the
// lock and the bookkeeping that wire it into the node (docs/sessions.md).
//
// Who calls what:
//  - every replica, commit sink (one thread at a time, in global planned order): Apply(slice's
//    outcomes): an open-session entry opens a session (ids 1, 2, 3, ... in log order), a session
//    txn's fate is recorded. So every replica holds the same table, and its Digest() goes into
//    the state digest the followers report.
//  - the leader, planner thread holding the planners' token (so in planned order): Admit(the
//    txns just popped). A session txn the table calls new is kept (and marked in flight at its
//    slice position); any other is taken out of the slice and answered: decided earlier (its
//    original fate and position; read values are not kept, see below), expired, unknown
//    session, bad seq. One still in flight (planned by this leader, not committed) is answered
//    when its original's outcome is applied, with that outcome and its read values.
// A txn sent again is thus never planned twice: duplicates never enter the log.
//
// Read values. By default followers replay slices without plain reads (planner/eq.h
// kWithoutReads), so no node keeps read values in the table. With EnableHistory a retry of a
// committed txn with reads becomes a history read (the values recomputed from the write
// histories, docs/sessions.md); without it, or when the histories no longer reach back, the
// answer is ResultCode::kCommittedNoValues (its fate and position, not its values). With
// keep_values (server.session_read_values: the followers get the reads too) every node keeps
// them, within SessionLimits::max_value_bytes, and such an answer is the original outcome,
// values included (kCommittedNoValues only once the cap dropped them).
//
// Thread-safety: every call takes the store's lock; answers are returned to the caller, which
// delivers them outside it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cluster/port/protocol.h"
#include "commit/outcome.h"
#include "common/config.h"
#include "common/mutex.h"
#include "planner/session_table.h"
#include "storage/record.h"
#include "storage/txn.h"

namespace qrstore::cluster {

// A session txn answered without being planned (or when its original was applied).
struct SessionAnswer {
  uint32_t client = 0;  // the connection (Txn::client)
  uint64_t session = 0;
  uint64_t seq = 0;
  proto::ResultCode code = proto::ResultCode::kCommitted;
  commit::PlannedPos pos;  // decided ones
  uint32_t reads = 0;      // kCommitted: values held
  std::string values;
  std::string detail;      // kRejected / kExpired: why
};

struct SessionStoreCounters {
  uint64_t opened = 0;          // sessions opened (applied)
  uint64_t duplicates = 0;      // leader: txns answered from the table (decided or in flight)
  uint64_t history_reads = 0;   // leader: retries planned as history reads
  uint64_t history_misses = 0;  // leader: of those, answered kCommittedNoValues (history too short)
  uint64_t expired = 0;         // leader: answered kExpired
  uint64_t refused = 0;         // leader: unknown session or bad seq
};

// The session table's limits from server.session_* (every node of a group reads the same).
planner::SessionLimits SessionLimitsFromConfig(const Config& config);

class SessionStore {
 public:
  // `record_bytes`: the size of one read value; `keep_values`: see above.
  explicit SessionStore(planner::SessionLimits limits, uint32_t record_bytes = 0, bool keep_values = false)
      : table_(limits), record_bytes_(record_bytes), keep_values_(keep_values) {}

  // Read values from the write histories (docs/sessions.md): a retry of a committed txn that
  // read something is planned as a history read instead of answered at once (see Admit), and
  // answered when that commits, with the values recomputed from the keys' values just before the
  // original's position, if `covers(original's batch)` says the histories held every write
  // since. `layout`: the table's records; `exists(key)`: whether the table has the key (fixed
  // once loaded; any thread). Before the first Admit; not with keep_values.
  void EnableHistory(storage::RecordLayout layout, std::function<bool(uint64_t)> covers,
                     std::function<bool(storage::Key)> exists) {
    history_layout_ = layout;
    history_covers_ = std::move(covers);
    history_exists_ = std::move(exists);
  }

  // A home of a partitioned row (docs/sessions.md, rows): Apply gets the outcomes of the home's
  // own row sub-slices, which list a home slice's txns by TxnContext::home_index and hold only
  // this partition's read values. So a txn's position is (batch, planner, home_index), the
  // position its client was answered with, and a duplicate that waited for its original is
  // answered without values (kCommittedNoValues when it read something). Before the first call.
  void ForRowHome() { row_home_ = true; }

  // Leader, planner thread with the token, before planning slice (batch, planner): filters
  // txns[from..] in place (kept ones keep their order and will sit at their index in the
  // slice) and appends the answers of the ones taken out. With EnableHistory, a retry of a
  // committed txn that read something stays, turned into its history read (no session, a kRead
  // of every key the original touches, storage::Txn::history naming the original's position).
  void Admit(uint64_t batch, uint32_t planner, std::vector<storage::Txn>* txns, size_t from,
             std::vector<SessionAnswer>* answers);
  // Every replica, the commit sink, in planned order: the outcomes of one slice. Appends
  // (index in `outcomes`, session id) for every open-session entry, and the answers of
  // duplicates that waited for these outcomes and of retries whose history read committed.
  void Apply(const std::vector<commit::TxnOutcome>& outcomes, std::vector<std::pair<size_t, uint64_t>>* opened,
             std::vector<SessionAnswer>* answers);
  // The leader lost leadership: forget in-flight marks, waiters and history reads.
  void ClearInFlight();

  uint64_t Digest() const;
  // The table's canonical bytes (planner/session_table.h Encode): a checkpoint's session table.
  std::string Encode() const;
  // A restart: the table of the checkpoint the node starts from (before any Apply).
  void Restore(planner::SessionTable table);
  size_t sessions() const;
  uint64_t outcomes() const;
  SessionStoreCounters counters() const;

  // At most this many history reads wait for their outcome; beyond it a retry is answered
  // kCommittedNoValues at once.
  static constexpr size_t kMaxHistoryReads = size_t{1} << 20;

 private:
  struct Waiter {
    uint32_t client = 0;
    bool reads = false;  // the txn reads something (ForRowHome: whether it is answered without)
  };
  // A retry planned as a history read: what its answer needs.
  struct HistoryRead {
    uint32_t client = 0;
    uint64_t session = 0;
    uint64_t seq = 0;
    storage::Txn original;  // the retry as sent: its id and ops
  };
  // The retry's answer from its history read's outcome `o`.
  SessionAnswer AnswerFromHistory(const commit::TxnOutcome& o, const HistoryRead& h) const REQUIRES(mu_);
  mutable Mutex mu_;
  planner::SessionTable table_ GUARDED_BY(mu_);
  const uint32_t record_bytes_;
  const bool keep_values_;
  bool row_home_ = false;  // ForRowHome
  std::multimap<std::pair<uint64_t, uint64_t>, Waiter> waiters_ GUARDED_BY(mu_);  // (session, seq)
  SessionStoreCounters counters_ GUARDED_BY(mu_);
  storage::RecordLayout history_layout_;
  std::function<bool(uint64_t)> history_covers_;  // set: history reads are on
  std::function<bool(storage::Key)> history_exists_;
  // By the original's position.
  std::multimap<commit::PlannedPos, HistoryRead> history_reads_ GUARDED_BY(mu_);
};

}  // namespace qrstore::cluster
