// WriteHistory: the before-images of one executor range's recent writes, so that the value a
// key had at an earlier place in the global order can be found again (docs/sessions.md, "Read
// values of retries"). A client that retries a txn which committed before a failover is
// answered from the replicated session table; what the txn read is not in it (followers replay
// slices without their plain reads). The retry carries the txn's ops, so the leader knows which
// keys it read, and the value key k had just before the txn's position P is the before-image
// of the first write to k at or after P, or, when k has not been written since, its current
// value. Every node of a group records its writes here (a follower may be promoted), within a
// byte budget; the oldest entries are overwritten.
//
// Order. Per key, entries are recorded in the key's execution order, which is the planned
// order (executors keep each key's fragments in planned order, and the abort resolver drops
// the entries of the txns it re-executes and records them again in its serial order; see
// Drop). So the first live entry at or after P in recording order is the first write at or
// after P in the global order.
//
// Threads: Record, Drop and FirstAtOrAfter by the range's executor thread (or the abort
// resolver while every executor waits at the batch barrier); dropped_below() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>

#include "planner/eq.h"
#include "storage/txn.h"

namespace qrstore::executor {

class WriteHistory {
 public:
  // `budget_bytes` for entries of a `record_bytes` image and a 32-byte header each; at least one
  // entry. `first_batch`: the first batch whose writes it will see (a node restarted from a
  // checkpoint starts after it): it answers for no position before.
  WriteHistory(uint32_t record_bytes, uint64_t budget_bytes, uint64_t first_batch = 0);
  WriteHistory(const WriteHistory&) = delete;
  WriteHistory& operator=(const WriteHistory&) = delete;

  // The write of txn `txn` of slice (batch, planner) to `key`, whose record held `image` just
  // before it. Overwrites the oldest entry when full.
  // Written with streaming stores: call Publish() before another thread may read the entries
  // (the executor does at the end of every slice it ran).
  void Record(storage::Key key, uint64_t batch, uint32_t planner, uint32_t txn, const char* image);
  // Orders the entries recorded so far before the caller's later stores (a store fence).
  static void Publish();

  // Drops the entries of batch `batch` whose txn `drop(planner, txn)` names. Only for the batch
  // being resolved (recorded last: no later batch has run yet).
  template <typename F>
  void Drop(uint64_t batch, F drop) {
    // The batch before may have left parked fragments to run among this batch's first ones;
    // nothing older can be after them.
    for (uint64_t s = next_; s > Oldest(); --s) {
      Header* h = At(s - 1);
      if (h->batch + 1 < batch) break;
      if (h->batch == batch && h->planner != kDropped && drop(h->planner, h->txn)) h->planner = kDropped;
    }
  }

  // The image of the first live entry for `key` at or after position (batch, planner, txn), or
  // nullptr when there is none (the key was not written since, as far as the history goes: see
  // Covers). Builds its index lazily: the first call indexes the entries from `batch` on (a hash
  // insert each); later calls index only what came since, unless they ask about older batches.
  const char* FirstAtOrAfter(storage::Key key, uint64_t batch, uint32_t planner, uint32_t txn);

  // True if the history saw every write of batch `batch` and later: it began at or before it,
  // no entry of it or later was overwritten, and it was not stopped (so FirstAtOrAfter answers
  // for every position in it and after). Any thread; only turns
  // false as time goes on.
  bool Covers(uint64_t batch) const { return dropped_below_.load(std::memory_order_acquire) <= batch; }

  // Records nothing from now on (a leader's, whose retries no longer need it: docs/sessions.md);
  // Covers is false from then on. Any thread; Record may still be running, so the memory stays.
  void Stop() {
    stopped_.store(true, std::memory_order_relaxed);
    dropped_below_.store(UINT64_MAX, std::memory_order_release);
  }
  bool recording() const { return !stopped_.load(std::memory_order_relaxed); }

  uint64_t capacity() const { return capacity_; }

 private:
  struct Header {
    storage::Key key;
    uint64_t batch;
    uint32_t planner;  // kDropped: dropped by the abort resolver
    uint32_t txn;
    uint64_t prev;     // the previous entry's sequence number for the key + 1 (0: none); index
  };
  static constexpr uint32_t kDropped = UINT32_MAX;
  static bool AtOrAfter(const Header& h, uint64_t batch, uint32_t planner, uint32_t txn) {
    if (h.batch != batch) return h.batch > batch;
    if (h.planner != planner) return h.planner > planner;
    return h.txn >= txn;
  }
  uint64_t Oldest() const { return next_ > capacity_ ? next_ - capacity_ : 0; }
  Header* At(uint64_t seq) { return reinterpret_cast<Header*>(slots_.get() + (seq % capacity_) * slot_bytes_); }
  const char* Image(uint64_t seq) { return reinterpret_cast<const char*>(At(seq)) + sizeof(Header); }
  // Links every entry from batch `batch`'s first on into the index.
  void CatchUp(uint64_t batch);

  const uint32_t record_bytes_;
  const uint64_t slot_bytes_;
  const uint64_t capacity_;
  std::unique_ptr<char[]> slots_;  // capacity_ slots: a Header, then the image
  uint64_t next_ = 0;              // sequence number of the next entry
  // One past the newest batch of an overwritten entry, at least first_batch (nothing before it
  // was ever seen).
  std::atomic<uint64_t> dropped_below_;
  std::atomic<bool> stopped_{false};
  // Where each batch's entries begin: (batch, first sequence number), a mark per batch newer
  // than every earlier entry's. Record learns the batch of the entry it overwrites from them
  // (the newest mark at or below its sequence number: at least its batch, so Covers errs on
  // the safe side) without reading the slot back. At most one per entry.
  std::deque<std::pair<uint64_t, uint64_t>> marks_;
  // Lazy index: the newest indexed entry per key (its sequence number + 1); entries in
  // [indexed_from_, indexed_to_) are linked through Header::prev (0 at the first indexed one).
  std::unordered_map<storage::Key, uint64_t> newest_;
  uint64_t indexed_from_ = UINT64_MAX;
  uint64_t indexed_to_ = 0;
};

// What a kRead of txn `tc` on `key` returns, `rec` being the record now: a history read's
// (TxnContext::history) is the key's value just before the position it names; any other kRead's
// (and a history read's on a node without a history: the caller then reports no values) is the
// record.
inline const char* HistoryOrRecord(const planner::TxnContext& tc, storage::Key key, WriteHistory* history,
                                   const char* rec) {
  if (history == nullptr || !tc.history) return rec;  // the pointer first: no context read without histories
  const char* image = history->FirstAtOrAfter(key, tc.history_batch, tc.history_planner, tc.history_index);
  return image != nullptr ? image : rec;
}

}  // namespace qrstore::executor
