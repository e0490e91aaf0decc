// TableImage: a copy of a Table's records taken at a batch boundary, for a checkpoint written
// in the background while execution goes on (issue 21: "two versions at the boundary").
//
// Two ways to take one; the executors stop at the boundary for both (executor/executor_stage.h:
// every range done with the batch, its aborts undone).
//
// Copy-on-write (Arm, then CompleteCopy; the default). The last executor at the boundary arms
// the image: it copies the presence bitmap and the sparse records (few or none: YCSB's keys are
// all dense) and marks every dense record "pending"; then every executor goes on at once. From
// then on, the first write of a pending record (Table::BeforeWrite, called by every writer of
// the table while an engine runs: the executors and the abort resolvers) copies that record into
// the image before it changes; the checkpoint writer thread copies every record still pending
// (CompleteCopy), then disarms the table. So the executors' pause is the boundary itself (all
// arrive, a bitmap copy and a memset of one byte per record), not a copy of the whole table, and
// a write while the copy runs costs one more load, or one record's copy. Per record, not per
// page or chunk: a batch of uniform random writes touches nearly every chunk of 4096 records,
// so per chunk its first batch would copy nearly the whole table inline.
//
// Per record, a state byte: clean (copied, or not armed), pending, copying. Whoever moves it from
// pending to copying (compare-and-swap) copies the record and sets it clean (release); a writer
// that finds it copying waits for clean (the other side copies one record: microseconds, unless
// it was descheduled). The executors see the armed state through the boundary's lock; the writer
// thread sees it through Taken (executor/executor_stage.h, ImageSink).
//
// Paused copy (CopyShare; server.checkpoint_copy_on_write=false). The executors each copy one
// share of the table into the image at the boundary: share i of n is the dense keys
// [capacity * i / n, capacity * (i + 1) / n); share 0 also copies the presence bitmap and the
// sparse records. The shares are disjoint, so the n copies run in parallel without locks;
// nothing writes the table until all n are done.
//
// An image is reused from one checkpoint to the next (its buffers are allocated once, at the
// table's size), so taking one allocates nothing after the first.
//
// Cost: one copy of the table's records (about 112 MB for 1M records of 100 bytes), paid by the
// executors at the boundary (paused) or mostly by the writer thread beside them (copy-on-write);
// docs/benchmarks.md has the measurements.
//
// Threads: CopyShare(i, n) calls for different i may run at once. Arm: one executor at the
// boundary. Preserve (through Table::BeforeWrite): any writer of the table, concurrently with
// each other and with CompleteCopy (the writer thread's). Everything else is the writer thread's,
// after the copy is complete.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "storage/table.h"

namespace qrstore::storage {

class TableImage {
 public:
  TableImage() = default;
  TableImage(const TableImage&) = delete;
  TableImage& operator=(const TableImage&) = delete;

  // Makes the buffers fit `t` (once; a no-op for the same shape). Not while a copy runs.
  void Prepare(const Table& t) {
    if (dense_ && capacity_ == t.capacity_ && stride_ == t.stride_) return;
    layout_ = t.layout_;
    capacity_ = t.capacity_;
    stride_ = t.stride_;
    dense_.reset(new char[capacity_ * stride_]);
    present_.assign(t.present_.size(), 0);
    state_.reset(new std::atomic<uint8_t>[capacity_]);
    for (uint64_t k = 0; k < capacity_; ++k) state_[k].store(kClean, std::memory_order_relaxed);
  }
  // Writes every page of the buffers once, so that the first copy does not fault them in: the
  // executors' first pause was 0.5-1 s for 1M records of 100 bytes with three nodes on 2 cores,
  // against about 50 ms for later ones. Prepare first; not while a copy runs.
  void Prefault() {
    if (dense_) std::memset(dense_.get(), 0, capacity_ * stride_);
  }

  // Copies share i of n of `t` (see above). Prepare(t) first.
  void CopyShare(const Table& t, uint32_t i, uint32_t n) {
    QR_CHECK(dense_ && capacity_ == t.capacity_ && stride_ == t.stride_, "TableImage::CopyShare before Prepare");
    QR_CHECK(i < n);
    // Shares end on a 64-key word so that no two shares touch one word of the bitmap.
    const uint64_t words = t.present_.size();
    const uint64_t w0 = words * i / n, w1 = words * (i + 1) / n;
    for (uint64_t w = w0; w < w1; ++w) {
      uint64_t bits = t.present_[w];
      present_[w] = bits;
      // Runs of present keys are copied with one memcpy each (a full table: one per share).
      while (bits != 0) {
        const uint32_t lo = static_cast<uint32_t>(__builtin_ctzll(bits));
        const uint64_t run = bits >> lo;
        const uint32_t len = run == ~uint64_t{0} >> lo ? 64 - lo : static_cast<uint32_t>(__builtin_ctzll(~run));
        const uint64_t k = w * 64 + lo;
        std::memcpy(dense_.get() + k * stride_, t.dense_.get() + k * stride_, uint64_t{len} * stride_);
        bits = len + lo >= 64 ? 0 : bits & (~uint64_t{0} << (lo + len));
      }
    }
    if (i == 0) CopySparse(t);
  }

