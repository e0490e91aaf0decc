#include "planner/session_table.h"

#include <algorithm>
#include <utility>

#include "common/codec.h"
#include "common/hash.h"

namespace qrstore::planner {

namespace {

constexpr char kMagic[4] = {'Q', 'S', 'T', '1'};
// Seeds of the digest's item hashes: a session and an outcome with equal words differ.
constexpr uint64_t kSessionSeed = 0x5e5510a0d1ull;
constexpr uint64_t kOutcomeSeed = 0x0c0e0a1d2ull;
constexpr uint64_t kDigestSeed = 0xd16e57ull;
constexpr uint8_t kMaxStatus = static_cast<uint8_t>(storage::TxnStatus::kAbortedCascade);
// The least bytes one encoded session / outcome takes (a varint per field, one byte each at
// the least): what a count is checked against before anything is allocated.
constexpr size_t kMinSessionBytes = 6;   // id, batch, planner, index, floor, highest
constexpr size_t kMinOutcomeBytes = 7;   // session, seq, status, batch, planner, index, known
// Heap bytes per red-black tree node besides its value (colour, parent, left, right).
constexpr size_t kNodeOverhead = 32;

void PutPos(Writer& w, const PlannedPos& p) {
  w.PutVarint(p.batch);
  w.PutVarint(p.planner);
  w.PutVarint(p.index);
}

bool GetPos(Reader& r, PlannedPos* p) {
  uint64_t batch = 0, planner = 0, index = 0;
  if (!r.GetVarint(&batch) || !r.GetVarint(&planner) || !r.GetVarint(&index)) return false;
  if (planner > UINT32_MAX || index > UINT32_MAX) return false;
  *p = PlannedPos{batch, static_cast<uint32_t>(planner), static_cast<uint32_t>(index)};
  return true;
}

std::string Name(uint64_t session, uint64_t seq) {
  return "session " + std::to_string(session) + " seq " + std::to_string(seq);
}

}  // namespace

Status SessionLimits::Validate() const {
  std::string bad;
  auto add = [&bad](const char* what) {
    if (!bad.empty()) bad += "; ";
    bad += what;
  };
  if (max_sessions == 0) add("max_sessions: must be >= 1");
  if (max_outcomes_per_session == 0) add("max_outcomes_per_session: must be >= 1");
  if (max_outcomes == 0) add("max_outcomes: must be >= 1");
  // max_value_bytes 0 is valid: keep no read values at all.
  if (bad.empty()) return Status::Ok();
  return Status::InvalidArgument("session limits: " + bad);
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kNew: return "new";
    case Verdict::kDone: return "done";
    case Verdict::kInFlight: return "in flight";
    case Verdict::kExpired: return "expired";
    case Verdict::kUnknownSession: return "unknown session";
    case Verdict::kBadSeq: return "bad seq";
  }
  return "?";
}

SessionTable::SessionTable(SessionLimits limits) : limits_(limits) {
  const Status s = limits_.Validate();
  QR_CHECK(s.ok(), "%s", s.ToString().c_str());
}

namespace {
// One word into a running item hash: a multiply-xorshift step (a few cycles; Hash64's full mix
// per word made these two hashes a quarter of Record's time). Mix64 finishes the item.
inline uint64_t Fold(uint64_t h, uint64_t w) {
  h = (h ^ w) * 0x9fb21c651e98df25ULL;
  return h ^ (h >> 29);
}
}  // namespace

uint64_t SessionTable::SessionHash(uint64_t id, const Session& s) {
  uint64_t h = Fold(kSessionSeed, id);
  h = Fold(h, s.activity.batch);
  h = Fold(h, (uint64_t{s.activity.planner} << 32) | s.activity.index);
  h = Fold(h, s.floor);
  return Mix64(Fold(h, s.highest));
}

uint64_t SessionTable::OutcomeHash(uint64_t session, uint64_t seq, const SessionOutcome& o) {
  // Not the values nor values_known: they differ between nodes (see the header).
  uint64_t h = Fold(kOutcomeSeed, session);
  h = Fold(h, seq);
  h = Fold(h, o.pos.batch);
  h = Fold(h, (uint64_t{o.pos.planner} << 32) | o.pos.index);
  return Mix64(Fold(h, static_cast<uint64_t>(o.status)));
}

