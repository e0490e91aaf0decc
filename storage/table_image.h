// TableImage: a copy of a Table's records taken at a batch boundary, for a checkpoint written
// in the background while execution goes on (issue 21: "two versions at the boundary").
//
// How it is taken. The executors stop at the boundary (executor/executor_stage.h: every range
// done with the batch, its aborts undone) and each copies one share of the table into the
// image: share i of n is the dense keys [capacity * i / n, capacity * (i + 1) / n); share 0 also
// copies the presence bitmap and the sparse records. The shares are disjoint, so the n copies
// run in parallel without locks; nothing writes the table until all n are done. An image is
// reused from one checkpoint to the next (its buffers are allocated once, at the table's size),
// so taking one allocates nothing after the first.
//
// Cost: one memcpy of the table's records, split over the executors (about 112 MB for 1M
// records of 100 bytes); the pause it adds to execution is measured in docs/benchmarks.md.
//
// Threads: CopyShare(i, n) calls for different i may run at once; everything else is one
// thread's (the checkpoint writer's, after the copy is complete).
#pragma once

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
    if (i == 0) {
      sparse_keys_.clear();
      sparse_bytes_.clear();
      for (size_t s = 0; s < t.sparse_keys_.size(); ++s) {
        if (t.sparse_keys_[s] == Table::kEmptySparse) continue;
        sparse_keys_.push_back(t.sparse_keys_[s]);
        sparse_bytes_.append(t.SparseRecord(t.sparse_slot_[s]), stride_);
      }
    }
  }

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
  RecordLayout layout_;
  uint64_t capacity_ = 0;
  uint64_t stride_ = 0;
  std::unique_ptr<char[]> dense_;  // capacity_ * stride_; only present keys' bytes are written
  std::vector<uint64_t> present_;
  std::vector<Key> sparse_keys_;
  std::string sparse_bytes_;  // sparse_keys_.size() records, in that order
};

}  // namespace qrstore::storage
