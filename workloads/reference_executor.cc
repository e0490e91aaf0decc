#include "workloads/reference_executor.h"

#include <cstring>
#include <string>

#include "storage/ops.h"
#include "storage/table.h"

namespace qrstore::workloads {

using storage::OpKind;

ReferenceExecutor::ReferenceExecutor(storage::RecordLayout layout, uint64_t capacity)
    : table_(std::make_unique<storage::Table>(layout, capacity)), layout_(layout) {}

ReferenceExecutor::~ReferenceExecutor() = default;

void ReferenceExecutor::Undo() {
  for (size_t i = undo_.size(); i-- > 0;) {
    std::memcpy(undo_[i].first, undo_bytes_.data() + undo_[i].second, layout_.size());
  }
}

Result<bool> ReferenceExecutor::Apply(const storage::Txn& txn, bool keep, std::string* reads) {
  const size_t reads_before = reads != nullptr ? reads->size() : 0;
  undo_.clear();
  undo_bytes_.clear();
  const uint32_t rec_size = layout_.size();
  bool fired = false;
  for (const storage::Op& op : txn.ops) {
    char* rec = table_->Find(op.key);
    if (rec == nullptr) {
      Undo();
      if (reads != nullptr) reads->resize(reads_before);
      return Status::InvalidArgument("txn " + std::to_string(txn.id) + ": key " + std::to_string(op.key) +
                                     " is not in the table");
    }
    if (storage::IsWrite(op.kind)) {
      size_t off = undo_bytes_.size();
      undo_bytes_.insert(undo_bytes_.end(), rec, rec + rec_size);
      undo_.emplace_back(rec, off);
    }
    const char* src = nullptr;
    if (op.kind == OpKind::kDepWrite) {
      src = table_->Find(op.src_key);
      if (src == nullptr) {
        Undo();
        if (reads != nullptr) reads->resize(reads_before);
        return Status::InvalidArgument("txn " + std::to_string(txn.id) + ": dependency source key " +
                                       std::to_string(op.src_key) + " is not in the table");
      }
    }
    if (op.kind == OpKind::kRead && reads != nullptr) reads->append(rec, rec_size);
    fired = storage::ApplyOp(op, rec, src, layout_, txn.id);
    if (fired) break;
  }
  if (fired) {
    Undo();
    if (reads != nullptr) reads->resize(reads_before);
    if (keep) ++aborted_;
    return false;
  }
  if (keep) {
    ++committed_;
  } else {
    Undo();
  }
  return true;
}

}  // namespace qrstore::workloads
