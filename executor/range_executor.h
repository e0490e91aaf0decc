// RangeExecutor: runs EQs of one key range against the shared Table (paper 2.3: each executor
// thread owns one range, so record accesses need no locks). One RangeExecutor per executor
// thread; only that thread calls RunEq. Between batches the engine's batch barrier hands its
// ExecLog to the abort resolver (executor/abort_resolver.h).
//
// Logging. While a batch may abort by logic (a slice so far has kAbortIf/kDebit ops), RunEq
// records every fragment it runs (in execution order: planned order within the range, or, with
// set_park_when_logging, within each key), the
// before-image of every record it modifies, and the fired abort votes. Batches without
// abortable ops skip logging entirely: the common YCSB case pays nothing for undo.
//
// Read values. With a read-value buffer, a kRead copies its record into the buffer at its read
// slot (planner/eq.h), which is the value the transaction saw at its place in the serial order
// (the abort resolver re-captures the reads of transactions it re-executes).
// Write history. With set_history, every write's before-image is recorded there first, and a
// history read's kRead (TxnContext::history) takes the key's value just before the position it
// names from it instead of the record (executor/write_history.h).
// Digest. With track_digest, every record this executor modifies adds Table::DigestDelta of the
// change to digest_delta(): the batch's change of the state digest over this range.
// Rows. In a partitioned row (docs/partitioned-rows.md) a kDepSend reads its record's counter
// and hands it to the RowSender (set_row_sender) for the partition named by the fragment; a
// kDepRecv waits for its slot like a kDepWrite, the slot being filled from the row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/check.h"
#include "executor/dep_board.h"
#include "executor/write_history.h"
#include "planner/eq.h"
#include "storage/table.h"

namespace qrstore::executor {

// One fragment run while logging, in execution order: which fragment, and where the
// before-image of its record is if it modified it.
struct Access {
  uint32_t planner = 0;
  uint32_t txn = 0;           // index in the (batch, planner) slice
  uint32_t frag = 0;          // index in the slice's EQ of this executor's range
  uint64_t undo = kNoUndo;    // offset of the before-image in ExecLog::undo, if it modified
  static constexpr uint64_t kNoUndo = UINT64_MAX;
};

// A transaction whose own abort vote fired (kAbortIf true, or kDebit short).
struct Vote {
  uint32_t planner = 0;
  uint32_t txn = 0;
};

struct ExecLog {
  std::vector<Access> accesses;
  std::string undo;  // before-images, record size each
  std::vector<Vote> votes;
  void Clear() {
    accesses.clear();
    undo.clear();
    votes.clear();
  }
};

// A txn of a batch across a partitioned row: its sub-slice (the pipeline's slice index, one per
// home planner) and its index in the home's slice (TxnContext::home_index).
struct RowTxn {
  uint32_t slice = 0;
  uint32_t home = 0;
  friend bool operator<(const RowTxn& a, const RowTxn& b) { return a.slice < b.slice || (a.slice == b.slice && a.home < b.home); }
  friend bool operator==(const RowTxn& a, const RowTxn& b) { return a.slice == b.slice && a.home == b.home; }
};

// What a row node sends its peers. SendDep: a kDepSend's value, for partition `partition`'s
// sub-slice (batch, slice), dependency slot `slot`; called from executor threads in each
// range's planned order. SendVotes: the txns this node adds to batch `batch`'s aborted set in
// voting round `round` (executor/row_resolver.h), sorted, possibly none. Neither may block for
// long (the message is queued or handed over, not waited on). A sender may hold SendDep values
// back to send several in one message; Flush hands over whatever it holds. An executor calls it
// before every wait that may block and when it leaves an EQ, so a value held back never waits
// behind a wait that needs it (directly or through a peer).
class RowSender {
 public:
  virtual ~RowSender() = default;
  virtual void SendDep(uint32_t partition, uint64_t batch, uint32_t slice, uint32_t slot, int64_t value) = 0;
  virtual void SendVotes(uint32_t partition, uint64_t batch, uint32_t round, const std::vector<RowTxn>& ids) = 0;
  virtual void Flush() {}
};

// The sender of a row follower that replays its group's log (docs/partitioned-rows.md 9.4,
// Rule 2): its kDepSend values and votes go nowhere; its leader sent them.
class DropRowSender final : public RowSender {
 public:
  void SendDep(uint32_t, uint64_t, uint32_t, uint32_t, int64_t) override {}
  void SendVotes(uint32_t, uint64_t, uint32_t, const std::vector<RowTxn>&) override {}
};

class RangeExecutor {
 public:
  RangeExecutor(storage::Table* table, uint32_t range, bool track_digest = false)
      : table_(table), range_(range), track_digest_(track_digest), scratch_(table->layout().size(), '\0') {}

  // Runs EQ slice.eqs[range] to the end, resolving dependencies through `deps` (the slice's
  // board). With `log`, fills log() (see above). With `read_values` (slice.read_slots records),
  // each kRead leaves its record there.
  // With drain == false (not logging), fragments parked behind unpublished values may stay
  // parked when it returns: the executor goes on with the next slice of the batch meanwhile,
  // and Drain() runs them (in a row, a node can start its next sub-slice while values from a
  // peer are outstanding). Every later fragment on a parked key parks behind it, whatever slice
  // it is in, so each record still sees its fragments in the global order. The slice, its
  // board and read buffer must stay alive until Drain() returns. A logged RunEq drains first.
  void RunEq(const planner::PlannedSlice& slice, DepBoard* deps, bool log, char* read_values = nullptr,
             bool drain = true);
  // Runs every parked fragment, waiting for the values they need.
  void Drain();

