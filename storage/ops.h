// What each operation of storage/txn.h does to a record: the single definition shared by the
// engine's executors and the reference executor, so both compute identical bytes. Pure
// functions of their inputs (record bytes, txn id, values read): deterministic by construction.
#pragma once

#include <cstdint>

#include "storage/record.h"
#include "storage/txn.h"

namespace qrstore::storage {

// kUpdate: counter += 1 and rewrite field 1 + (txn_id mod (fields-1)) from (txn id, key).
inline void ApplyUpdate(char* rec, const RecordLayout& layout, uint64_t txn_id, Key key) {
  SetCounter(rec, GetCounter(rec) + 1);
  if (layout.fields > 1) {
    uint32_t f = 1 + static_cast<uint32_t>(txn_id % (layout.fields - 1));
    FillBytes(rec + f * layout.field_bytes, layout.field_bytes, Mix64(txn_id) ^ key);
  }
}

// kDepWrite on x, given y's counter read at this transaction's position in the order:
// counter += 1 and rewrite field 1 + ((txn_id+1) mod (fields-1)) from (y's counter, txn id).
inline void ApplyDepWrite(char* rec, const RecordLayout& layout, uint64_t txn_id, int64_t src_counter) {
  SetCounter(rec, GetCounter(rec) + 1);
  if (layout.fields > 1) {
    uint32_t f = 1 + static_cast<uint32_t>((txn_id + 1) % (layout.fields - 1));
    FillBytes(rec + f * layout.field_bytes, layout.field_bytes,
              Mix64(static_cast<uint64_t>(src_counter)) ^ Mix64(txn_id ^ 0x5bd1e995ULL));
  }
}

// kAbortIf: a condition on the value read. arg is the firing rate per 10,000 for a uniformly
// distributed hash; the outcome depends only on (counter, txn id, arg).
inline bool AbortFires(int64_t counter, uint64_t txn_id, uint64_t arg) {
  return Mix64(static_cast<uint64_t>(counter) * 0x9e3779b97f4a7c15ULL ^ txn_id) % 10000 < arg;
}

// kDebit: returns false (the transaction aborts, nothing written) when the balance is short.
inline bool ApplyDebit(char* rec, uint64_t amount) {
  int64_t bal = GetCounter(rec);
  if (bal < static_cast<int64_t>(amount)) return false;
  SetCounter(rec, bal - static_cast<int64_t>(amount));
  return true;
}

// kCredit.
inline void ApplyCredit(char* rec, uint64_t amount) { SetCounter(rec, GetCounter(rec) + static_cast<int64_t>(amount)); }

// One op of txn `txn_id` on its record `rec`, as a serial execution runs it (the reference
// executor, the client's row replay): `src` is the record of op.src_key for a kDepWrite
// (unused otherwise). Returns true when the op's abort vote fires (a kAbortIf whose condition
// holds, a kDebit short of funds, which then writes nothing). A kRead changes nothing: the
// caller takes the record's bytes.
inline bool ApplyOp(const Op& op, char* rec, const char* src, const RecordLayout& layout, uint64_t txn_id) {
  switch (op.kind) {
    case OpKind::kRead:
      return false;
    case OpKind::kUpdate:
      ApplyUpdate(rec, layout, txn_id, op.key);
      return false;
    case OpKind::kDepWrite:
      ApplyDepWrite(rec, layout, txn_id, GetCounter(src));
      return false;
    case OpKind::kAbortIf:
      return AbortFires(GetCounter(rec), txn_id, op.arg);
    case OpKind::kDebit:
      return !ApplyDebit(rec, op.arg);
    case OpKind::kCredit:
      ApplyCredit(rec, op.arg);
      return false;
  }
  return false;
}

}  // namespace qrstore::storage
