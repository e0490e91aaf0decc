// Table: an in-memory table of fixed-size records keyed by 64-bit keys.
//
// Ownership and threads. A Table owns its record bytes. It is filled (Insert) by one thread
// before an engine runs; while an engine runs, the index is read-only and each record is read
// and written only by the executor thread that owns the record's key range, so Find and the
// record bytes need no locks (the engine's stage hand-offs give the happens-before edges).
// Insert must not run concurrently with anything else on the same Table.
//
// Layout (why it is fast). Keys below `capacity` live in a dense region: the record of key k is
// at dense_[k * stride] and a presence bitmap (capacity/8 bytes, usually cache resident) says
// whether k was inserted, so a probe costs about one cache miss. Other keys go to a sparse
// region: an open-addressing hash index (linear probing) from key to a slot in chunked storage;
// chunks never move, so a record pointer stays valid for the Table's lifetime. The dense region
// is allocated uninitialized, so pages of keys never inserted are never touched by the OS.
//
// Invariants: size() <= capacity; every key appears at most once; record bytes are
// layout.size() bytes; Digest() depends only on the set of (key, record bytes) pairs.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "common/hash.h"
#include "common/status.h"
#include "storage/record.h"
#include "storage/txn.h"

namespace qrstore::storage {

class TableImage;

class Table {
 public:
  // capacity = the maximum number of records (>= 1). Keys < capacity use the dense fast path.
  Table(RecordLayout layout, uint64_t capacity);
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  // The bytes a Table of `capacity` records of `layout` holds once every key below capacity is
  // inserted (records plus the presence bitmap); UINT64_MAX if that overflows. Callers check it
  // against the memory available before building a large table (common/memory.h).
  static uint64_t MemoryBytes(RecordLayout layout, uint64_t capacity);

  const RecordLayout& layout() const { return layout_; }
  uint64_t size() const { return size_; }
  // Records with keys at or above capacity (the sparse region).
  uint64_t sparse_size() const { return sparse_count_; }
  uint64_t capacity() const { return capacity_; }

  // Copies layout().size() bytes from `record`. Errors: full (kResourceExhausted) or duplicate
  // key (kInvalidArgument).
  Status Insert(Key key, const char* record);

  // The record of `key`, or nullptr if absent. The pointer stays valid for the Table's life.
  char* Find(Key key) { return const_cast<char*>(std::as_const(*this).Find(key)); }
  const char* Find(Key key) const {
    if (key < capacity_) {
      if ((present_[key >> 6] >> (key & 63)) & 1) return dense_.get() + key * stride_;
      return nullptr;
    }
    return FindSparse(key);
  }

  // Call before writing the record of `key` (through Find's pointer) while an engine runs, with
  // the writer's image epoch (the epoch of the last checkpoint boundary its executor passed; 0
  // before any). While a copy-on-write image is being taken (storage/table_image.h) a writer
  // past its boundary first puts the record's value at the boundary into the image, if nobody has
  // yet; otherwise it is one load of a flag that rarely changes.
  void BeforeWrite(Key key, uint8_t epoch) {
    if (cow_armed_.load(std::memory_order_acquire)) PreserveForImage(key, epoch);
  }

