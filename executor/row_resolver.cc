#include "executor/row_resolver.h"

#include <algorithm>
#include <cstring>

namespace qrstore::executor {

using planner::Fragment;

void RowResolver::Begin(const std::vector<const planner::PlannedSlice*>& slices, const std::vector<ExecLog*>& logs,
                        storage::Table* table) {
  slices_ = slices;
  logs_ = logs;
  table_ = table;
  aborted_.resize(slices.size());
  for (size_t s = 0; s < slices.size(); ++s) aborted_[s].assign(slices[s]->txns.size(), 0);
}

int64_t RowResolver::LocalOf(uint32_t slice, uint32_t home) const {
  if (slice >= slices_.size()) return -1;
  const auto& txns = slices_[slice]->txns;
  auto it = std::lower_bound(txns.begin(), txns.end(), home,
                             [](const planner::TxnContext& t, uint32_t h) { return t.home_index < h; });
  return it != txns.end() && it->home_index == home ? it - txns.begin() : -1;
}

std::vector<RowTxn> RowResolver::FiredHere() const {
  std::vector<RowTxn> out;
  for (const ExecLog* log : logs_) {
    for (const Vote& v : log->votes) out.push_back(RowTxn{v.planner, slices_[v.planner]->txns[v.txn].home_index});
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

size_t RowResolver::Add(const std::vector<RowTxn>& ids) {
  size_t added = 0;
  for (const RowTxn& id : ids) {
    const int64_t local = LocalOf(id.slice, id.home);
    if (local < 0 || aborted_[id.slice][local] != 0) continue;
    aborted_[id.slice][local] = 1;
    ++added;
  }
  return added;
}

std::vector<RowTxn> RowResolver::Cascade() {
  std::vector<RowTxn> added;
  // Each range's log is its accesses in planned order. A pass marks every txn that accessed a
  // key written before it by an aborted txn; a txn marked in one range can taint keys of a
  // range walked before, so passes repeat until one adds nothing.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < logs_.size(); ++r) {
      tainted_.Reset(table_->capacity());
      for (const Access& a : logs_[r]->accesses) {
        const Fragment& f = slices_[a.planner]->eqs[r][a.frag];
        if (!Aborted(a.planner, a.txn) && tainted_.Contains(f.key)) {
          aborted_[a.planner][a.txn] = 1;
          added.push_back(RowTxn{a.planner, slices_[a.planner]->txns[a.txn].home_index});
          changed = true;
        }
        if (Aborted(a.planner, a.txn) && a.undo != Access::kNoUndo) tainted_.Insert(f.key);
      }
    }
  }
  std::sort(added.begin(), added.end());
  return added;
}

std::vector<RowTxn> RowResolver::AbortedHere() const {
  std::vector<RowTxn> out;
  for (uint32_t s = 0; s < aborted_.size(); ++s) {
    for (uint32_t i = 0; i < aborted_[s].size(); ++i) {
      if (aborted_[s][i] != 0) out.push_back(RowTxn{s, slices_[s]->txns[i].home_index});
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RowResolver::Undo(const std::vector<RowTxn>& fired, BatchFates* out, uint64_t* digest_delta) {
  out->any_abort = false;
  out->aborted = out->reexecuted = out->restored_records = 0;
  bool any = false;
  for (const auto& v : aborted_) any = any || std::find(v.begin(), v.end(), 1) != v.end();
  if (!any) return;
  out->any_abort = true;
  out->fates.resize(slices_.size());
  for (size_t s = 0; s < slices_.size(); ++s) {
    out->fates[s].assign(slices_[s]->txns.size(), Fate::kCommit);
    for (size_t i = 0; i < slices_[s]->txns.size(); ++i) {
      if (aborted_[s][i] != 0) {
        out->fates[s][i] = Fate::kCascade;
        ++out->aborted;
      }
    }
  }
  for (const RowTxn& id : fired) {
    const int64_t local = LocalOf(id.slice, id.home);
    if (local >= 0) out->fates[id.slice][local] = Fate::kLogic;
  }
  // Every access after an aborted write of a key is an aborted txn's (the cascade rule), so
  // the key's value before that first aborted write is its value in the committed run.
  const uint32_t rec_size = table_->layout().size();
  for (size_t r = 0; r < logs_.size(); ++r) {
    restored_.Reset(table_->capacity());
    const ExecLog& log = *logs_[r];
    for (const Access& a : log.accesses) {
      if (a.undo == Access::kNoUndo || !Aborted(a.planner, a.txn)) continue;
      const storage::Key key = slices_[a.planner]->eqs[r][a.frag].key;
      if (!restored_.Insert(key)) continue;
      char* rec = table_->Find(key);
      table_->BeforeWrite(key, cow_epoch_);
      const char* before = log.undo.data() + a.undo;
      if (digest_delta != nullptr) *digest_delta += storage::Table::DigestDelta(key, rec, before, rec_size);
      std::memcpy(rec, before, rec_size);
      ++out->restored_records;
    }
  }
}

}  // namespace qrstore::executor
