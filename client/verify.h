// Verification of a qrstore-client run (--verify) against the serial reference executor.
//
// What the client keeps per txn (ClientTxnRecord, 40 bytes): which connection sent it and its
// sequence number there, the planned position the server reported (batch, planner, index), the
// result code, and a hash of the read values it was told. The txns themselves are not kept:
// connection c's txns are regenerated from MakeGenerator(options, ConnectionSeed(seed, c)).
//
// VerifyClientRun sorts the records by planned position (the global serial order: arrival time
// and thread scheduling decide nothing here) and checks, naming the first violation:
//   1. completeness: one record per txn sent, for every connection (a missing one is named);
//   2. positions are unique;
//   3. each connection's txns appear in planned order in its own send order (the server plans a
//      connection FIFO);
//   4. every txn was committed or aborted by its logic (rejected / failed / cascade are
//      violations: a correct client sends only valid txns, and the engine never cascades); a
//      retry answered from the session table (committed-no-values) counts as committed, and its
//      read values, which it was not told, are not compared;
//   5. replaying in planned order on a fresh ReferenceExecutor loaded with LoadTable: a committed
//      txn commits serially and read the same values (hash); a logic abort aborts serially.
// The report carries the reference's final digest, which the caller compares with the leader's.
// A partitioned row (row_size > 1): connection c's txns were generated with home partition
// c mod row_size (as qrstore-client does); point 5 replays batch by batch with the row's rule
// (docs/partitioned-rows.md, section 4: every op at its place, a txn aborts if it fired or
// accessed a key an earlier aborted txn of its batch wrote, kAbortedCascade for the latter,
// the aborted ones undone), since the positions carry the batch boundaries; and the report
// also carries, per partition p, the
// digest node p must have: its table is the whole initial table with only p's keys changed, and
// digests add up per record (storage/table.h), so it is the initial digest plus the changes of
// p's keys.
//
// Single-threaded; the caller owns every argument. Memory: the records plus one table.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workloads/workload.h"

namespace qrstore::client {

// Connection c's workload seed: connection 0 runs exactly the run's seed (so a one-connection
// run submits qrstore-bench --seed S's sequence); the others a mix of (seed, c).
uint64_t ConnectionSeed(uint64_t seed, uint32_t connection);

// The hash kept of a committed txn's read values (the concatenated records, in op order).
uint64_t ReadsHash(std::string_view values);

struct ClientTxnRecord {
  uint64_t seq = 0;         // position in its connection's send order
  uint64_t batch = 0;       // planned position
  uint64_t reads_hash = 0;  // ReadsHash of the values it was told (committed only)
  uint32_t planner = 0;
  uint32_t index = 0;
  uint16_t connection = 0;
  uint8_t code = 0;  // proto::ResultCode
};

struct ClientVerifyReport {
  uint64_t txns = 0;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  uint64_t reads_checked = 0;  // read values compared (records)
  uint64_t values_unknown = 0; // committed txns answered without their values (retries, sessions)
  uint64_t reference_digest = 0;
  std::vector<uint64_t> partition_digests;  // a row: [partition] what its node's digest must be
};

// `sent[c]`: how many txns connection c sent (its records must be exactly seq 0..sent[c]-1).
// Sorts `records`.
Status VerifyClientRun(const workloads::WorkloadOptions& options, uint64_t seed, const std::vector<uint64_t>& sent,
                       std::vector<ClientTxnRecord>* records, ClientVerifyReport* report, uint32_t row_size = 1);

}  // namespace qrstore::client