template <typename F>
void SessionTable::Mutate(uint64_t id, Session& s, F change) {
  sum_ -= SessionHash(id, s);
  const ActivityKey before = KeyOf(id, s);
  change();
  const ActivityKey after = KeyOf(id, s);
  if (after != before) {
    // Re-keyed in its own node (no allocation); activity only grows in apply order, so the new
    // key is usually the largest: the end is the hint.
    auto node = by_activity_.extract(before);
    node.value() = after;
    by_activity_.insert(by_activity_.end(), std::move(node));
  }
  sum_ += SessionHash(id, s);
}

void SessionTable::AddSession(uint64_t id, Session s) {
  by_activity_.insert(KeyOf(id, s));
  sum_ += SessionHash(id, s);
  sessions_.emplace_hint(sessions_.end(), id, std::move(s));
}

uint64_t SessionTable::Open(PlannedPos pos) {
  if (sessions_.size() >= limits_.max_sessions) {
    const uint64_t victim = std::get<3>(*by_activity_.begin());
    Evict(sessions_.find(victim));
  }
  QR_CHECK(next_id_ < UINT64_MAX, "session ids exhausted");
  const uint64_t id = next_id_++;
  Session s;
  s.activity = pos;
  AddSession(id, std::move(s));
  return id;
}

void SessionTable::Evict(std::map<uint64_t, Session>::iterator it) {
  const uint64_t id = it->first;
  Session& s = it->second;
  while (!s.outcomes.empty()) EraseOutcomeAt(id, s, 0);
  in_flight_count_ -= s.in_flight.size();
  sum_ -= SessionHash(id, s);
  by_activity_.erase(KeyOf(id, s));
  sessions_.erase(it);
}

bool SessionTable::Record(uint64_t session, uint64_t seq, PlannedPos pos, storage::TxnStatus status,
                          std::string_view values, bool values_known) {
  QR_CHECK(static_cast<uint8_t>(status) <= kMaxStatus, "bad TxnStatus %d", static_cast<int>(status));
  const auto it = sessions_.find(session);
  if (it == sessions_.end()) return false;
  Session& s = it->second;
  if (s.in_flight.Erase(seq)) --in_flight_count_;
  if (seq == 0 || seq < s.floor || (seq <= s.highest && s.outcomes.Find(seq) != nullptr)) return false;
  SessionOutcome o;
  o.status = status;
  o.pos = pos;
  // A value larger than the whole cap would only push out every other one and then go itself.
  o.values_known = values_known && values.size() <= limits_.max_value_bytes;
  if (o.values_known) o.values.assign(values.data(), values.size());
  // One change of the session's replicated fields (one digest update, one re-keying): the new
  // activity and highest seq, the outcome, and the floor the per-session cap raises.
  Mutate(session, s, [&] {
    s.activity = pos;
    s.highest = std::max(s.highest, seq);
    Insert(session, s, seq, std::move(o));
    while (s.outcomes.size() > limits_.max_outcomes_per_session) ForgetBelow(session, s, s.outcomes.front().first);
  });
  Enforce(session);
  return true;
}

void SessionTable::Insert(uint64_t id, Session& s, uint64_t seq, SessionOutcome outcome) {
  const uint64_t stamp = next_stamp_++;
  fifo_.Push(stamp, id, seq);
  if (outcome.values_known) {
    value_bytes_ += outcome.values.size();
    valued_.insert(valued_.end(), stamp);
  }
  sum_ += OutcomeHash(id, seq, outcome);
  s.outcomes.Insert(seq, Stored{std::move(outcome), stamp});  // (usually the largest: O(1))
}

void SessionTable::EraseOutcomeAt(uint64_t id, Session& s, size_t i) {
  auto& o = s.outcomes[i];
  sum_ -= OutcomeHash(id, o.first, o.second.outcome);
  if (o.second.outcome.values_known) {
    value_bytes_ -= o.second.outcome.values.size();
    valued_.erase(o.second.stamp);
  }
  fifo_.Kill(o.second.stamp);
  s.outcomes.EraseAt(i);
}

