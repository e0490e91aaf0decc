#include "executor/range_executor.h"

#include <algorithm>
#include <cstring>

#include "executor/apply.h"

namespace qrstore::executor {

using planner::FragKind;
using planner::Fragment;

void RangeExecutor::RunEq(const planner::PlannedSlice& slice, DepBoard* deps, bool log, char* read_values, bool drain) {
  if (log) {
    if (!park_when_logging_) Drain();  // logged slices run strictly in planned order (see Run)
    if (track_digest_) {
      Run<true, true>(slice, deps, read_values);
    } else {
      Run<true, false>(slice, deps, read_values);
    }
  } else if (track_digest_) {
    Run<false, true>(slice, deps, read_values);
  } else {
    Run<false, false>(slice, deps, read_values);
  }
  if (drain) Drain();
  if (row_sender_ != nullptr) row_sender_->Flush();
  if (history_ != nullptr) WriteHistory::Publish();  // its entries are streamed: fence them
}

void RangeExecutor::Drain() {
  while (!parked_.Empty()) {
    if (track_digest_) {
      RunParked<true>(/*block=*/true);
    } else {
      RunParked<false>(/*block=*/true);
    }
  }
  // Parked kDepSend fragments ran here: what they held back goes out before the executor idles.
  if (row_sender_ != nullptr) row_sender_->Flush();
  if (history_ != nullptr) WriteHistory::Publish();
}

void RangeExecutor::Capture(const std::vector<const planner::PlannedSlice*>& slices, std::vector<storage::Key>* keys,
                            std::string* images) const {
  keys->clear();
  images->clear();
  for (const planner::PlannedSlice* s : slices) {
    for (const Fragment& f : s->eqs[range_]) {
      if (planner::IsWriteFrag(f.kind)) keys->push_back(f.key);
    }
  }
  std::sort(keys->begin(), keys->end());
  keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
  const uint32_t rec_size = table_->layout().size();
  images->reserve(keys->size() * rec_size);
  size_t kept = 0;
  for (storage::Key k : *keys) {
    const char* rec = table_->Find(k);
    if (rec == nullptr) continue;  // an absent key: its writes did nothing
    (*keys)[kept++] = k;
    images->append(rec, rec_size);
  }
  keys->resize(kept);
}

void RangeExecutor::Install(const std::vector<storage::Key>& keys, const std::string& images) {
  const uint32_t rec_size = table_->layout().size();
  QR_CHECK_EQ(images.size(), keys.size() * rec_size);
  for (size_t i = 0; i < keys.size(); ++i) {
    char* rec = table_->Find(keys[i]);
    if (rec == nullptr) continue;  // the leader captures present records only; nothing to do
    table_->BeforeWrite(keys[i], cow_epoch_);
    const char* image = images.data() + i * rec_size;
    if (track_digest_) digest_delta_ += storage::Table::DigestDelta(keys[i], rec, image, rec_size);
    std::memcpy(rec, image, rec_size);
  }
}

template <bool kLog, bool kDigest>
inline void RangeExecutor::Exec(const planner::PlannedSlice& slice, uint32_t i, DepBoard* deps, char* read_values) {
  const Fragment& f = slice.eqs[range_][i];
  const storage::RecordLayout& layout = table_->layout();
  const uint32_t rec_size = layout.size();
  char* rec = table_->Find(f.key);
  uint64_t undo = Access::kNoUndo;
  bool fired = false;
  if (rec == nullptr) {
    // Absent key: a no-op (documented in engine/engine.h); a dependency still flows, a read
    // reads zeros.
    if (f.kind == FragKind::kDepRead) deps->Publish(f.slot, 0);
    if (f.kind == FragKind::kDepSend) SendDep(slice, f, 0);
    if (WaitsForDep(f.kind)) (void)WaitDep(deps, f.slot);
    if (f.kind == FragKind::kRead && read_values != nullptr) {
      std::memset(read_values + uint64_t{f.slot} * rec_size, 0, rec_size);
    }
  } else {
    const bool writes = planner::IsWriteFrag(f.kind);
    if (writes) table_->BeforeWrite(f.key, cow_epoch_);  // a copy-on-write checkpoint image keeps the old value
    if constexpr (kLog) {
      if (writes) {
        undo = log_.undo.size();
        log_.undo.append(rec, rec_size);
      }
    }
    if constexpr (kDigest) {
      if (writes) std::memcpy(scratch_.data(), rec, rec_size);
    }
    if (writes && history_ != nullptr && history_->recording()) history_->Record(f.key, slice.batch, slice.planner, f.txn, rec);
    const int64_t dep_in = WaitsForDep(f.kind) ? WaitDep(deps, f.slot) : 0;
    int64_t dep_out = 0;
    fired = ApplyFragment(f, rec, layout, slice.txns[f.txn].txn_id, dep_in, &dep_out);
    if (f.kind == FragKind::kDepRead) deps->Publish(f.slot, dep_out);
    if (f.kind == FragKind::kDepSend) SendDep(slice, f, dep_out);
    if (f.kind == FragKind::kRead && read_values != nullptr) {
      std::memcpy(read_values + uint64_t{f.slot} * rec_size, HistoryOrRecord(slice.txns[f.txn], f.key, history_, rec),
                  rec_size);
    }
    if constexpr (kDigest) {
      if (writes) digest_delta_ += storage::Table::DigestDelta(f.key, scratch_.data(), rec, rec_size);
    }
  }
  if constexpr (kLog) {
    if (fired) {
      log_.votes.push_back(Vote{slice.planner, f.txn});
      if (undo != Access::kNoUndo) {  // a short debit wrote nothing: drop its image
        log_.undo.resize(undo);
        undo = Access::kNoUndo;
      }
    }
    log_.accesses.push_back(Access{slice.planner, f.txn, i, undo});
  } else {
    // Only slices with abortable ops can fire, and those always run with logging.
    QR_CHECK(!fired, "abort vote fired in a slice planned without abortable ops");
  }
}

template <bool kLog, bool kDigest>
void RangeExecutor::Run(const planner::PlannedSlice& slice, DepBoard* deps, char* read_values) {
  const std::vector<Fragment>& eq = slice.eqs[range_];
  // Records are random over a table far larger than the caches: prefetching a few fragments
  // ahead overlaps the misses.
  constexpr size_t kAhead = 16;
  const uint32_t n = static_cast<uint32_t>(eq.size());
  for (uint32_t i = 0; i < n && i < kAhead; ++i) table_->Prefetch(eq[i].key);
  if (kLog && !park_when_logging_) {
    // Logged slices run strictly in planned order: the abort resolver reads the accesses as
    // the range's serial history.
    for (uint32_t i = 0; i < n; ++i) {
      if (i + kAhead < n) table_->Prefetch(eq[i + kAhead].key);
      Exec<kLog, kDigest>(slice, i, deps, read_values);
    }
  } else {
    // Deferral: a kDepWrite whose value is not published yet is parked instead of waited for,
    // and the executor goes on with the next fragments; every later fragment on a parked key is
    // parked behind it, so each record still sees its fragments in planned order (the state,
    // the read values and the digest are those of the planned order). Parked fragments run in
    // planned order as soon as the oldest one's value is there, and all of them by Drain()
    // (RunEq drains unless told not to: then they may wait across the next slices of the
    // batch, still parking every later fragment on their keys). Deadlock-free: the only
    // blocking wait is the oldest parked fragment's (or any fragment's when the park is full),
    // and the value it waits for comes from a fragment earlier in the global (slice, txn, op)
    // order, which its executor has passed or parked earlier still.
    for (uint32_t i = 0; i < n; ++i) {
      if (i + kAhead < n) table_->Prefetch(eq[i + kAhead].key);
      const Fragment& f = eq[i];
      if (!parked_.Empty()) {
        RunParked<kDigest>(/*block=*/false);
        if (parked_.Full()) RunParked<kDigest>(/*block=*/true);
        if (!parked_.Empty() && parked_.MayHold(f.key)) {
          parked_.Push({&slice, deps, read_values, i, kLog}, f.key);
          continue;
        }
      }
      if (WaitsForDep(f.kind) && !deps->Ready(f.slot)) {
        parked_.Push({&slice, deps, read_values, i, kLog}, f.key);
        continue;
      }
      Exec<kLog, kDigest>(slice, i, deps, read_values);
    }
  }
}

template <bool kDigest>
void RangeExecutor::RunParked(bool block) {
  // block: run at least the oldest one (waiting for its value), then whatever is ready.
  while (!parked_.Empty()) {
    const Parked::Entry e = parked_.Front();
    const Fragment& head = e.slice->eqs[range_][e.frag];
    if (!block && WaitsForDep(head.kind) && !e.deps->Ready(head.slot)) return;
    block = false;
    if (e.log) {
      Exec<true, kDigest>(*e.slice, e.frag, e.deps, e.read_values);
    } else {
      Exec<false, kDigest>(*e.slice, e.frag, e.deps, e.read_values);
    }
    parked_.Pop(head.key);
  }
}

template void RangeExecutor::Run<true, true>(const planner::PlannedSlice&, DepBoard*, char*);
template void RangeExecutor::Run<true, false>(const planner::PlannedSlice&, DepBoard*, char*);
template void RangeExecutor::Run<false, true>(const planner::PlannedSlice&, DepBoard*, char*);
template void RangeExecutor::Run<false, false>(const planner::PlannedSlice&, DepBoard*, char*);

}  // namespace qrstore::executor
