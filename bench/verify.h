// Serial-equivalence verification of an engine run against the reference executor.
//
// What is checked, given every outcome of a run and the workload that produced its input:
//   1. completeness and order: exactly one outcome per submitted txn, and sorting outcomes by
//      PlannedPos gives the txns in submission order (the engine's FIFO guarantee);
//   2. serial equivalence: re-running ONLY the committed txns in planned order on a fresh
//      ReferenceExecutor, every one of them commits serially too, having read the same values
//      (the hash of the records its reads returned equals the reference's);
//   3. aborts are justified: each aborted txn either aborts serially at its position (dry run
//      on the committed-only state), or is reported as a cascade (kAbortedCascade) and
//      accessed (read or wrote) a key that an earlier aborted txn of the same batch may have
//      written. A logic abort (kAbortedLogic) must abort serially: its vote read only clean
//      values. An engine that aborts needlessly fails here, although its digest could match;
//   4. the reference table's digest equals the engine's.
// The submitted txns are not stored: they are regenerated from (workload options, seed),
// which the generators guarantee to be deterministic. Memory: one OutcomeRecord (32 bytes)
// per txn plus one table.
//
// Single-threaded; the caller owns every argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/hash.h"
#include "common/status.h"
#include "engine/engine.h"
#include "workloads/workload.h"

namespace qrstore::bench {

// The part of a TxnOutcome needed to verify (kept per txn for --verify).
struct OutcomeRecord {
  uint64_t txn_id = 0;
  uint64_t batch = 0;
  uint32_t planner = 0;
  uint32_t index = 0;
  commit::TxnStatus status = commit::TxnStatus::kCommitted;
  uint64_t reads_hash = 0;  // ReadsHash of a committed txn's read values
};

// What --verify compares of the values a txn read (Hash64 over their bytes; 0 for none).
inline uint64_t ReadsHash(std::string_view values) { return values.empty() ? 0 : Hash64(values, 0x72656164); }

struct VerifyReport {
  uint64_t txns = 0;
  uint64_t committed = 0;
  uint64_t reads_checked = 0;     // read values compared with the reference's
  uint64_t aborted_serially = 0;  // aborted, and aborts serially at its position too
  uint64_t aborted_cascade = 0;   // commits serially, but cascaded from an earlier abort of its batch
  uint64_t reference_digest = 0;
};

// Sorts `outcomes` by planned position, then runs checks 1-4 over the first `submitted` txns
// of MakeGenerator(options, seed). OK only if every check passes; otherwise the error names
// the first violation (txn sequence number and id).
Status VerifyRun(const workloads::WorkloadOptions& options, uint64_t seed, uint64_t submitted,
                 std::vector<OutcomeRecord>* outcomes, uint64_t engine_digest, VerifyReport* report);

}  // namespace qrstore::bench
