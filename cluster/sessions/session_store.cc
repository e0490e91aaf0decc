#include "cluster/sessions/session_store.h"

#include <utility>

#include "storage/ops.h"

namespace qrstore::cluster {

planner::SessionLimits SessionLimitsFromConfig(const Config& config) {
  planner::SessionLimits l;
  l.max_sessions = static_cast<uint32_t>(config.GetInt("server.session_max_sessions"));
  l.max_outcomes_per_session = static_cast<uint32_t>(config.GetInt("server.session_max_outcomes_per_session"));
  l.max_outcomes = static_cast<uint64_t>(config.GetInt("server.session_max_outcomes"));
  // Read values are kept only when the followers get them too (session_store.h).
  l.max_value_bytes = config.GetBool("server.session_read_values")
                          ? static_cast<uint64_t>(config.GetInt("server.session_max_value_bytes"))
                          : 0;
  return l;
}

namespace {

using proto::ResultCode;

// A history read's ops: a kRead of every key `ops` touch, each once, in first-touch order.
std::vector<storage::Op> HistoryReadOps(const std::vector<storage::Op>& ops) {
  std::vector<storage::Op> reads;
  auto add = [&reads](storage::Key k) {
    for (const storage::Op& r : reads) {
      if (r.key == k) return;
    }
    reads.push_back(storage::Op{storage::OpKind::kRead, k, 0, 0});
  };
  for (const storage::Op& op : ops) {
    if (op.kind == storage::OpKind::kDepWrite) add(op.src_key);
    add(op.key);
  }
  return reads;
}

}  // namespace

SessionAnswer SessionStore::AnswerFromHistory(const commit::TxnOutcome& o, const HistoryRead& h) const {
  SessionAnswer a;
  a.client = h.client;
  a.session = h.session;
  a.seq = h.seq;
  a.code = ResultCode::kCommittedNoValues;
  a.pos = o.history_of;
  const uint32_t rec = history_layout_.size();
  const std::vector<storage::Op> keys = HistoryReadOps(h.original.ops);
  // The values hold every key's record just before the original, if nothing it needed was
  // overwritten in the histories meanwhile (checked after the read ran: only turns false).
  if (o.status != commit::TxnStatus::kCommitted || rec == 0 || o.values.size() != keys.size() * rec ||
      !history_covers_(o.history_of.batch)) {
    return a;
  }
  // Run the original's ops on those records, as the serial order did, taking each kRead's.
  std::string records(o.values);
  auto record_of = [&](storage::Key k) -> char* {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (keys[i].key == k) return records.data() + i * rec;
    }
    return nullptr;
  };
  // An op on a key the table lacks does nothing and reads zeros (engine/engine.h); a
  // dependency on one flows 0. Which keys exist never changes after loading.
  const std::string zeros(rec, '\0');
  std::string values;
  for (const storage::Op& op : h.original.ops) {
    if (!history_exists_(op.key)) {
      if (op.kind == storage::OpKind::kRead) values += zeros;
      continue;
    }
    char* r = record_of(op.key);
    const char* src = nullptr;
    if (op.kind == storage::OpKind::kDepWrite) src = history_exists_(op.src_key) ? record_of(op.src_key) : zeros.data();
    if (storage::ApplyOp(op, r, src, history_layout_, h.original.id)) return a;  // it committed: cannot fire
    if (op.kind == storage::OpKind::kRead) values.append(r, rec);
  }
  a.code = ResultCode::kCommitted;
  a.reads = static_cast<uint32_t>(values.size() / rec);
  a.values = std::move(values);
  return a;
}

