// Test support: a deliberately simple serial applier. Applies transactions one at a time, ops
// in order, with storage/ops.h semantics; a txn whose abort fires is undone (leaves no trace).
// Ops on absent keys are no-ops (a dependency read of an absent key sees counter 0), as in the
// engine. Used by the executor and cluster tests as the expected result.
#pragma once

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "storage/ops.h"
#include "storage/record.h"
#include "storage/table.h"
#include "storage/txn.h"

namespace qrstore::testing {

// Returns true if `txn` committed.
inline bool SerialApply(storage::Table* table, const storage::Txn& txn) {
  using storage::OpKind;
  const storage::RecordLayout& layout = table->layout();
  std::vector<std::pair<char*, std::string>> undo;
  bool abort = false;
  for (const storage::Op& op : txn.ops) {
    char* rec = table->Find(op.key);
    int64_t src = 0;
    if (op.kind == OpKind::kDepWrite) {
      const char* y = table->Find(op.src_key);
      src = y != nullptr ? storage::GetCounter(y) : 0;
    }
    if (rec == nullptr) continue;
    if (storage::IsWrite(op.kind)) undo.emplace_back(rec, std::string(rec, layout.size()));
    switch (op.kind) {
      case OpKind::kRead:
        break;
      case OpKind::kUpdate:
        storage::ApplyUpdate(rec, layout, txn.id, op.key);
        break;
      case OpKind::kDepWrite:
        storage::ApplyDepWrite(rec, layout, txn.id, src);
        break;
      case OpKind::kAbortIf:
        abort = abort || storage::AbortFires(storage::GetCounter(rec), txn.id, op.arg);
        break;
      case OpKind::kDebit:
        abort = abort || !storage::ApplyDebit(rec, op.arg);
        break;
      case OpKind::kCredit:
        storage::ApplyCredit(rec, op.arg);
        break;
    }
    if (abort) break;
  }
  if (abort) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) std::memcpy(it->first, it->second.data(), it->second.size());
  }
  return !abort;
}

inline void LoadTable(storage::Table* table, uint64_t records, int64_t counter) {
  std::string rec(table->layout().size(), '\0');
  for (uint64_t k = 0; k < records; ++k) {
    storage::InitRecord(rec.data(), table->layout(), k, counter);
    if (!table->Insert(k, rec.data()).ok()) std::abort();
  }
}

struct GenOptions {
  uint64_t keys = 200;          // keys drawn from [0, keys + absent)
  uint64_t absent = 0;          // extra keys that are not in the table
  uint32_t max_ops = 6;
  uint32_t dep_per_100 = 15;    // op mix, percent
  uint32_t abort_per_100 = 0;   // kAbortIf ops
  uint32_t fire_per_10k = 3000; // their firing rate
  uint32_t debit_per_100 = 0;   // kDebit/kCredit ops (amount < 1500)
};

// Random transactions with ids 1..n (keys may repeat within a txn).
inline std::vector<storage::Txn> RandomTxns(uint64_t seed, size_t n, const GenOptions& g) {
  Rng rng(seed);
  std::vector<storage::Txn> out(n);
  auto key = [&] { return rng.Next() % (g.keys + g.absent); };
  for (size_t i = 0; i < n; ++i) {
    storage::Txn& t = out[i];
    t.id = seed * 1000003 + i + 1;
    t.client = static_cast<uint32_t>(i % 7);
    const uint32_t nops = 1 + static_cast<uint32_t>(rng.Next() % g.max_ops);
    for (uint32_t j = 0; j < nops; ++j) {
      storage::Op op;
      op.key = key();
      const uint32_t pick = static_cast<uint32_t>(rng.Next() % 100);
      if (pick < g.dep_per_100) {
        op.kind = storage::OpKind::kDepWrite;
        op.src_key = key();
      } else if (pick < g.dep_per_100 + g.abort_per_100) {
        op.kind = storage::OpKind::kAbortIf;
        op.arg = g.fire_per_10k;
      } else if (pick < g.dep_per_100 + g.abort_per_100 + g.debit_per_100) {
        op.kind = rng.Next() % 2 == 0 ? storage::OpKind::kDebit : storage::OpKind::kCredit;
        op.arg = rng.Next() % 1500;
      } else {
        op.kind = rng.Next() % 2 == 0 ? storage::OpKind::kRead : storage::OpKind::kUpdate;
      }
      t.ops.push_back(op);
    }
  }
  return out;
}

}  // namespace qrstore::testing
