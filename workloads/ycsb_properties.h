// YCSB core workload property files (the `workloada`-style files YCSB users already have),
// turned into qrstore config overrides so `qrstore-client --workload-file F` runs them.
//
// Understood: recordcount (ycsb.records), operationcount (the number of transactions to run),
// readproportion / updateproportion (ycsb.write_ratio = update / (read + update); YCSB's defaults
// 0.95 / 0.05 when absent), requestdistribution uniform | zipfian (zipfian uses
// zipfianconstant, default 0.99: ycsb.theta), fieldcount (ycsb.fields), fieldlength
// (ycsb.field_bytes), readallfields (true: a read returns the whole record, which qrstore always
// does), and the qrstore extension qrstore.opspertxn (ycsb.ops_per_txn: YCSB-T operations per
// transaction). Refused with an error naming the property: insert, scan and read-modify-write
// proportions above 0, request distributions qrstore does not generate (latest, hotspot,
// exponential, sequential), non-constant field lengths, readallfields=false, writeallfields=true
// (an update writes the counter and one field). A zipfianconstant with a uniform distribution is
// named in a warning. recordcount/fieldcount/fieldlength describe the servers' table: the caller
// (qrstore-client) refuses values that differ from the cluster config's. Known YCSB
// properties that do not apply here (workload, threadcount, table, measurementtype, ...) and
// unknown properties are named in warnings.
// Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace qrstore::workloads {

struct YcsbProperties {
  std::vector<std::string> overrides;     // "ycsb.write_ratio=0.5", ... in file order
  std::optional<uint64_t> operationcount;
  std::vector<std::string> warnings;
};

// `text` is the file's content; `source` names it in messages.
Result<YcsbProperties> ParseYcsbProperties(const std::string& text, const std::string& source);
Result<YcsbProperties> LoadYcsbProperties(const std::string& path);

}  // namespace qrstore::workloads