void SessionTable::Fifo::Kill(uint64_t stamp) {
  auto* e = ring.Find(stamp);
  QR_CHECK(e != nullptr && e->second.live, "session table: outcome stamp %llu not live", static_cast<unsigned long long>(stamp));
  e->second.live = false;
  --live;
  while (!ring.empty() && !ring.front().second.live) ring.PopFront();
  if (ring.size() > 2 * live + 64) {
    SortedRing<OutcomeRef> kept;
    for (size_t i = 0; i < ring.size(); ++i) {
      if (ring[i].second.live) kept.Insert(ring[i].first, ring[i].second);
    }
    ring = std::move(kept);
  }
}

void SessionTable::Forget(uint64_t id, Session& s, uint64_t seq) {
  if (seq >= s.floor) {
    Mutate(id, s, [&] { ForgetBelow(id, s, seq); });
  } else {
    ForgetBelow(id, s, seq);
  }
}

void SessionTable::ForgetBelow(uint64_t id, Session& s, uint64_t seq) {
  if (seq >= s.floor) s.floor = seq + 1;
  // `seq` itself and any smaller seq still remembered are below the floor now: unreachable.
  while (!s.outcomes.empty() && s.outcomes.front().first < s.floor) EraseOutcomeAt(id, s, 0);
}

void SessionTable::DropValues(Stored& st) {
  value_bytes_ -= st.outcome.values.size();
  std::string().swap(st.outcome.values);  // free the bytes, not just the size
  st.outcome.values_known = false;
  valued_.erase(st.stamp);
}

void SessionTable::Enforce(uint64_t id) {
  Session& s = sessions_.at(id);
  while (s.outcomes.size() > limits_.max_outcomes_per_session) Forget(id, s, s.outcomes.front().first);
  while (fifo_.live > limits_.max_outcomes) {
    const OutcomeRef ref = fifo_.Front();
    Forget(ref.session, sessions_.at(ref.session), ref.seq);
  }
  while (value_bytes_ > limits_.max_value_bytes) {
    const OutcomeRef ref = fifo_.At(*valued_.begin());
    DropValues(sessions_.at(ref.session).outcomes.Find(ref.seq)->second);
  }
}

uint64_t SessionTable::HighestSeen(const Session& s) {
  return std::max(s.highest, s.in_flight.empty() ? 0 : s.in_flight.back().first);
}

Verdict SessionTable::Check(uint64_t session, uint64_t seq, const SessionOutcome** done, std::string* why) const {
  const Verdict v = Decide(session, seq, done);
  if (why != nullptr) *why = Explain(session, seq, v);  // only when asked: no strings on the hot path
  return v;
}

Verdict SessionTable::Decide(uint64_t session, uint64_t seq, const SessionOutcome** done) const {
  const auto it = sessions_.find(session);  // id 0 is never a key
  if (it == sessions_.end()) return Verdict::kUnknownSession;
  const Session& s = it->second;
  if (seq == 0) return Verdict::kBadSeq;
  if (seq < s.floor) return Verdict::kExpired;
  if (const auto* o = seq <= s.highest ? s.outcomes.Find(seq) : nullptr; o != nullptr) {
    if (done != nullptr) *done = &o->second.outcome;
    return Verdict::kDone;
  }
  if (s.in_flight.Find(seq) != nullptr) return Verdict::kInFlight;
  const uint64_t seen = HighestSeen(s);
  if (seq > seen && seq - seen > limits_.max_outcomes_per_session) return Verdict::kBadSeq;
  return Verdict::kNew;
}