  // A hint that `key` will be probed soon (executors prefetch a few fragments ahead).
  void Prefetch(Key key) const {
    if (key < capacity_) {
      const char* p = dense_.get() + key * stride_;
      PrefetchLine(p);
      PrefetchLine(p + stride_ - 1);
    }
  }
  // prefetcht0 of the line holding `p`. Not __builtin_prefetch: GCC 12 at -O2 drops a
  // __builtin_prefetch inside a conditional block (as in Prefetch above), and it did: the
  // executors' prefetching had compiled to nothing (the test executor_prefetch_emitted checks
  // that the executors' object code holds the instruction).
  static void PrefetchLine(const char* p) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(*p));
#else
    __builtin_prefetch(p, 0, 3);
#endif
  }

  // f(Key, const char* record) for every record: dense keys in key order, then sparse keys in
  // index order (callers must not depend on the order).
  template <typename F>
  void ForEach(F&& f) const {
    for (uint64_t w = 0; w < present_.size(); ++w) {
      uint64_t bits = present_[w];
      while (bits != 0) {
        uint64_t k = w * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
        bits &= bits - 1;
        f(static_cast<Key>(k), static_cast<const char*>(dense_.get() + k * stride_));
      }
    }
    for (size_t i = 0; i < sparse_keys_.size(); ++i) {
      if (sparse_keys_[i] != kEmptySparse) f(sparse_keys_[i], static_cast<const char*>(SparseRecord(sparse_slot_[i])));
    }
  }

  // Order-independent 64-bit digest: the sum (mod 2^64) over every record and every 8-byte
  // chunk j of its bytes (the last one zero-padded) of ChunkHash(key, j, chunk). Equal tables
  // give equal digests on every host. Chunk-wise so that a change to a few bytes of a record
  // can be folded in by hashing only the chunks that changed (DigestDelta): executors keep the
  // digest per batch that way, without scanning the table.
  uint64_t Digest() const;

  // One record's contribution to Digest().
  static uint64_t RecordDigest(Key key, const char* record, uint32_t size) {
    const uint64_t seed = Mix64(key);
    uint64_t sum = 0;
    for (uint32_t j = 0; j * 8 < size; ++j) sum += ChunkHash(seed, j, Chunk(record, size, j));
    return sum;
  }
  // Digest() after record `key` changed from `before` to `after` (both `size` bytes) minus
  // Digest() before: add it to a running digest. Hashes only the chunks that differ.
  static uint64_t DigestDelta(Key key, const char* before, const char* after, uint32_t size) {
    uint64_t delta = 0;
    uint64_t seed = 0;
    bool seeded = false;
    for (uint32_t j = 0; j * 8 < size; ++j) {
      const uint64_t b = Chunk(before, size, j), a = Chunk(after, size, j);
      if (a == b) continue;
      if (!seeded) {
        seed = Mix64(key);
        seeded = true;
      }
      delta += ChunkHash(seed, j, a) - ChunkHash(seed, j, b);
    }
    return delta;
  }

 private:
  friend class TableImage;  // copies the records at a batch boundary (storage/table_image.h)

  // Sparse keys are >= capacity_ >= 1, so 0 can mark an empty index slot.
  static constexpr Key kEmptySparse = 0;
  static constexpr uint32_t kChunkRecords = 4096;

  static uint64_t Chunk(const char* rec, uint32_t size, uint32_t j) {
    uint64_t w = 0;
    const uint32_t off = j * 8;
    std::memcpy(&w, rec + off, size - off >= 8 ? 8 : size - off);
    return w;
  }
  static uint64_t ChunkHash(uint64_t key_seed, uint32_t j, uint64_t chunk) {
    return Mix64(chunk ^ (key_seed + (uint64_t{j} + 1) * 0x9e3779b97f4a7c15ULL));
  }

  const char* FindSparse(Key key) const;
  const char* SparseRecord(uint64_t slot) const {
    return chunks_[slot / kChunkRecords].get() + (slot % kChunkRecords) * stride_;
  }
  char* SparseRecord(uint64_t slot) {
    return chunks_[slot / kChunkRecords].get() + (slot % kChunkRecords) * stride_;
  }
  void GrowSparseIndex();
  // BeforeWrite's slow path (table_image.cc): cow_image_->Preserve(*this, key, epoch).
  void PreserveForImage(Key key, uint8_t epoch);

  RecordLayout layout_;
  uint64_t capacity_;
  uint64_t stride_;  // bytes between consecutive records (= layout_.size())
  uint64_t size_ = 0;
  std::unique_ptr<char[]> dense_;   // capacity_ * stride_ bytes, uninitialized until inserted
  std::vector<uint64_t> present_;   // bit k set <=> key k (< capacity_) present
  std::vector<Key> sparse_keys_;    // open-addressing index; power-of-two size or empty
  std::vector<uint64_t> sparse_slot_;
  uint64_t sparse_count_ = 0;
  std::vector<std::unique_ptr<char[]>> chunks_;  // sparse record storage, never moved
  // A copy-on-write image being taken (TableImage::Begin sets both, its CompleteCopy clears the
  // flag once every record is in the image; cow_image_ is only read while the flag is set).
  std::atomic<bool> cow_armed_{false};
  TableImage* cow_image_ = nullptr;
};

}  // namespace qrstore::storage
