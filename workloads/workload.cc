#include "workloads/workload.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cinttypes>
#include <cstdio>
#include <utility>
#include <vector>

#include "common/memory.h"
#include "storage/table.h"

namespace qrstore::workloads {
namespace {

using storage::Key;
using storage::Op;
using storage::OpKind;
using storage::Txn;

// The scrambling permutation is fixed (not derived from the run seed), so the hot keys of a
// skewed run are the same keys whatever --seed says, as in YCSB.
constexpr uint64_t kScrambleSeed = 0x51ed270b27a3c1d5ULL;

// Distinct-key sampling resamples duplicates this many times, then probes deterministically
// for the next free key (only reached on tiny, very skewed key spaces).
constexpr int kMaxResamples = 64;

class YcsbGenerator final : public Generator {
 public:
  YcsbGenerator(const WorkloadOptions& options, ZipfGenerator zipf, uint64_t seed, uint64_t rng_seed)
      : o_(options.ycsb), partitions_(options.partitions()), home_(options.home_partition), map_(options.partition_map),
        zipf_(std::move(zipf)), rng_(rng_seed), seed_(seed) {
    used_.reserve(2 * o_.ops_per_txn);
    allowed_.reserve(partitions_);
  }

  Txn Next() override {
    Txn t;
    NextInto(&t);
    return t;
  }
  void NextInto(Txn* out) override {
    Txn& t = *out;
    std::vector<Op> ops = std::move(t.ops);  // keeps its capacity: no allocation per txn
    t = Txn{};
    t.id = TxnIdFor(seed_, generated_++);
    t.ops = std::move(ops);
    t.ops.clear();
    t.ops.reserve(o_.ops_per_txn);
    used_.clear();
    ChoosePartitions();
    for (uint32_t i = 0; i < o_.ops_per_txn; ++i) {
      Op op;
      op.key = DrawKey(i);
      if (rng_.Bernoulli(o_.write_ratio)) {
        if (o_.dep_ratio > 0 && rng_.Bernoulli(o_.dep_ratio)) {
          op.kind = OpKind::kDepWrite;
          op.src_key = DrawKey(i + 1);
        } else {
          op.kind = OpKind::kUpdate;
        }
      } else {
        op.kind = OpKind::kRead;
      }
      t.ops.push_back(op);
    }
    if (o_.abort_ratio > 0 && rng_.Bernoulli(o_.abort_ratio)) {
      Op& op = t.ops[rng_.Uniform(t.ops.size())];
      op.kind = OpKind::kAbortIf;
      op.src_key = 0;
      op.arg = o_.abort_fire_per_10k;
    }
  }

 private:
  // Single-partition txns use one uniformly chosen partition (the home one, with a home);
  // multi-partition txns (mp_ratio) partitions_per_txn distinct ones (the home first). With one
  // partition this draws nothing.
  void ChoosePartitions() {
    allowed_.clear();
    if (partitions_ <= 1) return;
    uint32_t want = rng_.Bernoulli(o_.mp_ratio) ? o_.partitions_per_txn : 1;
    if (home_ >= 0) allowed_.push_back(static_cast<uint32_t>(home_));
    while (allowed_.size() < want) {
      auto p = static_cast<uint32_t>(rng_.Uniform(partitions_));
      if (std::find(allowed_.begin(), allowed_.end(), p) == allowed_.end()) allowed_.push_back(p);
    }
  }

