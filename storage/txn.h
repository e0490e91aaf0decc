// The transaction model: deterministic stored procedures whose read/write sets are known
// before planning. A Txn is plain data (a list of Ops over 64-bit keys) so it can be planned,
// encoded into EQs, replicated and replayed. The meaning of every Op on a record is defined
// once, in storage/ops.h, and shared by the engine and the reference executor.
//
// Semantics (record layout in storage/record.h: field 0 starts with a little-endian int64
// "counter"; for `transfer` the counter is the account balance):
//   kRead(key)               read the record; no write.
//   kUpdate(key)             counter += 1, and rewrite one other field with bytes derived from
//                            (txn id, key) (see ops.h).
//   kDepWrite(key, src_key)  a data dependency x = f(y): read y = src_key, then on x = key:
//                            counter += 1 and rewrite a field from (y's counter, txn id).
//                            y usually lives in another executor range.
//   kAbortIf(key, arg)       read the record; the transaction aborts (logic-induced) when
//                            AbortFires(counter, txn id, arg) (ops.h); arg is per 10,000.
//   kDebit(key, arg)         if counter < arg the transaction aborts; else counter -= arg.
//   kCredit(key, arg)        counter += arg.
// A transaction commits with all its writes, or aborts and leaves no trace.
#pragma once

#include <cstdint>
#include <vector>

namespace qrstore::storage {

using Key = uint64_t;

enum class OpKind : uint8_t {
  kRead = 0,
  kUpdate = 1,
  kDepWrite = 2,
  kAbortIf = 3,
  kDebit = 4,
  kCredit = 5,
};
constexpr uint8_t kMaxOpKind = 5;

struct Op {
  OpKind kind = OpKind::kRead;
  Key key = 0;      // the record read or written
  Key src_key = 0;  // kDepWrite only: the record whose value is read
  uint64_t arg = 0; // kAbortIf: threshold per 10,000; kDebit/kCredit: amount
};

inline bool IsWrite(OpKind k) {
  return k == OpKind::kUpdate || k == OpKind::kDepWrite || k == OpKind::kDebit || k == OpKind::kCredit;
}

// Txn::session of the entry that opens a client session (no ops; the id it gets is decided
// when it commits: planner/session_table.h).
constexpr uint64_t kOpenSession = UINT64_MAX;

struct Txn {
  // Fields are ordered so that the 4-byte and 1-byte ones share 8-byte words: a Txn is moved
  // several times on its way to the planner.
  uint64_t id = 0;         // unique in a run; a deterministic function of the input
  uint32_t client = 0;     // who is told the outcome
  // The leader's own, never encoded or sent: a history read (cluster/sessions/session_store.h). Its
  // kReads return each key's value just before position (history_batch, history_planner,
  // history_index) of the global order, from the write histories (executor/write_history.h).
  bool history = false;
  int64_t submit_ns = 0;   // for latency only; never affects an outcome
  // Client sessions (exactly once across failovers, docs/sessions.md): the session the txn
  // belongs to and its sequence number there (0, 0: none), or kOpenSession (no ops, seq 0).
  uint64_t session = 0;
  uint64_t seq = 0;
  std::vector<Op> ops;
  uint64_t history_batch = 0;
  uint32_t history_planner = 0;
  uint32_t history_index = 0;
};
static_assert(sizeof(Txn) == 80, "Txn's layout: see the comment on its fields");

// The values a committed `t` returns: one per kRead.
inline uint64_t ReadOps(const Txn& t) {
  uint64_t n = 0;
  for (const Op& op : t.ops) n += op.kind == OpKind::kRead ? 1 : 0;
  return n;
}

}  // namespace qrstore::storage
