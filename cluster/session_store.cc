#include "cluster/session_store.h"

#include <utility>

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

}  // namespace

void SessionStore::Admit(uint64_t batch, uint32_t planner, std::vector<storage::Txn>* txns, size_t from,
                         std::vector<SessionAnswer>* answers) {
  std::vector<storage::Txn>& t = *txns;
  // Nothing to look at (the common case without sessions): no lock.
  size_t first = from;
  while (first < t.size() && (t[first].session == 0 || t[first].session == storage::kOpenSession)) ++first;
  if (first == t.size()) return;
  std::lock_guard<std::mutex> lk(mu_);
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
            } else if (a.code == ResultCode::kCommitted && storage::ReadOps(x) > 0) {
              // No values kept (see the header): a committed txn that read something says so
              // instead of returning no values as if it had read none.
              a.code = ResultCode::kCommittedNoValues;
            }
            break;
          case planner::Verdict::kInFlight:
            ++counters_.duplicates;
            waiters_.emplace(std::make_pair(x.session, x.seq), Waiter{x.client});
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
  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const commit::TxnOutcome& o = outcomes[i];
    if (o.session == 0) continue;
    if (!lk.owns_lock()) lk.lock();
    if (o.session == storage::kOpenSession) {
      opened->emplace_back(i, table_.Open(o.pos));
      ++counters_.opened;
      continue;
    }
    table_.Record(o.session, o.seq, o.pos, o.status, keep_values_ ? o.values : std::string_view(), keep_values_);
    if (waiters_.empty()) continue;
    auto [begin, end] = waiters_.equal_range({o.session, o.seq});
    for (auto it = begin; it != end; ++it) {
      SessionAnswer a;
      a.client = it->second.client;
      a.session = o.session;
      a.seq = o.seq;
      a.code = proto::ResultCodeOf(o.status);
      a.pos = o.pos;
      if (a.code == ResultCode::kCommitted) {
        a.reads = o.reads;
        a.values.assign(o.values);
      }
      answers->push_back(std::move(a));
    }
    waiters_.erase(begin, end);
  }
}

void SessionStore::ClearInFlight() {
  std::lock_guard<std::mutex> lk(mu_);
  table_.ClearInFlight();
  waiters_.clear();
}

uint64_t SessionStore::Digest() const {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.Digest();
}
void SessionStore::Restore(planner::SessionTable table) {
  std::lock_guard<std::mutex> lk(mu_);
  table_ = std::move(table);
}

std::string SessionStore::Encode() const {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.Encode();
}
size_t SessionStore::sessions() const {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.sessions();
}
uint64_t SessionStore::outcomes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.outcomes();
}
SessionStoreCounters SessionStore::counters() const {
  std::lock_guard<std::mutex> lk(mu_);
  return counters_;
}

}  // namespace qrstore::cluster