  // A key not yet used by this txn, drawn from the key distribution; when partitioned, from
  // partition allowed_[slot % allowed_.size()] (so a multi-partition txn touches every chosen
  // partition), by resampling until the key falls in it: the conditional distribution.
  Key DrawKey(uint32_t slot) {
    const uint64_t n = o_.records;
    const bool partitioned = partitions_ > 1;
    const uint32_t want = partitioned ? allowed_[slot % allowed_.size()] : 0;
    auto acceptable = [&](Key k) {
      return (!partitioned || map_.Of(k) == want) && std::find(used_.begin(), used_.end(), k) == used_.end();
    };
    const int tries = kMaxResamples * static_cast<int>(std::min<uint32_t>(partitions_, 1024));
    Key key = 0;
    bool found = false;
    for (int attempt = 0; attempt < tries && !found; ++attempt) {
      key = zipf_.Next(rng_);
      found = acceptable(key);
    }
    // Deterministic probe for the next acceptable key. Validate() guarantees that every
    // partition holds more keys than one txn uses, so this ends within n steps.
    for (uint64_t step = 0; !found && step < n; ++step) {
      key = key + 1 < n ? key + 1 : 0;
      found = acceptable(key);
    }
    QR_CHECK(found, "no free key for a txn: records=%llu", static_cast<unsigned long long>(n));
    used_.push_back(key);
    return key;
  }

  const YcsbOptions o_;
  const uint32_t partitions_;
  const int64_t home_;
  const storage::KeyMapper map_;
  const ZipfGenerator zipf_;
  Rng rng_;
  const uint64_t seed_;  // for txn ids
  std::vector<Key> used_;          // keys of the txn being built (at most 2 * ops_per_txn)
  std::vector<uint32_t> allowed_;  // partitions of the txn being built
};

class TransferGenerator final : public Generator {
 public:
  TransferGenerator(const WorkloadOptions& options, ZipfGenerator zipf, uint64_t seed, uint64_t rng_seed)
      : o_(options.transfer), partitions_(options.partitions()), home_(options.home_partition),
        map_(options.partition_map), zipf_(std::move(zipf)), rng_(rng_seed), seed_(seed) {}

  Txn Next() override {
    Txn t;
    t.id = TxnIdFor(seed_, generated_++);
    Key from = 0, to = 0;
    if (partitions_ <= 1) {
      from = zipf_.Next(rng_);
      to = from;
      for (int attempt = 0; attempt < kMaxResamples && to == from; ++attempt) to = zipf_.Next(rng_);
      if (to == from) to = (from + 1) % o_.accounts;
    } else {
      // The debit on the home partition (a uniformly drawn one without a home), the credit on
      // another partition for mp_ratio of the transfers: the distribution conditioned on the
      // partition, by resampling (then a deterministic probe).
      const uint32_t p = home_ >= 0 ? static_cast<uint32_t>(home_) : static_cast<uint32_t>(rng_.Uniform(partitions_));
      const bool mp = rng_.Bernoulli(o_.mp_ratio);
      const uint32_t q = mp ? (p + 1 + static_cast<uint32_t>(rng_.Uniform(partitions_ - 1))) % partitions_ : p;
      from = DrawIn(p, o_.accounts);
      to = DrawIn(q, from);
    }
    uint64_t amount = 1 + rng_.Uniform(o_.max_amount);
    t.ops.reserve(2);
    t.ops.push_back(Op{OpKind::kDebit, from, 0, amount});
    t.ops.push_back(Op{OpKind::kCredit, to, 0, amount});
    return t;
  }

 private:
  // An account of partition `p` other than `not_this`. Validate() guarantees every partition
  // holds at least 2 accounts, so the probe ends within accounts steps.
  Key DrawIn(uint32_t p, Key not_this) {
    const int tries = kMaxResamples * static_cast<int>(std::min<uint32_t>(partitions_, 1024));
    Key key = 0;
    for (int attempt = 0; attempt < tries; ++attempt) {
      key = zipf_.Next(rng_);
      if (map_.Of(key) == p && key != not_this) return key;
    }
    for (uint64_t step = 0; step < o_.accounts; ++step) {
      key = key + 1 < o_.accounts ? key + 1 : 0;
      if (map_.Of(key) == p && key != not_this) return key;
    }
    QR_CHECK(false, "no account on partition %u besides %llu", p, static_cast<unsigned long long>(not_this));
    return 0;
  }