  // Copy-on-write, at the boundary (every writer of `t` stopped there): copies the presence
  // bitmap and the sparse records, marks every dense record pending and arms `t` (its writers
  // call Preserve through Table::BeforeWrite from now on). Prepare(t) first; not while armed.
  void Arm(Table& t);
  // Copy-on-write: copies every record still pending (beside the writers), then disarms `t`.
  // A no-op unless armed. Returns the records it copied itself (the rest were copied by writers).
  uint64_t CompleteCopy(Table& t);
  // Whether Arm came and CompleteCopy has not finished.
  bool armed() const { return armed_; }
  // Through Table::BeforeWrite, before `key`'s record of `t` is written while armed: copies it
  // into the image unless done already (or waits while the writer thread copies it).
  void Preserve(const Table& t, Key key) {
    if (key >= capacity_) return;  // sparse: copied by Arm
    std::atomic<uint8_t>& s = state_[key];
    uint8_t v = s.load(std::memory_order_acquire);
    if (v == kClean) return;
    if (v == kPending && s.compare_exchange_strong(v, kCopying, std::memory_order_acq_rel)) {
      std::memcpy(dense_.get() + key * stride_, t.dense_.get() + key * stride_, stride_);
      s.store(kClean, std::memory_order_release);
      preserved_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    WaitClean(s);
  }
  // Records writers copied (Preserve) since the last Arm.
  uint64_t preserved() const { return preserved_.load(std::memory_order_relaxed); }

  const RecordLayout& layout() const { return layout_; }
  uint64_t capacity() const { return capacity_; }

  // f(Key, const char* record) for every record: dense keys in key order, then the sparse ones.
  template <typename F>
  void ForEach(F&& f) const {
    for (uint64_t w = 0; w < present_.size(); ++w) {
      uint64_t bits = present_[w];
      while (bits != 0) {
        const uint64_t k = w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
        bits &= bits - 1;
        f(static_cast<Key>(k), static_cast<const char*>(dense_.get() + k * stride_));
      }
    }
    for (size_t s = 0; s < sparse_keys_.size(); ++s) f(sparse_keys_[s], sparse_bytes_.data() + s * stride_);
  }

  uint64_t records() const {
    uint64_t n = sparse_keys_.size();
    for (uint64_t w : present_) n += static_cast<uint64_t>(__builtin_popcountll(w));
    return n;
  }
  // Table::Digest() of the table the image was copied from, at the boundary.
  uint64_t Digest() const {
    uint64_t d = 0;
    ForEach([&](Key k, const char* rec) { d += Table::RecordDigest(k, rec, layout_.size()); });
    return d;
  }

 private:
  static constexpr uint8_t kClean = 0, kPending = 1, kCopying = 2;
  static void WaitClean(std::atomic<uint8_t>& s);  // another thread copies the record: wait
  void CopySparse(const Table& t) {
    sparse_keys_.clear();
    sparse_bytes_.clear();
    for (size_t s = 0; s < t.sparse_keys_.size(); ++s) {
      if (t.sparse_keys_[s] == Table::kEmptySparse) continue;
      sparse_keys_.push_back(t.sparse_keys_[s]);
      sparse_bytes_.append(t.SparseRecord(t.sparse_slot_[s]), stride_);
    }
  }

  RecordLayout layout_;
  uint64_t capacity_ = 0;
  uint64_t stride_ = 0;
  std::unique_ptr<char[]> dense_;  // capacity_ * stride_; only present keys' bytes are written
  std::vector<uint64_t> present_;
  std::vector<Key> sparse_keys_;
  std::string sparse_bytes_;  // sparse_keys_.size() records, in that order
  // Copy-on-write: one state per dense key (kClean, kPending, kCopying); armed_ is the writer
  // thread's view (Arm happens before Taken hands the image over; CompleteCopy clears it).
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
  bool armed_ = false;
  std::atomic<uint64_t> preserved_{0};
};

}  // namespace qrstore::storage
