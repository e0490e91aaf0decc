#include "executor/abort_resolver.h"

#include <algorithm>
#include <cstring>

#include "executor/apply.h"
#include "executor/write_history.h"

namespace qrstore::executor {

using planner::FragKind;
using planner::Fragment;

namespace {
inline bool Before(uint32_t p1, uint32_t t1, uint32_t p2, uint32_t t2) { return p1 < p2 || (p1 == p2 && t1 < t2); }
}  // namespace

void KeySet::Reset(uint64_t dense_limit) {
  if (dense_limit != dense_limit_) {
    dense_limit_ = dense_limit;
    bits_.assign((dense_limit + 63) / 64, 0);
  } else {
    for (storage::Key k : dense_keys_) bits_[k >> 6] = 0;
  }
  dense_keys_.clear();
  sparse_.clear();
}

void AbortResolver::Touch(storage::Key key, char* rec, uint32_t rec_size) {
  if (!track_touches_ || !touched_.Insert(key)) return;
  touched_recs_.emplace_back(key, rec);
  touched_before_.append(rec, rec_size);
}

void AbortResolver::Walk(const std::vector<const planner::PlannedSlice*>& slices, const std::vector<ExecLog*>& logs,
                         storage::Table* table, BatchFates* out, uint32_t first_p, uint32_t first_t) {
  // Step 2: the walk.
  written_.Reset(table->capacity());
  read_.Reset(table->capacity());
  restored_.Reset(table->capacity());
  affected_.clear();
  frags_.clear();
  cursor_.assign(logs.size(), 0);
  for (size_t r = 0; r < logs.size(); ++r) {
    const auto& acc = logs[r]->accesses;
    size_t& c = cursor_[r];
    while (c < acc.size() && Before(acc[c].planner, acc[c].txn, first_p, first_t)) ++c;
  }
  const uint32_t rec_size = table->layout().size();
  for (uint32_t p = first_p; p < slices.size(); ++p) {
    const uint32_t ntxns = static_cast<uint32_t>(slices[p]->txns.size());
    for (uint32_t t = (p == first_p ? first_t : 0); t < ntxns; ++t) {
      current_.clear();
      bool affected = out->fates[p][t] == Fate::kLogic;
      for (uint32_t r = 0; r < logs.size(); ++r) {
        const auto& acc = logs[r]->accesses;
        size_t& c = cursor_[r];
        for (; c < acc.size() && acc[c].planner == p && acc[c].txn == t; ++c) {
          current_.emplace_back(r, static_cast<uint32_t>(c));
          if (!affected) {
            const Fragment& f = slices[p]->eqs[r][acc[c].frag];
            affected = (!written_.empty() && written_.Contains(f.key)) ||
                       (planner::IsWriteFrag(f.kind) && !read_.empty() && read_.Contains(f.key));
          }
        }
      }
      if (!affected) continue;
      const size_t begin = frags_.size();
      for (const auto& [r, c] : current_) {
        const Access& a = logs[r]->accesses[c];
        const Fragment& f = slices[p]->eqs[r][a.frag];
        frags_.emplace_back(&f, r);
        // By kind, not by what the parallel run did: a short debit may succeed when re-run.
        if (planner::IsWriteFrag(f.kind)) {
          written_.Insert(f.key);
        } else {
          read_.Insert(f.key);
        }
        // Step 3, done during the walk (it only reads the logs): the first affected write of
        // a key holds the image to restore.
        if (a.undo != Access::kNoUndo && restored_.Insert(f.key)) {
          char* rec = table->Find(f.key);
          QR_CHECK(rec != nullptr, "undo image for an absent key");
          table->BeforeWrite(f.key, cow_epoch_);
          Touch(f.key, rec, rec_size);
          std::memcpy(rec, logs[r]->undo.data() + a.undo, rec_size);
          ++out->restored_records;
        }
      }
      affected_.push_back(Affected{p, t, begin, frags_.size()});
    }
  }
  // Every logged access belongs to the batch and was walked.
  for (size_t r = 0; r < logs.size(); ++r) QR_CHECK_EQ(cursor_[r], logs[r]->accesses.size());

}

void AbortResolver::Reexecute(const Affected& a, const std::vector<const planner::PlannedSlice*>& slices,
                              storage::Table* table, BatchFates* out, const std::vector<char*>& read_values,
                              const std::vector<WriteHistory*>& histories) {
  const uint32_t rec_size = table->layout().size();
  const storage::RecordLayout& layout = table->layout();
  auto first = frags_.begin() + static_cast<ptrdiff_t>(a.begin);
  auto last = frags_.begin() + static_cast<ptrdiff_t>(a.end);
  std::sort(first, last, [](const auto& x, const auto& y) { return planner::FragOpBefore(*x.first, *y.first); });
  const planner::TxnContext& tc = slices[a.planner]->txns[a.txn];
  const uint64_t txn_id = tc.txn_id;
  undo_.clear();
  undo_index_.clear();
  dep_values_.clear();
  bool fired = false;
  for (auto it = first; it != last && !fired; ++it) {
    const Fragment& f = *it->first;
    WriteHistory* history = histories.empty() ? nullptr : histories[it->second];
    char* rec = table->Find(f.key);
    int64_t dep_in = 0, dep_out = 0;
    if (f.kind == FragKind::kDepWrite) {
      // The read half sorts first, so its value is here (absent keys publish 0).
      auto d = std::find_if(dep_values_.begin(), dep_values_.end(), [&](const auto& v) { return v.first == f.slot; });
      QR_CHECK(d != dep_values_.end(), "dependency value missing in re-execution");
      dep_in = d->second;
    }
    char* reads = read_values.empty() ? nullptr : read_values[a.planner];
    if (rec == nullptr) {
      if (f.kind == FragKind::kDepRead) dep_values_.emplace_back(f.slot, 0);
      if (f.kind == FragKind::kRead && reads != nullptr) std::memset(reads + uint64_t{f.slot} * rec_size, 0, rec_size);
      continue;
    }
    if (planner::IsWriteFrag(f.kind)) {
      table->BeforeWrite(f.key, cow_epoch_);
      Touch(f.key, rec, rec_size);
      undo_index_.emplace_back(rec, undo_.size());
      undo_.append(rec, rec_size);
      if (history != nullptr) history->Record(f.key, slices[a.planner]->batch, a.planner, a.txn, rec);
    }
    fired = ApplyFragment(f, rec, layout, txn_id, dep_in, &dep_out);
    if (f.kind == FragKind::kDepRead) dep_values_.emplace_back(f.slot, dep_out);
    if (f.kind == FragKind::kRead && reads != nullptr) {
      std::memcpy(reads + uint64_t{f.slot} * rec_size, HistoryOrRecord(tc, f.key, history, rec), rec_size);
    }
  }
  if (fired) {
    // Leaves no trace: undo in reverse order (a key written twice gets its oldest image).
    for (auto u = undo_index_.rbegin(); u != undo_index_.rend(); ++u) std::memcpy(u->first, undo_.data() + u->second, rec_size);
    ++out->aborted;
  }
  out->fates[a.planner][a.txn] = fired ? Fate::kLogic : Fate::kCommit;
  ++out->reexecuted;
  if (!histories.empty()) WriteHistory::Publish();  // the entries recorded above were streamed
}

void AbortResolver::Resolve(const std::vector<const planner::PlannedSlice*>& slices,
                            const std::vector<ExecLog*>& logs, storage::Table* table, BatchFates* out,
                            const std::vector<char*>& read_values, uint64_t* digest_delta,
                            const std::vector<WriteHistory*>& histories) {
  out->any_abort = false;
  out->aborted = out->reexecuted = out->restored_records = 0;
  bool any_vote = false;
  uint32_t first_p = UINT32_MAX, first_t = UINT32_MAX;
  for (const ExecLog* log : logs) {
    for (const Vote& v : log->votes) {
      any_vote = true;
      if (Before(v.planner, v.txn, first_p, first_t)) {
        first_p = v.planner;
        first_t = v.txn;
      }
    }
  }
  if (!any_vote) return;

  out->any_abort = true;
  out->fates.resize(slices.size());
  for (size_t p = 0; p < slices.size(); ++p) out->fates[p].assign(slices[p]->txns.size(), Fate::kCommit);
  // Mark the fired votes; the re-execution decides the final fate.
  for (const ExecLog* log : logs) {
    for (const Vote& v : log->votes) out->fates[v.planner][v.txn] = Fate::kLogic;
  }

  track_touches_ = digest_delta != nullptr;
  if (track_touches_) {
    touched_.Reset(table->capacity());
    touched_recs_.clear();
    touched_before_.clear();
  }

  Walk(slices, logs, table, out, first_p, first_t);

  // The write histories (write_history.h) hold what the parallel run wrote for the affected
  // txns: dropped, and recorded again below in the serial order.
  if (!histories.empty() && !affected_.empty()) {
    const uint64_t batch = slices.front()->batch;
    auto affected = [this](uint32_t p, uint32_t t) {
      return std::binary_search(affected_.begin(), affected_.end(), Affected{p, t, 0, 0},
                                [](const Affected& x, const Affected& y) { return Before(x.planner, x.txn, y.planner, y.txn); });
    };
    for (WriteHistory* h : histories) h->Drop(batch, affected);
  }

  // Step 4: serial re-execution.
  for (const Affected& a : affected_) Reexecute(a, slices, table, out, read_values, histories);
  const uint32_t rec_size = table->layout().size();
  if (digest_delta != nullptr) {
    for (size_t i = 0; i < touched_recs_.size(); ++i) {
      const auto& [key, rec] = touched_recs_[i];
      *digest_delta += storage::Table::DigestDelta(key, touched_before_.data() + i * rec_size, rec, rec_size);
    }
  }
}

}  // namespace qrstore::executor
