// ApplyFragment: what one fragment does to its record, the single place where the executors
// (parallel run) and the abort resolver (serial re-execution) map fragment kinds onto the
// shared op semantics of storage/ops.h. Pure function of its inputs.
#pragma once

#include <cstdint>

#include "planner/eq.h"
#include "storage/ops.h"
#include "storage/record.h"

namespace qrstore::executor {

// Applies `f` to `rec` (non-null). `dep_in` is the dependency value for kDepWrite / kDepRecv;
// kDepRead / kDepSend store the value to publish or send in *dep_out. Returns true when the txn's abort vote fires
// (kAbortIf true, kDebit short: a short debit writes nothing).
inline bool ApplyFragment(const planner::Fragment& f, char* rec, const storage::RecordLayout& layout,
                          uint64_t txn_id, int64_t dep_in, int64_t* dep_out) {
  using planner::FragKind;
  switch (f.kind) {
    case FragKind::kRead:
      return false;
    case FragKind::kUpdate:
      storage::ApplyUpdate(rec, layout, txn_id, f.key);
      return false;
    case FragKind::kDepRead:
      *dep_out = storage::GetCounter(rec);
      return false;
    case FragKind::kDepWrite:
      storage::ApplyDepWrite(rec, layout, txn_id, dep_in);
      return false;
    case FragKind::kAbortIf:
      return storage::AbortFires(storage::GetCounter(rec), txn_id, f.arg);
    case FragKind::kDebit:
      return !storage::ApplyDebit(rec, f.arg);
    case FragKind::kCredit:
      storage::ApplyCredit(rec, f.arg);
      return false;
    case FragKind::kDepSend:  // the y half, its value going to another partition
      *dep_out = storage::GetCounter(rec);
      return false;
    case FragKind::kDepRecv:  // the x half, its value come from another partition
      storage::ApplyDepWrite(rec, layout, txn_id, dep_in);
      return false;
  }
  return false;
}

}  // namespace qrstore::executor