  // replication.point = writes (planner/eq.h SliceWrites). Capture, a leader at the end of a
  // batch (its range holds the batch's final values): the keys of this range that `slices`
  // write, in increasing order, into *keys, and their records into *images (absent keys are
  // left out). Install, a follower: sets each key of `keys` to its image (record size each, in
  // `images`), through the write path (a checkpoint's copy-on-write, the digest delta).
  void Capture(const std::vector<const planner::PlannedSlice*>& slices, std::vector<storage::Key>* keys,
               std::string* images) const;
  void Install(const std::vector<storage::Key>& keys, const std::string& images);
  bool HasParked() const { return !parked_.Empty(); }

  // How many fragments an executor parks behind unpublished dependency values before it blocks:
  // how far it may run ahead of the ranges it depends on. Large, so that an executor rarely blocks
  // on another range's values under dependent writes (docs/benchmarks-log.md).
  static constexpr uint32_t kParkCapacity = 4096;

  // Record every write's before-image in `history` (not owned; nullptr: none), and answer a
  // history read's kReads from it (executor/write_history.h).
  void set_history(WriteHistory* history) { history_ = history; }
  // The checkpoint image epoch this executor is in (Table::BeforeWrite): set by its own thread as
  // it passes an image's boundary.
  void set_cow_epoch(uint8_t e) { cow_epoch_ = e; }
  uint8_t cow_epoch() const { return cow_epoch_; }
  WriteHistory* history() const { return history_; }

  // The row's value sender; needed before a slice with kDepSend runs. Not owned.
  void set_row_sender(RowSender* sender) { row_sender_ = sender; }
  // Park while logging too (a row node): the log then holds each key's accesses in planned
  // order, but not the range's as a whole, which is all the row's cascade resolver
  // (executor/row_resolver.h) reads. The single node's re-executing resolver needs the range's
  // serial history, so it keeps this off.
  void set_park_when_logging(bool on) { park_when_logging_ = on; }

  ExecLog& log() { return log_; }
  uint32_t range() const { return range_; }
  // The digest change of the records modified since the last call (track_digest); resets it.
  uint64_t TakeDigestDelta() {
    const uint64_t d = digest_delta_;
    digest_delta_ = 0;
    return d;
  }

 private:
  // Fragments parked behind an unpublished dependency value (see Run), in planned order, and a
  // counting filter over their keys (a false "may hold" only parks a fragment that need not be).
  class Parked {
   public:
    bool Empty() const { return size_ == 0; }
    bool Full() const { return size_ == kCapacity; }
    // A parked fragment: fragment `frag` of slice->eqs[range], with its slice's board and
    // read buffer.
    struct Entry {
      const planner::PlannedSlice* slice = nullptr;
      DepBoard* deps = nullptr;
      char* read_values = nullptr;
      uint32_t frag = 0;
      bool log = false;  // run it logged (it comes from a logged slice)
    };
    const Entry& Front() const { return ring_[head_]; }
    bool MayHold(uint64_t key) const { return counts_[Slot(key)] != 0; }
    void Push(const Entry& e, uint64_t key) {
      QR_CHECK(!Full());
      ring_[(head_ + size_) % kCapacity] = e;
      ++size_;
      ++counts_[Slot(key)];
    }
    void Pop(uint64_t key) {
      head_ = (head_ + 1) % kCapacity;
      --size_;
      --counts_[Slot(key)];
    }
   private:
    static constexpr uint32_t kCapacity = kParkCapacity;
    static constexpr uint32_t kFilterBits = 15;
    static uint32_t Slot(uint64_t key) { return static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - kFilterBits)); }
    Entry ring_[kCapacity] = {};
    static_assert(kCapacity <= UINT16_MAX, "a filter slot counts up to kCapacity keys");
    uint16_t counts_[1u << kFilterBits] = {};
    uint32_t head_ = 0;
    uint32_t size_ = 0;
  };

  template <bool kLog, bool kDigest>
  void Run(const planner::PlannedSlice& slice, DepBoard* deps, char* read_values);
  template <bool kLog, bool kDigest>
  void Exec(const planner::PlannedSlice& slice, uint32_t i, DepBoard* deps, char* read_values);
  static bool WaitsForDep(planner::FragKind k) {
    return k == planner::FragKind::kDepWrite || k == planner::FragKind::kDepRecv;
  }
  void SendDep(const planner::PlannedSlice& slice, const planner::Fragment& f, int64_t value) {
    QR_CHECK(row_sender_ != nullptr, "slice (%llu, %u): a kDepSend on a node outside a partitioned row",
             static_cast<unsigned long long>(slice.batch), slice.planner);
    row_sender_->SendDep(static_cast<uint32_t>(f.arg), slice.batch, slice.planner, f.slot, value);
  }
  template <bool kDigest>
  void RunParked(bool block);
  // deps->Wait(slot), handing over held-back row values first if it may block.
  int64_t WaitDep(DepBoard* deps, uint32_t slot) {
    if (row_sender_ != nullptr && !deps->Ready(slot)) row_sender_->Flush();
    return deps->Wait(slot);
  }

  storage::Table* table_;
  uint32_t range_;
  const bool track_digest_;
  ExecLog log_;
  std::string scratch_;  // a record's before-image for the digest delta
  uint64_t digest_delta_ = 0;
  Parked parked_;
  RowSender* row_sender_ = nullptr;
  bool park_when_logging_ = false;
  WriteHistory* history_ = nullptr;
  uint8_t cow_epoch_ = 0;
};

}  // namespace qrstore::executor
