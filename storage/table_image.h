// TableImage: a copy of a Table's records taken at a batch boundary, for a checkpoint written
// in the background while execution goes on: two versions at the boundary (docs/recovery.md).
//
// Two ways to take one, both at a batch boundary (executor/executor_stage.h: a range is done with
// the batch once its executor finished it and the batch's aborts are undone).
//
// Copy-on-write (Begin, then CompleteCopy; the default). Nobody stops. The first executor at the
// boundary begins the image: it copies the presence bitmap (the index does not change while an
// engine runs), starts a new image epoch and arms the table; each executor, as it passes the
// boundary, takes that epoch as its own and goes on. Every writer of the table (the executors and
// the abort resolvers, through Table::BeforeWrite) passes its own epoch with each write: the
// first write of a record by a writer already in the new epoch copies the record into the image
// before it changes. Each record is only ever written by its own range's executor (or by the
// resolver while every executor waits), so a record whose owner has not reached the boundary
// yet is written in the old epoch and not copied: its value at the boundary is still to come.
// Once every executor has passed (Taken), the checkpoint writer thread copies every record not
// copied yet (CompleteCopy), then disarms the table. A write while armed costs one more load, or
// one record's copy. Per record, not per page or chunk: a batch of uniform random writes touches
// nearly every chunk of 4096 records, so per chunk its first batch would copy nearly the whole
// table inline. A table with sparse records (keys at or above its capacity) is armed with every
// executor stopped at the boundary instead (Begin with `stopped`), its sparse records copied
// there: they are few or none (YCSB's keys are all dense).
//
// Per record, one tag byte: the epoch of the last image that holds it, with a busy bit while it
// is being copied. A writer in epoch E that finds a record tagged otherwise moves the tag to
// E|busy (compare-and-swap), copies the record and sets it to E (release); one that finds E|busy
// waits for E (the other side copies one record: microseconds, unless it was descheduled). An
// image is complete only once every present record is tagged with its epoch, and the next one
// begins only after that, so tags are only ever this epoch or the one before (epochs cycle
// through 1..127).
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
// Threads: CopyShare(i, n) calls for different i may run at once. Begin: the first executor at
// the boundary (the executors' lock held). Preserve (through Table::BeforeWrite): any writer of
// the table, concurrently with each other and with CompleteCopy (the writer thread's, after
// Taken). Everything else is the writer thread's, after the copy is complete.
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
    tag_.reset(new std::atomic<uint8_t>[capacity_]);
    for (uint64_t k = 0; k < capacity_; ++k) tag_[k].store(0, std::memory_order_relaxed);
  }
  // Writes every page of the buffers once, so that the first copy does not fault them in (the
  // page faults would make the executors' first pause many times longer than later ones:
  // docs/benchmarks-log.md). Prepare first; not while a copy runs.
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

  // Copy-on-write, by the first executor at the boundary: copies the presence bitmap, starts the
  // next epoch (returned: each executor takes it as it passes the boundary) and arms `t`.
  // `stopped`: every writer of `t` is stopped at the boundary (required when `t` has sparse
  // records, which are copied here then). Prepare(t) first; not while armed.
  uint8_t Begin(Table& t, bool stopped);
  // The epoch Begin started (0 before the first).
  uint8_t epoch() const { return epoch_.load(std::memory_order_relaxed); }
  // Copy-on-write, once every writer passed the boundary: copies every record not copied yet
  // (beside the writers), then disarms `t`. A no-op unless armed. Returns the records it copied
  // itself (the rest were copied by writers).
  uint64_t CompleteCopy(Table& t);
  // Whether Begin came and CompleteCopy has not finished.
  bool armed() const { return armed_; }
  // Whether the last Begin was told every writer was stopped.
  bool began_stopped() const { return began_stopped_; }
  // Through Table::BeforeWrite, before `key`'s record of `t` is written by a writer in epoch
  // `epoch` while armed: copies it into the image unless that is done or the writer is still in
  // the epoch before (or waits while another thread copies it).
  void Preserve(const Table& t, Key key, uint8_t epoch) {
    if (key >= capacity_) return;  // sparse: copied by Begin
    // A writer not in this image's epoch has not reached the boundary yet (or its stage began
    // after it: epoch 0): what it writes is still before the boundary.
    if (epoch != epoch_.load(std::memory_order_relaxed)) return;
    if (CopyOnce(t, key, epoch)) preserved_.fetch_add(1, std::memory_order_relaxed);
  }
  // Records writers copied (Preserve) since the last Begin.
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
  static constexpr uint8_t kBusy = 0x80;  // a tag's busy bit; epochs are 1..127
  static void WaitTag(std::atomic<uint8_t>& s, uint8_t epoch);  // another thread copies the record: wait
  // Copies dense record `key` of `t` into the image for epoch `epoch` unless it is tagged so
  // already; waits while another thread copies it. True if this call copied it.
  bool CopyOnce(const Table& t, Key key, uint8_t epoch) {
    std::atomic<uint8_t>& s = tag_[key];
    uint8_t v = s.load(std::memory_order_acquire);
    if (v == epoch) return false;
    if (v != (epoch | kBusy) && s.compare_exchange_strong(v, epoch | kBusy, std::memory_order_acq_rel)) {
      std::memcpy(dense_.get() + key * stride_, t.dense_.get() + key * stride_, stride_);
      s.store(epoch, std::memory_order_release);
      return true;
    }
    WaitTag(s, epoch);
    return false;
  }
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
  // Copy-on-write: one tag per dense key (see the top of the file). epoch_, armed_ and
  // began_stopped_: written by Begin (an executor, before Taken hands the image over) and by
  // CompleteCopy (the writer thread).
  std::unique_ptr<std::atomic<uint8_t>[]> tag_;
  std::atomic<uint8_t> epoch_{0};  // read by writers (Preserve) while Begin may change it
  bool armed_ = false;
  bool began_stopped_ = false;
  std::atomic<uint64_t> preserved_{0};
};

}  // namespace qrstore::storage