std::string SessionTable::Explain(uint64_t session, uint64_t seq, Verdict v) const {
  if (v == Verdict::kUnknownSession) {
    if (session == 0) return "session 0 is not a session (ids start at 1)";
    return "session " + std::to_string(session) + " is unknown: never opened, or evicted (next id " +
           std::to_string(next_id_) + ")";
  }
  const Session& s = sessions_.at(session);
  const std::string name = Name(session, seq);
  switch (v) {
    case Verdict::kBadSeq:
      if (seq == 0) return name + ": seqs start at 1";
      return name + ": skips far ahead of the highest seq seen " + std::to_string(HighestSeen(s)) + " (at most " +
             std::to_string(limits_.max_outcomes_per_session) + " beyond it)";
    case Verdict::kExpired:
      return name + ": below the floor " + std::to_string(s.floor) + ", its outcome is forgotten (if it ever ran)";
    case Verdict::kDone:
      return name + ": already decided at batch " + std::to_string(s.outcomes.Find(seq)->second.outcome.pos.batch);
    case Verdict::kInFlight: return name + ": planned, not committed yet";
    case Verdict::kNew: return name + ": new (floor " + std::to_string(s.floor) + ", highest seq seen " +
                               std::to_string(HighestSeen(s)) + ")";
    case Verdict::kUnknownSession: break;
  }
  return name;
}

void SessionTable::MarkInFlight(uint64_t session, uint64_t seq, PlannedPos pos) {
  const Verdict v = Decide(session, seq, nullptr);
  QR_CHECK(v == Verdict::kNew, "MarkInFlight after %s: %s", VerdictName(v), Explain(session, seq, v).c_str());
  sessions_.at(session).in_flight.Insert(seq, pos);
  ++in_flight_count_;
}

Verdict SessionTable::CheckAndMark(uint64_t session, uint64_t seq, PlannedPos pos, const SessionOutcome** done) {
  const auto it = sessions_.find(session);
  if (it == sessions_.end()) return Verdict::kUnknownSession;
  const Verdict v = Decide(session, seq, done);
  if (v == Verdict::kNew) {
    it->second.in_flight.Insert(seq, pos);
    ++in_flight_count_;
  }
  return v;
}

void SessionTable::ClearInFlight() {
  for (auto& [id, s] : sessions_) s.in_flight.clear();
  in_flight_count_ = 0;
}

uint64_t SessionTable::Digest() const {
  const uint64_t w[2] = {next_id_, sum_};
  return Hash64(w, sizeof w, kDigestSeed);
}

size_t SessionTable::MemoryBytes() const {
  constexpr size_t kSession = sizeof(std::pair<const uint64_t, Session>) + kNodeOverhead +  // sessions_
                              sizeof(ActivityKey) + kNodeOverhead;                          // by_activity_
  constexpr size_t kValued = sizeof(uint64_t) + kNodeOverhead;                              // valued_
  size_t rings = fifo_.ring.BufferBytes();
  for (const auto& [id, s] : sessions_) rings += s.outcomes.BufferBytes() + s.in_flight.BufferBytes();
  return sizeof(*this) + sessions_.size() * kSession + rings + valued_.size() * kValued +
         static_cast<size_t>(value_bytes_);
}

// Bytes: magic "QST1"; varint next_id; varint session count, then per session in id order:
// varint id delta (>= 1, from the previous id or 0), activity (varint batch, planner, index),
// varint floor, varint highest; varint outcome count, then per outcome in record (FIFO) order:
// varint session, varint seq, u8 status, pos (3 varints), u8 values_known, values (varint
// length + bytes) only when known.
std::string SessionTable::Encode() const {
  Writer w(16 + sessions_.size() * 16 + fifo_.live * 16 + value_bytes_);
  w.PutRaw(kMagic, sizeof kMagic);
  w.PutVarint(next_id_);
  w.PutVarint(sessions_.size());
  uint64_t prev = 0;
  for (const auto& [id, s] : sessions_) {
    w.PutVarint(id - prev);
    prev = id;
    PutPos(w, s.activity);
    w.PutVarint(s.floor);
    w.PutVarint(s.highest);
  }
  w.PutVarint(fifo_.live);
  for (size_t i = 0; i < fifo_.ring.size(); ++i) {
    const OutcomeRef& ref = fifo_.ring[i].second;
    if (!ref.live) continue;
    const SessionOutcome& o = sessions_.at(ref.session).outcomes.Find(ref.seq)->second.outcome;
    w.PutVarint(ref.session);
    w.PutVarint(ref.seq);
    w.PutU8(static_cast<uint8_t>(o.status));
    PutPos(w, o.pos);
    w.PutU8(o.values_known ? 1 : 0);
    if (o.values_known) w.PutBytes(o.values);
  }
  return w.Release();
}

