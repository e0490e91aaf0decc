#include "commit/row_commit.h"

#include <algorithm>
#include <optional>

#include "common/check.h"
#include "common/logging.h"

namespace qrstore::commit {

namespace {

// The first way report `b` differs from report `a`, or "" if it does not: the txns they list in
// order, each one's status and read values.
std::string Difference(const RowSliceReport& a, const RowSliceReport& b) {
  auto values = [](const RowSliceReport& r, const RowTxnReport& t) -> std::optional<std::string_view> {
    if (uint64_t{t.values_begin} + t.values_size > r.values.size()) return std::nullopt;
    return std::string_view(r.values).substr(t.values_begin, t.values_size);
  };
  for (size_t k = 0; k < a.txns.size() && k < b.txns.size(); ++k) {
    const RowTxnReport& x = a.txns[k];
    const RowTxnReport& y = b.txns[k];
    const std::string txn = "txn " + std::to_string(x.home_index);
    if (x.home_index != y.home_index) {
      return "its entry " + std::to_string(k) + " is " + txn + ", then txn " + std::to_string(y.home_index);
    }
    if (x.status != y.status) return txn + " " + TxnStatusName(x.status) + ", then " + TxnStatusName(y.status);
    const auto vx = values(a, x), vy = values(b, y);
    if (!vx || !vy) return txn + " with values out of range";
    if (*vx != *vy) return txn + " with other read values";
  }
  if (a.txns.size() != b.txns.size()) {
    return std::to_string(a.txns.size()) + " txns listed, then " + std::to_string(b.txns.size());
  }
  return "";
}

}  // namespace

RowCommit::RowCommit(storage::KeyMapper partitions, uint32_t record_bytes, RowHomeSink sink, size_t max_pending)
    : partitions_(partitions), record_bytes_(record_bytes), sink_(std::move(sink)), max_pending_(max_pending) {}

RowCommit::Pending* RowCommit::Find(uint64_t batch, uint32_t slice) {
  auto it = pending_.find({batch, slice});
  if (it != pending_.end()) return &it->second;
  if (pending_.size() >= max_pending_) {
    Fail(Status::ResourceExhausted("home slice (" + std::to_string(batch) + ", " + std::to_string(slice) + "): " +
                                   std::to_string(max_pending_) + " home slices wait for reports already"));
    return nullptr;
  }
  return &pending_[{batch, slice}];
}

void RowCommit::Fail(Status s) {
  if (!health_.ok()) return;
  health_ = std::move(s);
  Logger("row-commit")->error("{}", health_.ToString());
}

void RowCommit::AcceptRepeats(uint64_t first_own_batch) {
  MutexLock lk(mu_);
  if (accept_repeats_) {
    QR_CHECK_EQ(first_own_batch, first_own_batch_);
    return;
  }
  // What "completed" means relies on seeing every Plan since the first own batch (see the
  // header): a home that planned already (a peer of a failed-over partition) tracked them all.
  QR_CHECK(!planned_any_ || first_own_batch == 0, "RowCommit::AcceptRepeats(%llu) after a home slice was planned",
           static_cast<unsigned long long>(first_own_batch));
  accept_repeats_ = true;
  first_own_batch_ = first_own_batch;
  // Reports that came for the predecessor's home slices: nobody here answers them.
  pending_.erase(pending_.begin(), pending_.lower_bound({first_own_batch, 0}));
}

void RowCommit::Plan(uint64_t batch, uint32_t slice, std::vector<storage::Txn> txns) {
  RowHomeSlice out;
  {
    MutexLock lk(mu_);
    if (!health_.ok()) return;
    planned_any_ = true;
    if (accept_repeats_) {
      uint64_t& next = next_plan_.try_emplace(slice, first_own_batch_).first->second;
      if (batch != next) {
        Fail(Status::InvalidArgument("home slice (" + std::to_string(batch) + ", " + std::to_string(slice) +
                                     ") planned out of order: the next of slice " + std::to_string(slice) +
                                     " is batch " + std::to_string(next)));
        return;
      }
      ++next;
    } else {
      // Tracked from the start: a home whose peer fails over takes repeats from then on.
      next_plan_[slice] = batch + 1;
    }
    Pending* found = Find(batch, slice);
    if (found == nullptr) return;
    Pending& p = *found;
    if (p.planned) {
      Fail(Status::InvalidArgument("home slice (" + std::to_string(batch) + ", " + std::to_string(slice) +
                                   ") planned twice"));
      return;
    }
    p.planned = true;
    p.txns = std::move(txns);
    if (!CompleteLocked(batch, slice, p, &out)) return;
  }
  MutexLock dl(deliver_mu_);
  sink_(batch, slice, std::move(out));
}

bool RowCommit::CompleteLocked(uint64_t batch, uint32_t slice, Pending& p, RowHomeSlice* out) {
  const auto reported = std::count(p.reported.begin(), p.reported.end(), 1);
  if (!p.planned || reported < static_cast<std::ptrdiff_t>(partitions_.buckets())) return false;
  std::string error;
  const bool ok = Assemble(p, out, &error);
  pending_.erase({batch, slice});
  if (!ok) {
    Fail(Status::Corruption("home slice (" + std::to_string(batch) + ", " + std::to_string(slice) + "): " + error));
    return false;
  }
  ++completed_;
  return true;
}

void RowCommit::Report(uint32_t from, uint64_t batch, uint32_t slice, RowSliceReport report) {
  RowHomeSlice out;
  {
    MutexLock lk(mu_);
    if (!health_.ok()) return;
    const uint32_t n = partitions_.buckets();
    const std::string where = "home slice (" + std::to_string(batch) + ", " + std::to_string(slice) + "): ";
    if (from >= n) {
      Fail(Status::Corruption(where + "a report from partition " + std::to_string(from) + " of a row of " +
                              std::to_string(n)));
      return;
    }
    if (accept_repeats_ && DropRepeatLocked(from, batch, slice, report)) return;
    Pending* found = Find(batch, slice);
    if (found == nullptr) return;
    Pending& p = *found;
    if (p.reported.empty()) {
      p.reported.assign(n, 0);
      p.reports.resize(n);
    }
    if (p.reported[from] != 0) {
      Fail(Status::Corruption(where + "partition " + std::to_string(from) + " reported twice"));
      return;
    }
    p.reported[from] = 1;
    p.reports[from] = std::move(report);
    if (!CompleteLocked(batch, slice, p, &out)) return;
  }
  MutexLock dl(deliver_mu_);
  sink_(batch, slice, std::move(out));
}

bool RowCommit::DropRepeatLocked(uint32_t from, uint64_t batch, uint32_t slice, const RowSliceReport& report) {
  // Planned by this home's predecessor: answered by nobody here.
  if (batch < first_own_batch_) return true;
  auto it = pending_.find({batch, slice});
  if (it == pending_.end()) {
    // Plan(batch, slice) came (every home slice from first_own_batch_ on is planned, in batch
    // order per slice) and its entry is gone: it completed.
    auto next = next_plan_.find(slice);
    return next != next_plan_.end() && batch < next->second;
  }
  const Pending& p = it->second;
  if (p.reported.empty() || p.reported[from] == 0) return false;
  // The partition re-executed the same sub-slice from the same state: the same report.
  const std::string diff = Difference(p.reports[from], report);
  if (!diff.empty()) {
    Fail(Status::Corruption("home slice (" + std::to_string(batch) + ", " + std::to_string(slice) + "): partition " +
                            std::to_string(from) + " reported twice, differently: " + diff));
  }
  return true;
}

bool RowCommit::Assemble(Pending& p, RowHomeSlice* out, std::string* error) const {
  const size_t n = p.txns.size();
  const uint32_t parts = partitions_.buckets();
  // Each report lists txns in strictly increasing home order: one cursor per partition walks
  // them alongside the home's txns.
  for (uint32_t q = 0; q < parts; ++q) {
    const auto& r = p.reports[q];
    for (size_t k = 0; k < r.txns.size(); ++k) {
      const RowTxnReport& t = r.txns[k];
      if (t.home_index >= n || (k > 0 && t.home_index <= r.txns[k - 1].home_index) ||
          uint64_t{t.values_begin} + t.values_size > r.values.size()) {
        *error = "partition " + std::to_string(q) + " reports txn " + std::to_string(t.home_index) + " of a slice of " +
                 std::to_string(n) + " out of order, twice or with values out of range";
        return false;
      }
    }
  }
  out->txns.resize(n);
  out->buffers.assign(1 + parts, std::string());
  std::string& merged = out->buffers[0];
  std::vector<size_t> next(parts, 0);      // per partition: its next report entry
  std::vector<int64_t> entry(parts, -1);   // per partition: txn i's entry, or -1
  std::vector<uint32_t> reads(parts, 0);   // per partition: txn i's kReads there
  std::vector<uint32_t> cursor(parts, 0);  // per partition: bytes of txn i's values merged
  for (uint32_t i = 0; i < n; ++i) {
    const storage::Txn& t = p.txns[i];
    int status = -1;
    for (uint32_t q = 0; q < parts; ++q) {
      const auto& r = p.reports[q];
      entry[q] = -1;
      if (next[q] < r.txns.size() && r.txns[next[q]].home_index == i) {
        entry[q] = static_cast<int64_t>(next[q]++);
        const int s = static_cast<int>(r.txns[entry[q]].status);
        if (status >= 0 && status != s) {
          *error = "partitions disagree on the fate of txn " + std::to_string(i) + " (" +
                   TxnStatusName(static_cast<TxnStatus>(status)) + " / " +
                   TxnStatusName(r.txns[entry[q]].status) + " from partition " + std::to_string(q) + ")";
          return false;
        }
        status = s;
      }
    }
    if (status < 0) {
      *error = "no partition reports txn " + std::to_string(i);
      return false;
    }
    RowHomeOutcome& o = out->txns[i];
    o.txn_id = t.id;
    o.client = t.client;
    o.status = static_cast<TxnStatus>(status);
    o.buffer = 0;
    o.values_begin = 0;
    o.values_size = 0;
    if (o.status != TxnStatus::kCommitted) continue;
    // Each partition reports exactly the values of the txn's reads on its keys, in op order.
    std::fill(reads.begin(), reads.end(), 0);
    for (const storage::Op& op : t.ops) {
      if (op.kind == storage::OpKind::kRead) ++reads[partitions_.Of(op.key)];
    }
    uint32_t reading = 0;  // partitions the txn reads from
    int64_t only = -1;     // the one it reads from, if one
    for (uint32_t q = 0; q < parts; ++q) {
      const uint64_t want = uint64_t{reads[q]} * record_bytes_;
      const uint64_t have = entry[q] >= 0 ? p.reports[q].txns[entry[q]].values_size : 0;
      if (have != want) {
        *error = "txn " + std::to_string(i) + ": partition " + std::to_string(q) + " reports " +
                 (have < want ? "fewer" : "more") + " reads than it has";
        return false;
      }
      if (reads[q] > 0) {
        ++reading;
        only = q;
      }
    }
    if (reading == 0) continue;
    if (reading == 1) {
      const RowTxnReport& e = p.reports[only].txns[entry[only]];
      o.buffer = 1 + static_cast<uint32_t>(only);
      o.values_begin = e.values_begin;
      o.values_size = e.values_size;
      continue;
    }
    // The reads in op order, each from the partition of its key, in that partition's order.
    std::fill(cursor.begin(), cursor.end(), 0);
    o.values_begin = static_cast<uint32_t>(merged.size());
    for (const storage::Op& op : t.ops) {
      if (op.kind != storage::OpKind::kRead) continue;
      const uint32_t q = partitions_.Of(op.key);
      const RowTxnReport& e = p.reports[q].txns[entry[q]];
      merged.append(p.reports[q].values, e.values_begin + cursor[q], record_bytes_);
      cursor[q] += record_bytes_;
    }
    o.values_size = static_cast<uint32_t>(merged.size()) - o.values_begin;
  }
  for (uint32_t q = 0; q < parts; ++q) out->buffers[1 + q] = std::move(p.reports[q].values);
  return true;
}

Status RowCommit::health() const {
  MutexLock lk(mu_);
  return health_;
}

uint64_t RowCommit::completed_slices() const {
  MutexLock lk(mu_);
  return completed_;
}

}  // namespace qrstore::commit
