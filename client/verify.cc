#include "client/verify.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "cluster/port/protocol.h"
#include "common/hash.h"
#include "storage/ops.h"
#include "storage/table.h"
#include "workloads/reference_executor.h"

namespace qrstore::client {

namespace {

using cluster::proto::ResultCode;

std::string Where(const ClientTxnRecord& r) {
  return "connection " + std::to_string(r.connection) + " txn #" + std::to_string(r.seq) + " (batch " +
         std::to_string(r.batch) + ", planner " + std::to_string(r.planner) + ", index " + std::to_string(r.index) + ")";
}

bool SamePosition(const ClientTxnRecord& a, const ClientTxnRecord& b) {
  return a.batch == b.batch && a.planner == b.planner && a.index == b.index;
}

}  // namespace

uint64_t ConnectionSeed(uint64_t seed, uint32_t connection) {
  return connection == 0 ? seed : Mix64(seed ^ (0x9e3779b97f4a7c15ULL * connection));
}

uint64_t ReadsHash(std::string_view values) { return values.empty() ? 0 : Hash64(values, 0x72656164); }

namespace {

// One batch of a partitioned row, in planned order, replayed as the row runs it
// (docs/partitioned-rows.md, section 4): every op runs at its place, aborting or not (a fired
// kAbortIf or a short kDebit writes nothing and only votes); a txn aborts if it fired, or if it
// accessed a key an earlier aborted txn of the batch wrote (cascade); the aborted txns' writes
// are then undone. Checks every fate (fired: aborted-logic, else cascaded: aborted-cascade) and
// the reads of every committed txn, and leaves `table` at the committed state after the batch.
Status ReplayRowBatch(const std::vector<std::pair<const ClientTxnRecord*, storage::Txn>>& batch, size_t record_bytes,
                      storage::Table* table, ClientVerifyReport* report) {
  const storage::RecordLayout& layout = table->layout();
  struct Write {
    storage::Key key;
    size_t txn;
    size_t image;  // offset in images
  };
  std::vector<Write> writes;
  std::string images;
  std::vector<uint8_t> fired(batch.size(), 0);
  std::vector<std::string> reads(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const storage::Txn& txn = batch[i].second;
    for (const storage::Op& op : txn.ops) {
      char* rec = table->Find(op.key);
      if (rec == nullptr) return Status::Internal(Where(*batch[i].first) + ": key " + std::to_string(op.key) + " absent");
      const char* src = nullptr;
      if (op.kind == storage::OpKind::kDepWrite) {
        src = table->Find(op.src_key);
        if (src == nullptr) return Status::Internal(Where(*batch[i].first) + ": source key absent");
      }
      if (op.kind == storage::OpKind::kRead) reads[i].append(rec, record_bytes);
      // A write's before-image, for the undo of an aborted txn.
      const bool is_write = storage::IsWrite(op.kind);
      if (is_write) {
        writes.push_back(Write{op.key, i, images.size()});
        images.append(rec, record_bytes);
      }
      if (storage::ApplyOp(op, rec, src, layout, txn.id)) {
        fired[i] = 1;
        if (is_write) {  // a short debit wrote nothing, so it taints nothing
          writes.pop_back();
          images.resize(images.size() - record_bytes);
        }
      }
    }
  }
  // The cascade, in planned order: keys written by aborted txns taint every later access.
  std::vector<uint8_t> aborted(fired);
  std::set<storage::Key> tainted;
  std::vector<std::vector<storage::Key>> wrote(batch.size());
  for (const Write& w : writes) wrote[w.txn].push_back(w.key);
  for (size_t i = 0; i < batch.size(); ++i) {
    for (const storage::Op& op : batch[i].second.ops) {
      if (tainted.count(op.key) != 0 || (op.kind == storage::OpKind::kDepWrite && tainted.count(op.src_key) != 0)) {
        aborted[i] = 1;
      }
    }
    if (aborted[i] != 0) tainted.insert(wrote[i].begin(), wrote[i].end());
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const ClientTxnRecord& r = *batch[i].first;
    const ResultCode want = fired[i] != 0 ? ResultCode::kAbortedLogic
                            : aborted[i] != 0 ? ResultCode::kAbortedCascade
                                              : ResultCode::kCommitted;
    const auto code = static_cast<ResultCode>(r.code);
    if (code != want) {
      return Status::Internal(Where(r) + " was answered " +
                              (r.code <= cluster::proto::kMaxResultCode ? std::string(cluster::proto::ResultCodeName(code))
                                                                        : "with code " + std::to_string(r.code)) +
                              " but the row's rule (cascade over its batch) gives " +
                              cluster::proto::ResultCodeName(want));
    }
    if (want == ResultCode::kCommitted) {
      if (ReadsHash(reads[i]) != r.reads_hash) {
        return Status::Internal(Where(r) + ": the values it read differ from the replay's (" +
                                std::to_string(reads[i].size() / record_bytes) + " records)");
      }
      ++report->committed;
      report->reads_checked += reads[i].size() / record_bytes;
    } else {
      ++report->aborted;
    }
  }
  // Undo: in reverse, so a key ends at the image before the batch's first aborted write of it
  // (every later access of it is an aborted txn's).
  for (size_t k = writes.size(); k-- > 0;) {
    const Write& w = writes[k];
    if (aborted[w.txn] != 0) std::memcpy(table->Find(w.key), images.data() + w.image, record_bytes);
  }
  return Status::Ok();
}

}  // namespace

Status VerifyClientRun(const workloads::WorkloadOptions& options, uint64_t seed, const std::vector<uint64_t>& sent,
                       std::vector<ClientTxnRecord>* records, ClientVerifyReport* report, uint32_t row_size) {
  *report = ClientVerifyReport{};
  const size_t conns = sent.size();
  // 1. Completeness, per connection (before sorting: counts only).
  std::vector<uint64_t> kept(conns, 0);
  for (const ClientTxnRecord& r : *records) {
    if (r.connection >= conns) {
      return Status::Internal("a result for connection " + std::to_string(r.connection) + " of a " +
                              std::to_string(conns) + "-connection run");
    }
    ++kept[r.connection];
  }
  std::sort(records->begin(), records->end(), [](const ClientTxnRecord& a, const ClientTxnRecord& b) {
    if (a.batch != b.batch) return a.batch < b.batch;
    if (a.planner != b.planner) return a.planner < b.planner;
    if (a.index != b.index) return a.index < b.index;
    // Equal positions are a violation reported below; order them deterministically anyway.
    if (a.connection != b.connection) return a.connection < b.connection;
    return a.seq < b.seq;
  });
  std::vector<std::unique_ptr<workloads::Generator>> gens;
  for (size_t c = 0; c < conns; ++c) {
    workloads::WorkloadOptions conn_options = options;
    if (row_size > 1) conn_options.home_partition = c % row_size;
    auto g = workloads::MakeGenerator(conn_options, ConnectionSeed(seed, static_cast<uint32_t>(c)));
    if (!g.ok()) return g.status();
    gens.push_back(std::move(g).value());
  }
  workloads::ReferenceExecutor ref(options.Layout(), options.RecordCount());
  QR_RETURN_IF_ERROR(workloads::LoadTable(options, ref.mutable_table()));
  const size_t record_bytes = options.Layout().size();
  std::vector<uint64_t> next(conns, 0);
  std::string reads;
  std::vector<std::pair<const ClientTxnRecord*, storage::Txn>> row_batch;
  for (size_t i = 0; i < records->size(); ++i) {
    const ClientTxnRecord& r = (*records)[i];
    if (i > 0 && SamePosition((*records)[i - 1], r)) {
      return Status::Internal(Where(r) + " shares its planned position with " + Where((*records)[i - 1]));
    }
    if (r.seq != next[r.connection]) {
      if (r.seq > next[r.connection] && next[r.connection] < sent[r.connection] && kept[r.connection] < sent[r.connection]) {
        return Status::Internal("connection " + std::to_string(r.connection) + " txn #" +
                                std::to_string(next[r.connection]) + " has no result (" +
                                std::to_string(kept[r.connection]) + " results for " +
                                std::to_string(sent[r.connection]) + " txns sent), or was planned after " + Where(r));
      }
      return Status::Internal(Where(r) + " is planned out of its connection's send order (expected txn #" +
                              std::to_string(next[r.connection]) + " next)");
    }
    if (r.seq >= sent[r.connection]) {
      return Status::Internal(Where(r) + ": a result for a txn never sent (connection sent " +
                              std::to_string(sent[r.connection]) + ")");
    }
    ++next[r.connection];
    const storage::Txn txn = gens[r.connection]->Next();
    const auto code = static_cast<ResultCode>(r.code);
    if (row_size > 1) {
      // A row resolves aborts by cascade over each batch: replayed batch by batch.
      if (!row_batch.empty() && row_batch.front().first->batch != r.batch) {
        QR_RETURN_IF_ERROR(ReplayRowBatch(row_batch, record_bytes, ref.mutable_table(), report));
        row_batch.clear();
      }
      row_batch.emplace_back(&r, txn);
      continue;
    }
    if (code != ResultCode::kCommitted && code != ResultCode::kAbortedLogic && code != ResultCode::kCommittedNoValues) {
      return Status::Internal(Where(r) + " was answered " +
                              (r.code <= cluster::proto::kMaxResultCode ? std::string(cluster::proto::ResultCodeName(code))
                                                                        : "with code " + std::to_string(r.code)) +
                              " (only committed and aborted-logic are expected here)");
    }
    // committed-no-values: a retry answered from the session table (its fate, not its values).
    const bool committed = code != ResultCode::kAbortedLogic;
    reads.clear();
    auto applied = ref.Apply(txn, /*keep=*/committed, &reads);
    if (!applied.ok()) return Status::Internal(Where(r) + ": the reference cannot run it: " + applied.status().message());
    if (applied.value() != committed) {
      return Status::Internal(Where(r) + (committed ? " committed but aborts" : " aborted but commits") +
                              " when the txns run serially in planned order");
    }
    if (committed) {
      if (code == ResultCode::kCommittedNoValues) {
        ++report->values_unknown;
      } else if (ReadsHash(reads) != r.reads_hash) {
        return Status::Internal(Where(r) + ": the values it read differ from the serial run's (" +
                                std::to_string(reads.size() / record_bytes) + " records)");
      } else {
        report->reads_checked += reads.size() / record_bytes;
      }
      ++report->committed;
    } else {
      ++report->aborted;
    }
  }
  if (!row_batch.empty()) QR_RETURN_IF_ERROR(ReplayRowBatch(row_batch, record_bytes, ref.mutable_table(), report));
  for (size_t c = 0; c < conns; ++c) {
    if (next[c] != sent[c]) {
      return Status::Internal("connection " + std::to_string(c) + " txn #" + std::to_string(next[c]) +
                              " has no result (" + std::to_string(next[c]) + " results for " + std::to_string(sent[c]) +
                              " txns sent)");
    }
  }
  report->txns = records->size();
  report->reference_digest = ref.table().Digest();
  if (row_size > 1) {
    // Each partition's digest is its own records' (a row node holds only those).
    report->partition_digests.assign(row_size, 0);
    ref.table().ForEach([&](storage::Key k, const char* rec) {
      report->partition_digests[options.partition_map.Of(k)] += storage::Table::RecordDigest(k, rec, record_bytes);
    });
  }
  return Status::Ok();
}

}  // namespace qrstore::client
