#include "bench/verify.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_set>

#include "common/report.h"
#include "storage/table.h"
#include "workloads/reference_executor.h"

namespace qrstore::bench {
namespace {

std::string Where(uint64_t seq, const OutcomeRecord& o) {
  return "txn #" + std::to_string(seq) + " (id " + Hex(o.txn_id) + ", batch " + std::to_string(o.batch) +
         ", planner " + std::to_string(o.planner) + ", index " + std::to_string(o.index) + ")";
}

}  // namespace

Status VerifyRun(const workloads::WorkloadOptions& options, uint64_t seed, uint64_t submitted,
                 std::vector<OutcomeRecord>* outcomes, uint64_t engine_digest, VerifyReport* report) {
  *report = VerifyReport{};
  if (outcomes->size() != submitted) {
    return Status::Internal(std::to_string(submitted) + " txns submitted but " + std::to_string(outcomes->size()) +
                            " outcomes received");
  }
  std::sort(outcomes->begin(), outcomes->end(), [](const OutcomeRecord& a, const OutcomeRecord& b) {
    if (a.batch != b.batch) return a.batch < b.batch;
    if (a.planner != b.planner) return a.planner < b.planner;
    return a.index < b.index;
  });
  auto gen = workloads::MakeGenerator(options, seed);
  if (!gen.ok()) return gen.status();
  workloads::ReferenceExecutor ref(options.Layout(), options.RecordCount());
  QR_RETURN_IF_ERROR(workloads::LoadTable(options, ref.mutable_table()));

  // Keys written (or attempted) by aborted txns of the current batch. Only probed, never
  // iterated, so the unordered container cannot influence the result.
  std::unordered_set<storage::Key> poisoned;
  uint64_t batch = 0;
  std::string reads;
  for (uint64_t seq = 0; seq < outcomes->size(); ++seq) {
    const OutcomeRecord& o = (*outcomes)[seq];
    if (seq > 0) {
      const OutcomeRecord& prev = (*outcomes)[seq - 1];
      if (prev.batch == o.batch && prev.planner == o.planner && prev.index == o.index) {
        return Status::Internal("two outcomes share a planned position: " + Where(seq, o));
      }
    }
    storage::Txn txn = gen.value()->Next();
    if (txn.id != o.txn_id) {
      return Status::Internal("planned order differs from submission order at " + Where(seq, o) +
                              ": expected txn id " + Hex(txn.id));
    }
    if (seq == 0 || o.batch != batch) {
      poisoned.clear();
      batch = o.batch;
    }
    if (o.status == commit::TxnStatus::kCommitted) {
      reads.clear();
      auto r = ref.Apply(txn, true, &reads);
      if (!r.ok()) return r.status();
      if (!r.value()) {
        return Status::Internal("the engine committed " + Where(seq, o) +
                                " but it aborts when the committed txns run serially in planned order");
      }
      if (ReadsHash(reads) != o.reads_hash) {
        return Status::Internal("the engine's read values for " + Where(seq, o) +
                                " differ from what its reads return when the committed txns run serially");
      }
      report->reads_checked += reads.size() / options.Layout().size();
      ++report->committed;
      continue;
    }
    // Aborted: justified by its own logic at its serial position, or (a cascade) by having
    // accessed a key that an earlier aborted txn of the batch may have written. A logic
    // abort must be a serial abort: its vote read only clean values, else it would be a
    // cascade (commit/outcome.h).
    bool touched_poison = false;
    for (const storage::Op& op : txn.ops) {
      touched_poison |= poisoned.count(op.key) > 0;
      if (op.kind == storage::OpKind::kDepWrite) touched_poison |= poisoned.count(op.src_key) > 0;
    }
    for (const storage::Op& op : txn.ops) {
      if (storage::IsWrite(op.kind)) poisoned.insert(op.key);
    }
    auto r = ref.Apply(txn, /*keep=*/false);
    if (!r.ok()) return r.status();
    const bool commits_serially = r.value();
    if (!commits_serially) {
      ++report->aborted_serially;
    } else if (o.status == commit::TxnStatus::kAbortedCascade && touched_poison) {
      ++report->aborted_cascade;
    } else {
      return Status::Internal(std::string("the engine aborted ") + Where(seq, o) + " (" +
                              commit::TxnStatusName(o.status) + ") but it commits serially at its position" +
                              (touched_poison ? "" : " and touched no key written by an earlier aborted txn of its batch"));
    }
  }
  report->txns = outcomes->size();
  report->reference_digest = ref.table().Digest();
  if (report->reference_digest != engine_digest) {
    return Status::Internal("digest mismatch: engine " + Hex(engine_digest) + ", reference " +
                            Hex(report->reference_digest) + " after " + std::to_string(report->committed) +
                            " committed txns");
  }
  return Status::Ok();
}

}  // namespace qrstore::bench
