// AbortResolver: after every executor has run batch b, makes the batch's result equal to
// running its transactions serially in planned order, where a transaction whose abort fires
// (kAbortIf true, kDebit short) leaves no trace. Run by one thread while every executor waits at
// the batch barrier (it reads all ExecLogs and writes records of every range).
//
// Why re-execution rather than cascading aborts: a cascade rule ("abort whoever touched an
// aborted write") makes the committed set depend on where batches end, and batch ends depend on
// the batch.timeout_ms clock. Re-executing makes every outcome and the final state a function
// of the submission order alone, the same as the serial reference executor on all txns.
//
// Algorithm (all decisions follow the planned order only, so every replica agrees):
//  1. No vote fired: nothing to do (the common case costs nothing).
//  2. Walk the batch's txns in planned order from the first fired one. A txn is *affected* if
//     its own vote fired, or it accesses a key an earlier affected txn writes (it saw or built
//     on a value that may change), or it writes a key an earlier affected txn reads (the
//     re-execution of that reader must not see this write). Writes count by fragment kind,
//     whatever the parallel run did. So after an affected write of a key every accessor of it
//     is affected, after an affected read every writer; unaffected txns saw exactly the values
//     a serial run gives them (a reader after an affected reader saw an unchanged value).
//  3. Restore every key that an affected txn modified to the before-image of its first
//     affected write: that is its value at its first affected access (since then only
//     affected txns wrote it, and unaffected ones at most read it).
//  4. Re-execute the affected txns serially in planned order, each with its ops in op order
//     (ApplyFragment, the executors' semantics); one whose vote fires is undone at once and
//     aborts (kLogic), the others commit. No unaffected txn read what they wrote in the
//     parallel run, and none wrote what they read after they read it. A re-executed kRead
//     leaves its record in the slice's read values again (when given): the value it reads in
//     the serial order.
// With `digest_delta`, adds the digest change of every record it restored or rewrote
// (Table::DigestDelta between the record before resolution and after).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "executor/range_executor.h"
#include "planner/eq.h"
#include "storage/table.h"

namespace qrstore::executor {

// kCascade: aborted because it accessed what an aborted txn wrote (a partitioned row; the
// single-node resolver re-executes instead and never gives it).
enum class Fate : uint8_t { kCommit = 0, kLogic = 1, kCascade = 2 };

struct BatchFates {
  bool any_abort = false;                  // a vote fired; if false `fates` is not filled
  std::vector<std::vector<Fate>> fates;    // [planner][txn index]
  uint64_t aborted = 0;                    // txns whose abort fired in the serial re-execution
  uint64_t reexecuted = 0;                 // affected txns re-executed serially
  uint64_t restored_records = 0;

  Fate Of(uint32_t planner, uint32_t txn) const { return any_abort ? fates[planner][txn] : Fate::kCommit; }
};

// A set of keys that is cheap to probe and to clear: a bitmap for keys below `dense_limit`
// (the Table's dense region, so usually every key) and a hash set for the others. Only probed,
// never iterated in hash order, so it cannot make results depend on hashing.
class KeySet {
 public:
  // Empties the set; keeps the bitmap allocated (cleared through the list of inserted keys).
  void Reset(uint64_t dense_limit);
  bool empty() const { return dense_keys_.empty() && sparse_.empty(); }
  bool Contains(storage::Key k) const {
    if (k < dense_limit_) return (bits_[k >> 6] >> (k & 63)) & 1;
    return sparse_.count(k) != 0;
  }
  // Returns true if `k` was not in the set.
  bool Insert(storage::Key k) {
    if (k < dense_limit_) {
      uint64_t& w = bits_[k >> 6];
      const uint64_t bit = uint64_t{1} << (k & 63);
      if (w & bit) return false;
      w |= bit;
      dense_keys_.push_back(k);
      return true;
    }
    return sparse_.insert(k).second;
  }

 private:
  uint64_t dense_limit_ = 0;
  std::vector<uint64_t> bits_;
  std::vector<storage::Key> dense_keys_;
  std::unordered_set<storage::Key> sparse_;
};

class WriteHistory;

class AbortResolver {
 public:
  // `slices[p]` is the batch's slice of planner p; `logs[r]` the log of the executor of range r;
  // `read_values[p]` slice p's read-value buffer or nullptr (the vector may be empty: none).
  // `histories[r]`: range r's write history (none if empty): the affected txns' entries of the
  // parallel run are dropped and recorded again as they are re-executed, and a history read's
  // kRead is answered from it (executor/write_history.h).
  void Resolve(const std::vector<const planner::PlannedSlice*>& slices, const std::vector<ExecLog*>& logs,
               storage::Table* table, BatchFates* out, const std::vector<char*>& read_values = {},
               uint64_t* digest_delta = nullptr, const std::vector<WriteHistory*>& histories = {});
  // The checkpoint image epoch of the executor that resolves (Table::BeforeWrite): every
  // executor waits for the resolution, so all are in the same one.
  void set_cow_epoch(uint8_t e) { cow_epoch_ = e; }

 private:
  // Remembers a record's image before resolution first touches it (digest tracking).
  void Touch(storage::Key key, char* rec, uint32_t rec_size);

  struct Affected {
    uint32_t planner, txn;
    size_t begin, end;  // its fragments in frags_
  };
  // Steps 2 and 3: from the first fired vote (first_p, first_t) on, in the planned order, finds
  // the affected txns (affected_, their fragments in frags_) and restores each key's image from
  // before the first affected write.
  void Walk(const std::vector<const planner::PlannedSlice*>& slices, const std::vector<ExecLog*>& logs,
            storage::Table* table, BatchFates* out, uint32_t first_p, uint32_t first_t);
  // Step 4 for one affected txn: runs its fragments serially in op order; if its abort fires,
  // undoes what it wrote. Sets its fate.
  void Reexecute(const Affected& a, const std::vector<const planner::PlannedSlice*>& slices, storage::Table* table,
                 BatchFates* out, const std::vector<char*>& read_values, const std::vector<WriteHistory*>& histories);
  // Scratch kept across batches.
  KeySet written_;   // keys written by affected txns (by fragment kind)
  KeySet read_;      // keys only read by affected txns
  KeySet restored_;
  std::vector<size_t> cursor_;
  std::vector<std::pair<uint32_t, uint32_t>> current_;  // (range, access index) of the walked txn
  std::vector<Affected> affected_;
  std::vector<std::pair<const planner::Fragment*, uint32_t>> frags_;  // (fragment, its range)
  std::string undo_;                                     // one txn's before-images
  std::vector<std::pair<char*, size_t>> undo_index_;     // (record, offset in undo_)
  std::vector<std::pair<uint32_t, int64_t>> dep_values_; // (slot, value) of one txn
  bool track_touches_ = false;
  uint8_t cow_epoch_ = 0;
  KeySet touched_;
  std::vector<std::pair<storage::Key, char*>> touched_recs_;  // in touch order
  std::string touched_before_;                                // their images, record size each
};

}  // namespace qrstore::executor