Result<SessionTable> SessionTable::Decode(std::string_view bytes, SessionLimits limits) {
  QR_RETURN_IF_ERROR(limits.Validate());
  auto corrupt = [](const std::string& what) { return Status::Corruption("session table: " + what); };
  Reader r(bytes);
  std::string_view magic;
  if (!r.GetRaw(sizeof kMagic, &magic) || magic != std::string_view(kMagic, sizeof kMagic)) {
    return corrupt("bad magic");
  }
  SessionTable t(limits);
  uint64_t count = 0;
  if (!r.GetVarint(&t.next_id_) || t.next_id_ == 0) return corrupt("bad next id");
  if (!r.GetCount(&count, kMinSessionBytes)) return corrupt("truncated session count");
  if (count > limits.max_sessions) {
    return Status::InvalidArgument("session table: " + std::to_string(count) + " sessions, more than max_sessions " +
                                   std::to_string(limits.max_sessions));
  }
  uint64_t prev = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t delta = 0;
    Session s;
    if (!r.GetVarint(&delta) || !GetPos(r, &s.activity) || !r.GetVarint(&s.floor) || !r.GetVarint(&s.highest)) {
      return corrupt("truncated session " + std::to_string(i));
    }
    if (delta == 0 || delta >= t.next_id_ - prev) return corrupt("session ids not increasing below the next id");
    const uint64_t id = prev + delta;
    prev = id;
    if (s.floor == 0 || s.floor - 1 > s.highest) {
      return corrupt("session " + std::to_string(id) + ": floor " + std::to_string(s.floor) + " not in [1, highest " +
                     std::to_string(s.highest) + " + 1]");
    }
    t.AddSession(id, std::move(s));
  }
  if (!r.GetCount(&count, kMinOutcomeBytes)) return corrupt("truncated outcome count");
  if (count > limits.max_outcomes) {
    return Status::InvalidArgument("session table: " + std::to_string(count) + " outcomes, more than max_outcomes " +
                                   std::to_string(limits.max_outcomes));
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t session = 0, seq = 0;
    uint8_t status = 0, known = 0;
    SessionOutcome o;
    if (!r.GetVarint(&session) || !r.GetVarint(&seq) || !r.GetU8(&status) || !GetPos(r, &o.pos) ||
        !r.GetU8(&known) || (known == 1 && !r.GetBytes(&o.values))) {
      return corrupt("truncated outcome " + std::to_string(i));
    }
    if (status > kMaxStatus || known > 1) return corrupt("outcome " + std::to_string(i) + ": bad status or flag");
    const auto it = t.sessions_.find(session);
    if (it == t.sessions_.end()) return corrupt(Name(session, seq) + ": no such session");
    Session& s = it->second;
    if (seq < s.floor || seq > s.highest || s.outcomes.Find(seq) != nullptr) {
      return corrupt(Name(session, seq) + ": below the floor, above the highest seq or twice");
    }
    if (s.outcomes.size() >= limits.max_outcomes_per_session) {
      return Status::InvalidArgument("session table: session " + std::to_string(session) +
                                     " has more outcomes than max_outcomes_per_session " +
                                     std::to_string(limits.max_outcomes_per_session));
    }
    o.status = static_cast<storage::TxnStatus>(status);
    o.values_known = known == 1;
    t.Insert(session, s, seq, std::move(o));
    if (t.value_bytes_ > limits.max_value_bytes) {
      return Status::InvalidArgument("session table: more read values than max_value_bytes " +
                                     std::to_string(limits.max_value_bytes));
    }
  }
  if (!r.done()) return corrupt(std::to_string(r.remaining()) + " trailing bytes");
  return t;
}

}  // namespace qrstore::planner