void SessionStore::Admit(uint64_t batch, uint32_t planner, std::vector<storage::Txn>* txns, size_t from,
                         std::vector<SessionAnswer>* answers) {
  std::vector<storage::Txn>& t = *txns;
  // Nothing to look at (the common case without sessions): no lock.
  size_t first = from;
  while (first < t.size() && (t[first].session == 0 || t[first].session == storage::kOpenSession)) ++first;
  if (first == t.size()) return;
  MutexLock lk(mu_);
  size_t out = first;
  for (size_t i = first; i < t.size(); ++i) {
    storage::Txn& x = t[i];
    if (x.session != 0 && x.session != storage::kOpenSession) {
      const planner::SessionOutcome* done = nullptr;
      const planner::Verdict v =
          table_.CheckAndMark(x.session, x.seq, commit::PlannedPos{batch, planner, static_cast<uint32_t>(out)}, &done);
      if (v != planner::Verdict::kNew) {
        SessionAnswer a;
        a.client = x.client;
        a.session = x.session;
        a.seq = x.seq;
        switch (v) {
          case planner::Verdict::kDone:
            ++counters_.duplicates;
            a.code = proto::ResultCodeOf(done->status);
            a.pos = done->pos;
            if (a.code == ResultCode::kCommitted && done->values_known && record_bytes_ > 0) {
              a.values = done->values;  // the original outcome, values included
              a.reads = static_cast<uint32_t>(done->values.size() / record_bytes_);
            } else if (a.code == ResultCode::kCommitted && storage::ReadOps(x) > 0 && history_covers_ &&
                       history_reads_.size() < kMaxHistoryReads && history_covers_(done->pos.batch)) {
              // Its values come from the write histories: planned as its history read, here.
              ++counters_.history_reads;
              history_reads_.emplace(done->pos, HistoryRead{x.client, x.session, x.seq, x});
              storage::Txn& r = x;
              r.session = 0;
              r.seq = 0;
              r.history = true;
              r.history_batch = done->pos.batch;
              r.history_planner = done->pos.planner;
              r.history_index = done->pos.index;
              r.ops = HistoryReadOps(x.ops);
              if (out != i) t[out] = std::move(x);
              ++out;
              continue;
            } else if (a.code == ResultCode::kCommitted && storage::ReadOps(x) > 0) {
              // No values kept (see the header): a committed txn that read something says so
              // instead of returning no values as if it had read none.
              a.code = ResultCode::kCommittedNoValues;
            }
            break;
          case planner::Verdict::kInFlight:
            ++counters_.duplicates;
            waiters_.emplace(std::make_pair(x.session, x.seq), Waiter{x.client, storage::ReadOps(x) > 0});
            continue;  // answered by Apply
          case planner::Verdict::kExpired:
            ++counters_.expired;
            a.code = ResultCode::kExpired;
            table_.Check(x.session, x.seq, nullptr, &a.detail);
            a.detail += ": outcome unknown; it is not executed again";
            break;
          default:  // kUnknownSession, kBadSeq
            ++counters_.refused;
            a.code = ResultCode::kRejected;
            table_.Check(x.session, x.seq, nullptr, &a.detail);
            break;
        }
        answers->push_back(std::move(a));
        continue;
      }
    }
    if (out != i) t[out] = std::move(x);
    ++out;
  }
  t.resize(out);
}

void SessionStore::Apply(const std::vector<commit::TxnOutcome>& outcomes,
                         std::vector<std::pair<size_t, uint64_t>>* opened, std::vector<SessionAnswer>* answers) {
  // The lock is taken at the first outcome that needs it (a history read, or one with a
  // session) and held to the end; a slice with neither does not take it.
  size_t first = 0;
  while (first < outcomes.size() && !outcomes[first].history && outcomes[first].session == 0) ++first;
  if (first == outcomes.size()) return;
  MutexLock lk(mu_);
  for (size_t i = first; i < outcomes.size(); ++i) {
    const commit::TxnOutcome& o = outcomes[i];
    if (o.history) {
      auto it = history_reads_.find(o.history_of);
      if (it == history_reads_.end()) continue;  // planned before a ClearInFlight
      SessionAnswer a = AnswerFromHistory(o, it->second);
      if (a.code != ResultCode::kCommitted) ++counters_.history_misses;
      history_reads_.erase(it);
      answers->push_back(std::move(a));
      continue;
    }
    if (o.session == 0) continue;
    // A row home's sub-slice lists the home slice's txns by home_index (ForRowHome).
    const commit::PlannedPos pos = row_home_ ? commit::PlannedPos{o.pos.batch, o.pos.planner, o.home_index} : o.pos;
    if (o.session == storage::kOpenSession) {
      opened->emplace_back(i, table_.Open(pos));
      ++counters_.opened;
      continue;
    }
    table_.Record(o.session, o.seq, pos, o.status, keep_values_ ? o.values : std::string_view(), keep_values_);
    if (waiters_.empty()) continue;
    auto [begin, end] = waiters_.equal_range({o.session, o.seq});
    for (auto it = begin; it != end; ++it) {
      SessionAnswer a;
      a.client = it->second.client;
      a.session = o.session;
      a.seq = o.seq;
      a.code = proto::ResultCodeOf(o.status);
      a.pos = pos;
      if (a.code == ResultCode::kCommitted && row_home_) {
        // Only this partition's part of what it read is here.
        if (it->second.reads) a.code = ResultCode::kCommittedNoValues;
      } else if (a.code == ResultCode::kCommitted) {
        a.reads = o.reads;
        a.values.assign(o.values);
      }
      answers->push_back(std::move(a));
    }
    waiters_.erase(begin, end);
  }
}

void SessionStore::ClearInFlight() {
  MutexLock lk(mu_);
  table_.ClearInFlight();
  waiters_.clear();
  history_reads_.clear();
}

uint64_t SessionStore::Digest() const {
  MutexLock lk(mu_);
  return table_.Digest();
}
void SessionStore::Restore(planner::SessionTable table) {
  MutexLock lk(mu_);
  table_ = std::move(table);
}

std::string SessionStore::Encode() const {
  MutexLock lk(mu_);
  return table_.Encode();
}
size_t SessionStore::sessions() const {
  MutexLock lk(mu_);
  return table_.sessions();
}
uint64_t SessionStore::outcomes() const {
  MutexLock lk(mu_);
  return table_.outcomes();
}
SessionStoreCounters SessionStore::counters() const {
  MutexLock lk(mu_);
  return counters_;
}

}  // namespace qrstore::cluster
