// ReferenceExecutor: the deliberately simple serial oracle. It applies transactions one at a
// time, in the order given, to a Table it owns, with the shared op semantics of storage/ops.h:
// ops run in list order; a txn whose kAbortIf fires or whose kDebit finds too small a balance
// aborts and leaves no trace (its before-images are restored). No threads, no planning, no
// batching: whatever the engine does must be explainable by this executor run over the
// engine's committed txns in planned order.
//
// Owned and called by one thread. Apply allocates nothing once its undo buffer has grown to
// the largest txn seen, so it also serves as the benchmark's "raw loop" baseline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "storage/record.h"
#include "storage/txn.h"

namespace qrstore::storage {
class Table;
}

namespace qrstore::workloads {

class ReferenceExecutor {
 public:
  ReferenceExecutor(storage::RecordLayout layout, uint64_t capacity);
  ~ReferenceExecutor();
  ReferenceExecutor(const ReferenceExecutor&) = delete;
  ReferenceExecutor& operator=(const ReferenceExecutor&) = delete;

  storage::Table* mutable_table() { return table_.get(); }  // for loading
  const storage::Table& table() const { return *table_; }

  // Runs `txn` at the current state. Returns true if it committed (writes stay), false if it
  // aborted by its logic (state unchanged). If `keep` is false a committing txn is undone too
  // (a dry run: "would it commit here?"). An op on a key the table lacks is an error and
  // leaves the state unchanged. With `reads`, a committing txn appends the record of each of its
  // kRead ops (layout().size() bytes each, the value at that op, in op order): what a client is
  // told it read. An aborting txn appends nothing.
  Result<bool> Apply(const storage::Txn& txn, bool keep = true, std::string* reads = nullptr);

  // Txns applied with keep == true that committed / aborted (dry runs are not counted).
  uint64_t committed() const { return committed_; }
  uint64_t aborted() const { return aborted_; }

 private:
  void Undo();

  std::unique_ptr<storage::Table> table_;
  storage::RecordLayout layout_;
  // Before-images of the records written by the current txn, in write order: (record, offset
  // of its copy in undo_bytes_). Restored in reverse so a key written twice ends at its first
  // image.
  std::vector<std::pair<char*, size_t>> undo_;
  std::vector<char> undo_bytes_;
  uint64_t committed_ = 0;
  uint64_t aborted_ = 0;
};

}  // namespace qrstore::workloads