  const TransferOptions o_;
  const uint32_t partitions_;
  const int64_t home_;
  const storage::KeyMapper map_;
  const ZipfGenerator zipf_;
  Rng rng_;
  const uint64_t seed_;  // for txn ids
};

// What to change when a partition holds too few of the workload's `count` keys (`key`, e.g.
// ycsb.records). With range partitions the usual cause is engine.key_space: the ranges cut
// [0, key_space), so a key space far from the key count leaves partitions empty.
std::string PartitionAdvice(const storage::KeyMapper& map, uint64_t count, const std::string& key,
                            const std::string& what, uint64_t min_per_partition) {
  const uint64_t n = map.buckets();
  if (map.kind() == storage::KeyMapper::Kind::kRange && map.range_width() != (count + n - 1) / n) {
    return "the partitions are ranges of " + std::to_string(map.range_width()) +
           " keys (engine.range_function=range splits engine.key_space, about " +
           std::to_string(map.range_width() * n) + ", " + std::to_string(n) + " ways), not of the " +
           std::to_string(count) + " " + what + ": set engine.key_space=" + std::to_string(count) +
           ", or leave it out (it follows the workload's key count)";
  }
  return "use more " + what + " (" + key + " >= " + std::to_string(n * min_per_partition) +
         " with balanced partitions) or fewer partitions";
}

}  // namespace

void AddConfigKeys(ConfigSchema* s) {
  s->AddString("workload.kind", "ycsb", "which generator: ycsb (YCSB-T) or transfer (bank transfers)",
               {"ycsb", "transfer"});
  // The range is the real limit: a txn needs 2 distinct keys at least (Validate below asks for
  // 2 * ops_per_txn * partitions, which is 2 at the smallest), so 1 is refused here, in one message.
  s->AddInt("ycsb.records", 1000000, 2, int64_t{1} << 32, "records in the table; keys are [0, records)");
  s->AddInt("ycsb.fields", 10, 1, 1024, "fields per record (field 0 starts with the counter)");
  s->AddInt("ycsb.field_bytes", 10, 8, 4096, "bytes per field (>= 8: field 0 holds an int64 counter)");
  s->AddInt("ycsb.ops_per_txn", 16, 1, 1024, "operations per transaction, each on a distinct record");
  s->AddDouble("ycsb.write_ratio", 0.5, 0, 1, "probability that an operation writes (kUpdate) instead of reading");
  s->AddDouble("ycsb.theta", 0, 0, 10, "Zipf skew of the key distribution: 0 uniform, 0.99 YCSB hot, >= 1 allowed");
  s->AddBool("ycsb.scramble", true, "map Zipf ranks to keys by a fixed permutation so hot keys spread over ranges");
  s->AddDouble("ycsb.dep_ratio", 0, 0, 1, "probability that a write becomes a dependent write x <- f(y)");
  s->AddDouble("ycsb.abort_ratio", 0, 0, 1, "probability that a txn has one kAbortIf operation (replacing one op)");
  s->AddInt("ycsb.abort_fire_per_10k", 5000, 0, 10000, "how often a kAbortIf fires, per 10,000");
  s->AddDouble("ycsb.mp_ratio", 0, 0, 1, "fraction of multi-partition txns (needs engine.partitions > 1)");
  s->AddInt("ycsb.partitions_per_txn", 2, 1, 1024, "partitions touched by a multi-partition txn");
  s->AddInt("transfer.accounts", 100000, 2, int64_t{1} << 32, "accounts (records) for the transfer workload");
  s->AddInt("transfer.initial_balance", 1000, 0, int64_t{1} << 50, "starting balance of every account");
  s->AddInt("transfer.max_amount", 1500, 1, int64_t{1} << 50,
            "transfer amounts are uniform in [1, max_amount]; above the balance some debits abort");
  s->AddDouble("transfer.theta", 0, 0, 10, "Zipf skew of account choice: 0 uniform");
  s->AddDouble("transfer.mp_ratio", 0.5, 0, 1,
               "partitioned rows: share of transfers whose two accounts live on different partitions");
}

uint64_t ConfiguredKeyCount(const Config& c) {
  return static_cast<uint64_t>(c.GetString("workload.kind") == "transfer" ? c.GetInt("transfer.accounts")
                                                                          : c.GetInt("ycsb.records"));
}

uint64_t EngineKeySpace(const Config& c) {
  const int64_t given = c.GetInt("engine.key_space");
  return given > 0 ? static_cast<uint64_t>(given) : ConfiguredKeyCount(c);
}

Result<WorkloadOptions> OptionsFromConfig(const Config& c, storage::KeyMapper partition_map) {
  WorkloadOptions o;
  o.kind = c.GetString("workload.kind") == "transfer" ? WorkloadKind::kTransfer : WorkloadKind::kYcsb;
  o.partition_map = partition_map;
  YcsbOptions& y = o.ycsb;
  y.records = static_cast<uint64_t>(c.GetInt("ycsb.records"));
  y.fields = static_cast<uint32_t>(c.GetInt("ycsb.fields"));
  y.field_bytes = static_cast<uint32_t>(c.GetInt("ycsb.field_bytes"));
  y.ops_per_txn = static_cast<uint32_t>(c.GetInt("ycsb.ops_per_txn"));
  y.write_ratio = c.GetDouble("ycsb.write_ratio");
  y.theta = c.GetDouble("ycsb.theta");
  y.scramble = c.GetBool("ycsb.scramble");
  y.dep_ratio = c.GetDouble("ycsb.dep_ratio");
  y.abort_ratio = c.GetDouble("ycsb.abort_ratio");
  y.abort_fire_per_10k = static_cast<uint32_t>(c.GetInt("ycsb.abort_fire_per_10k"));
  y.mp_ratio = c.GetDouble("ycsb.mp_ratio");
  y.partitions_per_txn = static_cast<uint32_t>(c.GetInt("ycsb.partitions_per_txn"));
  TransferOptions& t = o.transfer;
  t.accounts = static_cast<uint64_t>(c.GetInt("transfer.accounts"));
  t.initial_balance = c.GetInt("transfer.initial_balance");
  t.max_amount = static_cast<uint64_t>(c.GetInt("transfer.max_amount"));
  t.theta = c.GetDouble("transfer.theta");
  t.mp_ratio = c.GetDouble("transfer.mp_ratio");
  QR_RETURN_IF_ERROR(o.Validate());
  return o;
}

Status WorkloadOptions::Validate() const {
  std::vector<std::string> errors;
  const uint32_t partitions = partition_map.buckets();
  if (kind == WorkloadKind::kYcsb) {
    const YcsbOptions& y = ycsb;
    if (y.field_bytes < 8) errors.push_back("ycsb.field_bytes: must be >= 8 (field 0 holds the counter)");
    if (y.fields < 1) errors.push_back("ycsb.fields: must be >= 1");
    if (y.ops_per_txn < 1) errors.push_back("ycsb.ops_per_txn: must be >= 1");
    // A txn uses up to 2 * ops_per_txn distinct keys (dependent writes read another key), all
    // possibly in one partition: every partition must hold at least that many.
    if (y.records < 2ULL * y.ops_per_txn * partitions) {
      errors.push_back("ycsb.records: must be >= 2 * ycsb.ops_per_txn * engine.partitions (= " +
                       std::to_string(2ULL * y.ops_per_txn * partitions) +
                       ") so every txn finds distinct keys; got " + std::to_string(y.records));
    } else if (partitions > 1) {
      std::vector<uint64_t> per(partitions, 0);
      for (Key k = 0; k < y.records && k < (uint64_t{1} << 24); ++k) ++per[partition_map.Of(k)];
      uint64_t least = *std::min_element(per.begin(), per.end());
      if (y.records <= (uint64_t{1} << 24) && least < 2ULL * y.ops_per_txn) {
        errors.push_back("ycsb.records: the smallest partition holds " + std::to_string(least) + " of the " +
                         std::to_string(y.records) + " keys, fewer than 2 * ycsb.ops_per_txn; " +
                         PartitionAdvice(partition_map, y.records, "ycsb.records", "records", 2ULL * y.ops_per_txn));
      }
    }
    if (!(y.write_ratio >= 0 && y.write_ratio <= 1)) errors.push_back("ycsb.write_ratio: must be in [0, 1]");
    if (!(y.theta >= 0 && y.theta <= 10)) errors.push_back("ycsb.theta: must be in [0, 10]");
    if (!(y.dep_ratio >= 0 && y.dep_ratio <= 1)) errors.push_back("ycsb.dep_ratio: must be in [0, 1]");
    if (!(y.abort_ratio >= 0 && y.abort_ratio <= 1)) errors.push_back("ycsb.abort_ratio: must be in [0, 1]");
    if (y.abort_fire_per_10k > 10000) errors.push_back("ycsb.abort_fire_per_10k: must be <= 10000");
    if (!(y.mp_ratio >= 0 && y.mp_ratio <= 1)) errors.push_back("ycsb.mp_ratio: must be in [0, 1]");
    if (partitions > 1 && y.mp_ratio > 0 && (y.partitions_per_txn < 1 || y.partitions_per_txn > partitions)) {
      errors.push_back("ycsb.partitions_per_txn: must be in [1, engine.partitions = " + std::to_string(partitions) + "]");
    }
    if (home_partition >= static_cast<int64_t>(partitions)) {
      errors.push_back("home partition " + std::to_string(home_partition) + ": the row has " +
                       std::to_string(partitions) + " partitions");
    }
  } else {
    const TransferOptions& t = transfer;
    if (t.accounts < 2) errors.push_back("transfer.accounts: must be >= 2 (a transfer needs two accounts)");
    if (t.initial_balance < 0) errors.push_back("transfer.initial_balance: must be >= 0");
    if (t.max_amount < 1) errors.push_back("transfer.max_amount: must be >= 1");
    if (!(t.theta >= 0 && t.theta <= 10)) errors.push_back("transfer.theta: must be in [0, 10]");
    if (!(t.mp_ratio >= 0 && t.mp_ratio <= 1)) errors.push_back("transfer.mp_ratio: must be in [0, 1]");
    if (partitions > 1) {
      // Every partition needs two accounts (a transfer inside it, and the credit of one from
      // elsewhere), counted as the YCSB check above counts keys.
      std::vector<uint64_t> per(partitions, 0);
      for (Key k = 0; k < t.accounts && k < (uint64_t{1} << 24); ++k) ++per[partition_map.Of(k)];
      const uint64_t least = *std::min_element(per.begin(), per.end());
      if (t.accounts <= (uint64_t{1} << 24) && least < 2) {
        errors.push_back("transfer.accounts: the smallest partition holds " + std::to_string(least) + " of the " +
                         std::to_string(t.accounts) + " accounts, fewer than 2; " +
                         PartitionAdvice(partition_map, t.accounts, "transfer.accounts", "accounts", 2));
      }
    }
    if (home_partition >= static_cast<int64_t>(partitions)) {
      errors.push_back("home partition " + std::to_string(home_partition) + ": the row has " +
                       std::to_string(partitions) + " partitions");
    }
  }
  if (errors.empty()) return Status::Ok();
  std::string msg = "invalid workload configuration:";
  for (const auto& e : errors) msg += "\n  " + e;
  return Status::InvalidArgument(msg);
}

storage::RecordLayout WorkloadOptions::Layout() const {
  if (kind == WorkloadKind::kTransfer) return storage::RecordLayout{1, 8};  // just the balance
  return storage::RecordLayout{ycsb.fields, ycsb.field_bytes};
}

uint64_t WorkloadOptions::RecordCount() const {
  return kind == WorkloadKind::kTransfer ? transfer.accounts : ycsb.records;
}

Status CheckMemoryFits(const WorkloadOptions& options, uint64_t tables, uint64_t txns_in_flight) {
  const storage::RecordLayout layout = options.Layout();
  const bool transfer = options.kind == WorkloadKind::kTransfer;
  const uint64_t table_bytes = SaturatingMul(storage::Table::MemoryBytes(layout, options.RecordCount()), tables);
  const uint64_t ops = transfer ? 2 : options.ycsb.ops_per_txn;
  const uint64_t read_bytes = SaturatingMul(SaturatingMul(txns_in_flight, ops), layout.size());
  const std::string what =
      std::string(tables == 1 ? "the table" : std::to_string(tables) + " tables") + " of " +
      std::to_string(options.RecordCount()) + " records of " + std::to_string(layout.size()) + " bytes (" +
      (transfer ? "transfer.accounts" : "ycsb.records x ycsb.fields x ycsb.field_bytes") + ": " +
      std::to_string(table_bytes) + " bytes) and the read values of " + std::to_string(txns_in_flight) +
      " txns in flight (engine.batches_in_flight x batch.txns x " + (transfer ? "2 ops" : "ycsb.ops_per_txn") +
      " x record bytes: " + std::to_string(read_bytes) + " bytes)";
  return CheckFitsInMemory(SaturatingAdd(table_bytes, read_bytes), what);
}

Result<std::unique_ptr<Generator>> MakeGenerator(const WorkloadOptions& options, uint64_t seed) {
  QR_RETURN_IF_ERROR(options.Validate());
  // The generator's Rng stream is derived from the seed, so that different consumers of one
  // seed (e.g. tests) can derive other streams without colliding with it.
  uint64_t rng_seed = Mix64(seed ^ 0x6a09e667f3bcc908ULL);
  if (options.kind == WorkloadKind::kTransfer) {
    auto z = ZipfGenerator::Create(options.transfer.accounts, options.transfer.theta, true, kScrambleSeed);
    if (!z.ok()) return Status::InvalidArgument("transfer.theta: " + z.status().message());
    return std::unique_ptr<Generator>(new TransferGenerator(options, std::move(z).value(), seed, rng_seed));
  }
  auto z = ZipfGenerator::Create(options.ycsb.records, options.ycsb.theta, options.ycsb.scramble, kScrambleSeed);
  if (!z.ok()) return Status::InvalidArgument("ycsb.theta: " + z.status().message());
  return std::unique_ptr<Generator>(new YcsbGenerator(options, std::move(z).value(), seed, rng_seed));
}

Status LoadTable(const WorkloadOptions& options, storage::Table* table, const std::function<bool(storage::Key)>& keep) {
  const storage::RecordLayout layout = options.Layout();
  if (table->layout().fields != layout.fields || table->layout().field_bytes != layout.field_bytes) {
    return Status::InvalidArgument("LoadTable: the table's record layout differs from the workload's");
  }
  if (table->size() != 0) return Status::InvalidArgument("LoadTable: the table is not empty");
  std::vector<char> rec(layout.size());
  const int64_t counter = options.InitialCounter();
  const uint64_t n = options.RecordCount();
  for (Key key = 0; key < n; ++key) {
    if (keep && !keep(key)) continue;
    storage::InitRecord(rec.data(), layout, key, counter);
    QR_RETURN_IF_ERROR(table->Insert(key, rec.data()));
  }
  return Status::Ok();
}

Status DumpState(const storage::Table& table, const std::string& path) {
  std::vector<std::pair<Key, int64_t>> rows;
  rows.reserve(table.size());
  table.ForEach([&](Key key, const char* rec) { rows.emplace_back(key, storage::GetCounter(rec)); });
  std::sort(rows.begin(), rows.end());
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return Status::IoError("cannot open '" + path + "' for writing");
  for (const auto& [key, counter] : rows) std::fprintf(f, "%" PRIu64 "\t%" PRId64 "\n", key, counter);
  bool ok = std::ferror(f) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return Status::IoError("error writing '" + path + "'");
  return Status::Ok();
}

Status ProbeWritable(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return Status::InvalidArgument("cannot write '" + path + "': " + std::strerror(errno));
  std::fclose(f);
  return Status::Ok();
}

}  // namespace qrstore::workloads
