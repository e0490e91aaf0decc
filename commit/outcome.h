// The outcome of one transaction, as the commit stage reports it. Plain values, copied to the
// engine's CommitSink (engine/engine.h re-exports these names in qrstore::cluster).
// PlannedPos and TxnStatus come from storage/txn_order.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "storage/txn_order.h"

namespace qrstore::commit {

using storage::PlannedPos;
using storage::TxnStatus;
using storage::TxnStatusName;

struct TxnOutcome {
  uint64_t txn_id = 0;
  uint32_t client = 0;
  TxnStatus status = TxnStatus::kCommitted;
  PlannedPos pos;
  int64_t submit_ns = 0;  // copied from Txn::submit_ns
  int64_t commit_ns = 0;  // NowNanos() when the outcome became final
  uint32_t write_ops = 0; // write ops in the transaction (kUpdate, kDepWrite, kDebit, kCredit)
  // A committed txn on a node that captures reads: the record of each of its kRead ops, in op
  // order (`reads` records of the table's record size), as read at its place in the serial
  // order. A view into the engine's buffers: valid only during the sink call.
  uint32_t reads = 0;
  std::string_view values;
  uint32_t home_index = 0;  // its index in its home's slice (a row sub-slice lists a subset)
  uint64_t session = 0;     // Txn::session and Txn::seq (client sessions; 0, 0: none)
  uint64_t seq = 0;
  // A history read (storage::Txn::history): its values are each key's just before `history_of`.
  bool history = false;
  PlannedPos history_of;
};

// Called by commit threads with the outcomes of one (batch, planner) slice in planned order.
// Calls are never concurrent and arrive in global planned order (slice after slice). Must
// return quickly and must not throw or call back into the engine.
using CommitSink = std::function<void(const std::vector<TxnOutcome>&)>;

}  // namespace qrstore::commit
