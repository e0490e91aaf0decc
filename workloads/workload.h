// Workloads: seeded generators of storage::Txn streams (YCSB-T and bank transfer), their config
// keys, and the initial table image they run against.
//
// A Generator is owned and called by ONE thread (the load generator / test thread). Its output
// is a pure function of (WorkloadOptions, seed): the i-th Txn (i = 0, 1, ...) is identical on
// every run and host, and its id is TxnIdFor(seed, i) (unique within a run). Generators
// allocate only the Txn they return.
//
// Config keys added by AddConfigKeys (the engine adds batch.*, threads.*, engine.*):
//   workload.kind            ycsb | transfer
//   ycsb.records             key space [0, records)
//   ycsb.fields, ycsb.field_bytes   record layout (field 0 holds the counter)
//   ycsb.ops_per_txn         distinct records per txn
//   ycsb.write_ratio         per-op probability of a write (kUpdate)
//   ycsb.theta, ycsb.scramble       key distribution (workloads/zipf.h)
//   ycsb.dep_ratio           per-write probability of becoming kDepWrite x <- y
//   ycsb.abort_ratio         per-txn probability that one op becomes kAbortIf
//   ycsb.abort_fire_per_10k  the kAbortIf firing rate (its arg)
//   ycsb.mp_ratio, ycsb.partitions_per_txn  multi-partition txns over engine.partitions
//   transfer.accounts, transfer.initial_balance, transfer.max_amount, transfer.theta
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/status.h"
#include "storage/key_map.h"
#include "storage/record.h"
#include "storage/txn.h"
#include "workloads/zipf.h"

namespace qrstore::storage {
class Table;
}

namespace qrstore::workloads {

enum class WorkloadKind : uint8_t { kYcsb, kTransfer };

struct YcsbOptions {
  uint64_t records = 1000000;
  uint32_t fields = 10;
  uint32_t field_bytes = 10;
  uint32_t ops_per_txn = 16;
  double write_ratio = 0.5;
  double theta = 0;
  bool scramble = true;
  double dep_ratio = 0;
  double abort_ratio = 0;
  uint32_t abort_fire_per_10k = 5000;
  double mp_ratio = 0;
  uint32_t partitions_per_txn = 2;
};

struct TransferOptions {
  uint64_t accounts = 100000;
  int64_t initial_balance = 1000;
  uint64_t max_amount = 1500;  // amounts are uniform in [1, max_amount]
  double theta = 0;            // account popularity (workloads/zipf.h), 0 = uniform
  // With more than one partition: the share of transfers whose credit account lives on another
  // partition than the debit account (which is on the home partition, with a home).
  double mp_ratio = 0.5;
};

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kYcsb;
  YcsbOptions ycsb;
  TransferOptions transfer;
  // Which partition a key belongs to (the engine's engine.partitions / engine.range_function
  // mapping); multi-partition YCSB txns draw keys from chosen partitions. One bucket = off.
  storage::KeyMapper partition_map;
  // The home partition of the generating client (a partitioned row: the node it submits to).
  // When set, every YCSB txn touches it (its first op's key is there) and a multi-partition txn
  // draws its other partitions from the rest; otherwise partitions are drawn uniformly.
  int64_t home_partition = -1;

  // Every violation at once, each naming its config key.
  Status Validate() const;
  storage::RecordLayout Layout() const;
  uint64_t RecordCount() const;  // keys are exactly [0, RecordCount())
  // The counter a record starts with (YCSB 0, transfer the initial balance).
  int64_t InitialCounter() const { return kind == WorkloadKind::kTransfer ? transfer.initial_balance : 0; }
  uint32_t partitions() const { return partition_map.buckets(); }
  uint32_t PartitionOfKey(storage::Key key) const { return partition_map.Of(key); }
};

void AddConfigKeys(ConfigSchema* schema);
// The key count of the configured workload (workload.kind: ycsb.records or transfer.accounts):
// keys are exactly [0, this).
uint64_t ConfiguredKeyCount(const Config& config);
// The engine's key space (engine.key_space: executor ranges and a row's partition ranges with
// engine.range_function=range): the key when given (> 0), else the workload's key count, so a
// config that switches workload.kind keeps its ranges balanced. `config`'s schema must hold
// the engine keys (engine/engine.h AddConfigKeys).
uint64_t EngineKeySpace(const Config& config);
// `partition_map` is built by the caller from the engine's keys (engine.partitions,
// engine.range_function, engine.key_space), which this module does not own.
Result<WorkloadOptions> OptionsFromConfig(const Config& config, storage::KeyMapper partition_map = {});

// The id of the seq-th txn of the run seeded `seed`: a bijection of seq for a fixed seed
// (Mix64 is invertible), so ids are unique within a run and differ between seeds.
inline uint64_t TxnIdFor(uint64_t seed, uint64_t seq) { return Mix64(seq ^ Mix64(seed ^ 0x7f4a7c159e3779b9ULL)); }

class Generator {
 public:
  virtual ~Generator() = default;
  // The next txn of the sequence (client = 0, submit_ns = 0: the caller sets them).
  virtual storage::Txn Next() = 0;
  // The same, written over *out (the same txn Next() would return; a generator may reuse
  // out->ops' memory, so a caller building many txns allocates none per txn).
  virtual void NextInto(storage::Txn* out) { *out = Next(); }
  // How many txns Next() has returned.
  uint64_t generated() const { return generated_; }

 protected:
  uint64_t generated_ = 0;
};

// Options must be valid (Validate()); the result depends only on (options, seed).
Result<std::unique_ptr<Generator>> MakeGenerator(const WorkloadOptions& options, uint64_t seed);

// Ok if what the workload makes an engine hold fits in the memory available now: `tables`
// tables of the workload's records (options.Layout(), RecordCount()) plus the read values
// captured for `txns_in_flight` txns (engine.batches_in_flight x batch.txns; every op a read
// returning its whole record, the upper bound). Otherwise kInvalidArgument naming the keys,
// the bytes needed and the bytes available. Called before anything is allocated, so a
// configuration that cannot fit is bad input reported up front, not a std::bad_alloc (or an OOM
// kill) mid-load or mid-run.
Status CheckMemoryFits(const WorkloadOptions& options, uint64_t tables, uint64_t txns_in_flight);

// Inserts the initial image of every record [0, RecordCount()) into an empty table whose
// layout equals options.Layout() and whose capacity is at least RecordCount(). With `keep`,
// only the keys it accepts (a node of a partitioned row holds its own partition's records).
Status LoadTable(const WorkloadOptions& options, storage::Table* table,
                 const std::function<bool(storage::Key)>& keep = nullptr);

// Every record of `table` sorted by key as "key<TAB>counter\n" lines (--dump-state format).
Status DumpState(const storage::Table& table, const std::string& path);

// Checks before a run that DumpState(path) will be able to write: opens `path` for appending
// (creating it if absent, leaving its bytes otherwise) and closes it. Errors name the path and
// the reason (kInvalidArgument: a path that cannot be used is bad input).
Status ProbeWritable(const std::string& path);

}  // namespace qrstore::workloads
