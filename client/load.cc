#include "client/load.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/logging.h"

namespace qrstore::client {

namespace proto = cluster::proto;
using proto::ResultCode;

namespace {

// The request id of OpenSession's kOpenSession (the sender's ids count up from 1).
constexpr uint64_t kOpenRequestId = UINT64_MAX;

size_t VarintBytes(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

}  // namespace

uint64_t MaxRequestBytes(const workloads::WorkloadOptions& o, uint64_t n) {
  const bool transfer = o.kind == workloads::WorkloadKind::kTransfer;
  const uint64_t ops = transfer ? 2 : o.ycsb.ops_per_txn;
  const uint64_t key = VarintBytes(o.RecordCount() - 1);
  const uint64_t arg = VarintBytes(transfer ? o.transfer.max_amount : o.ycsb.abort_fire_per_10k);
  // A session id and the first seq at their widest; the other seqs one byte each (a request's
  // seqs are consecutive, and a resend repeats the request's bytes).
  constexpr uint64_t kSession = 10 + 10;
  return 8 + kSession + VarintBytes(n) + n * (1 + 8 + VarintBytes(ops) + ops * (1 + 2 * key + arg));
}

uint64_t MaxReplyBytes(const workloads::WorkloadOptions& o, uint64_t n) {
  const uint64_t ops = o.kind == workloads::WorkloadKind::kTransfer ? 2 : o.ycsb.ops_per_txn;
  const uint64_t outcome = 1 + 10 + 5 + 5 + 5 + ops * o.Layout().size();
  const uint64_t rejected = 1 + 2 + proto::kMaxStringBytes;
  return 8 + 5 + 5 + n * std::max(outcome, rejected);
}

void ErrorLog::Note(const std::string& e, bool is_error) {
  MutexLock lk(mu_);
  if (is_error) ++count_;
  if (first_.size() < kKeep) first_.push_back(e);
}

std::vector<std::string> ErrorLog::first() const {
  MutexLock lk(mu_);
  return first_;
}

uint64_t ErrorLog::count() const {
  MutexLock lk(mu_);
  return count_;
}

void RunSignal::Notify() {
  {
    MutexLock lk(mu_);
    ++events_;
  }
  cv_.notify_all();
}

uint64_t RunSignal::WaitFor(uint64_t seen, int64_t timeout_ns) {
  MutexUniqueLock lk(mu_);
  cv_.wait_for(lk.native(), std::chrono::nanoseconds(std::max<int64_t>(timeout_ns, 0)),
               [&]() REQUIRES(mu_) { return events_ != seen; });
  return events_;
}

Status LoadConnection::Connect(const std::string& address) {
  address_ = address;  // before the reader thread starts: it names the connection with it
  ClientConnectionOptions o;
  o.name = std::to_string(cfg_.index);
  o.connect_timeout_ms = cfg_.connect_timeout_ms;
  o.max_frame_bytes = cfg_.max_frame_bytes;
  o.on_frame = [this](uint8_t type, std::string_view body) { return OnFrame(type, body); };
  o.on_close = [this](const Status& why) { OnClose(why); };
  auto c = ClientConnection::Connect(address, std::move(o));
  if (!c.ok()) return c.status();
  conn_ = std::move(c).value();
  return Status::Ok();
}

Result<std::string> LoadConnection::Probe(int timeout_ms) {
  {
    MutexLock lk(mu_);
    probing_ = true;
    pending_.push_back(Req{0, NowNanos(), 0, 0, {}, false, {}, {}});
  }
  proto::TxnRequestWriter w;
  w.Begin(0);
  QR_RETURN_IF_ERROR(conn_->Send(proto::MsgType::kTxnRequest, w.Finish()));
  MutexUniqueLock lk(mu_);
  const bool answered = cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms),
                                     [&]() REQUIRES(mu_) { return !probing_ || closed_; });
  if (!answered) {
    return Status::Timeout("no answer from " + address_ + " within " + std::to_string(timeout_ms) + " ms");
  }
  if (probing_) {  // closed first
    Status s = conn_->status();
    return s.ok() ? Status::Unavailable(address_ + " closed the connection") : s;
  }
  if (!probe_error_.ok()) return probe_error_;
  return probe_redirect_;
}

Status LoadConnection::OpenSession(int timeout_ms) {
  {
    MutexLock lk(mu_);
    opening_ = true;
    open_error_ = Status::Ok();
  }
  QR_RETURN_IF_ERROR(conn_->Send(proto::MsgType::kOpenSession, proto::EncodeOpenSession({kOpenRequestId})));
  MutexUniqueLock lk(mu_);
  const bool answered = cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms),
                                     [&]() REQUIRES(mu_) { return !opening_ || closed_; });
  if (!answered || opening_) {
    opening_ = false;
    if (!answered) return Status::Timeout("no answer to open-session from " + address_ + " within " + std::to_string(timeout_ms) + " ms");
    Status s = conn_->status();
    return s.ok() ? Status::Unavailable(address_ + " closed the connection") : s;
  }
  if (!open_error_.ok()) return open_error_;
  return Status::Ok();
}

void LoadConnection::Start() {
  sender_ = NamedThread("cli-send-" + std::to_string(cfg_.index), [this] {
    SendLoop();
    {
      MutexLock lk(mu_);
      sender_exited_ = true;
    }
    signal_->Notify();
  });
}

void LoadConnection::StopSending() {
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void LoadConnection::Shutdown(Status why) {
  StopSending();
  if (conn_) conn_->Shutdown(std::move(why));
}

void LoadConnection::Finish() {
  StopSending();
  if (conn_) conn_->Shutdown(Status::Ok());  // unblocks a sender inside Send
  sender_.Join();
  if (conn_) conn_->Close();
  MutexLock lk(mu_);
  // What was never answered (a request the sender registered after the close too; with
  // sessions, what waited for a resend) is in doubt now: the run is over.
  for (Req& r : resend_) pending_.push_back(std::move(r));
  resend_.clear();
  for (Req& r : pending_) {
    if (r.doubted) continue;
    r.doubted = true;
    InDoubt(r);
  }
}

bool LoadConnection::Done() {
  MutexLock lk(mu_);
  return sender_done_ && pending_.empty() && resend_.empty();
}

bool LoadConnection::Idle() {
  MutexLock lk(mu_);
  return closed_ || lost_leader_ || (sender_exited_ && pending_.empty());
}

bool LoadConnection::Broken() {
  MutexLock lk(mu_);
  return broken_;
}

uint64_t LoadConnection::inflight() {
  MutexLock lk(mu_);
  return inflight_;
}

void LoadConnection::SendLoop() {
  proto::TxnRequestWriter w;
  storage::Txn txn;  // every txn is built in this one (no allocation per txn)
  uint64_t& next_id = next_id_;
  int64_t due_ns = NowNanos();  // --target-tps: when the next request is due
  for (;;) {
    uint32_t n = 0;
    uint64_t first = 0;
    {
      MutexUniqueLock lk(mu_);
      const uint64_t left = cfg_.quota - sent_.load(std::memory_order_relaxed);
      n = static_cast<uint32_t>(std::min<uint64_t>(cfg_.per_request, left));
      if (n == 0) {
        sender_done_ = true;
        const bool done = pending_.empty();
        lk.Unlock();
        if (done) signal_->Notify();
        return;
      }
      auto stopping = [&]() REQUIRES(mu_) { return stop_ || closed_ || lost_leader_ || signal_->stopping(); };
      if (cfg_.request_interval_ns > 0) {
        // Paced: wait until the request is due. A sender that fell behind (the window was full)
        // catches up for at most kMaxCatchUpNs' worth of requests, not with an unbounded burst.
        for (int64_t now = NowNanos(); now < due_ns && !stopping(); now = NowNanos()) {
          cv_.wait_for(lk.native(), std::chrono::nanoseconds(due_ns - now));
        }
        due_ns = std::max(due_ns, NowNanos() - kMaxCatchUpNs) + cfg_.request_interval_ns;
      }
      cv_.wait(lk.native(), [&]() REQUIRES(mu_) { return stopping() || inflight_ + n <= cfg_.outstanding; });
      if (stopping()) return;
      inflight_ += n;
      first = sent_.load(std::memory_order_relaxed);
    }
    w.Begin(next_id, cfg_.sessions ? session_ : 0);
    std::vector<uint16_t> writes(n);
    for (uint32_t i = 0; i < n; ++i) {
      gen_->NextInto(&txn);
      txn.seq = first + i + 1;  // (a session's seqs start at 1)
      uint16_t wo = 0;
      for (const storage::Op& op : txn.ops) {
        wo += op.kind == storage::OpKind::kUpdate || op.kind == storage::OpKind::kDepWrite ||
              op.kind == storage::OpKind::kDebit || op.kind == storage::OpKind::kCredit;
      }
      writes[i] = wo;
      w.Add(txn);
    }
    const std::string_view body = w.FinishView();
    {
      // Registered before it is sent, so the reader (which takes mu_) always finds it.
      MutexLock lk(mu_);
      pending_.push_back(Req{next_id, NowNanos(), first, n, std::move(writes), false,
                             cfg_.sessions ? std::string(body) : std::string(), {}});
    }
    sent_.store(first + n, std::memory_order_relaxed);
    ++next_id;
    if (!conn_->Send(proto::MsgType::kTxnRequest, body).ok()) return;  // on_close says why
  }
}

Status LoadConnection::OnFrame(uint8_t type, std::string_view body) {
  const int64_t now = NowNanos();
  switch (static_cast<proto::MsgType>(type)) {
    case proto::MsgType::kTxnReply:
      return OnReply(body, now);
    case proto::MsgType::kSessionOpened: {
      proto::SessionOpened so;
      if (!proto::DecodeSessionOpened(body, &so).ok()) return Violation("a malformed session-opened reply");
      MutexLock lk(mu_);
      if (!opening_ || so.request_id != kOpenRequestId) return Violation("a session-opened reply nobody asked for");
      opening_ = false;
      session_ = so.session;
      cv_.notify_all();
      return Status::Ok();
    }
    case proto::MsgType::kError: {
      proto::ErrorReply e;
      if (!proto::DecodeError(body, &e).ok()) return Violation("a malformed error reply");
      const std::string what = std::string("error reply to request ") + std::to_string(e.request_id) + ": " +
                               StatusCodeName(e.code) + ": " + e.message;
      if (e.request_id == kOpenRequestId) {
        MutexLock lk(mu_);
        if (!opening_) return Violation(what + " (no open-session request in flight)");
        opening_ = false;
        open_error_ = Status::Unavailable(address_ + ": opening a session: " + what);
        cv_.notify_all();
        return Status::Ok();
      }
      std::optional<Req> req = Take(e.request_id, /*front_only=*/false);
      if (!req) {
        // Unreadable, or for a request we do not have in flight: some request's txns may never be
        // answered, so the connection is out of step.
        return Violation(what + " (matches no request in flight)");
      }
      // Unavailable: the node refuses work (stopping, failed, deposed): following the leader,
      // its txns are in doubt and the connection moves; any other error fails the run.
      const bool lost = cfg_.follow_leader && e.code == StatusCode::kUnavailable;
      errors_->Note(Who() + ": " + what, /*is_error=*/!lost);
      if (lost && cfg_.sessions && req->count > 0) {
        {
          MutexLock lk(mu_);
          KeepForResend(std::move(*req));  // sent again to the next leader
        }
        FailRun(what);
        Released();
        return Status::Ok();
      }
      InDoubt(*req);
      counts_.failed.fetch_add(req->count, std::memory_order_relaxed);
      counts_.results.fetch_add(req->count, std::memory_order_relaxed);
      if (req->count == 0) EndProbe("", Status::Unavailable(address_ + ": " + what));
      if (lost) {
        FailRun(what);
      } else {
        signal_->StopAll();
        cv_.notify_all();
      }
      Released();
      return Status::Ok();
    }
    case proto::MsgType::kNotLeader: {
      proto::NotLeaderReply nl;
      if (!proto::DecodeNotLeader(body, &nl).ok()) return Violation("a malformed not-leader reply");
      if (nl.request_id == kOpenRequestId) {
        MutexLock lk(mu_);
        if (!opening_) return Violation("a not-leader reply to no open-session request");
        opening_ = false;
        open_error_ = Status::Unavailable(address_ + " is not the leader (it names " +
                                          (nl.leader_node.empty() ? std::string("no leader") : nl.leader_node) + ")");
        cv_.notify_all();
        return Status::Ok();
      }
      std::optional<Req> req = Take(nl.request_id, /*front_only=*/false);
      if (req && req->count == 0) {  // the probe
        EndProbe(nl.leader_address, nl.leader_address.empty()
                                        ? Status::Unavailable(address_ + " is not the leader and does not know who is")
                                        : Status::Ok());
        Released();
        return Status::Ok();
      }
      // Mid-run: the node no longer takes transactions: the request's txns were not run, and no
      // later one would be here (with follow_leader the main thread moves the connection).
      if (req && cfg_.sessions && cfg_.follow_leader) {
        MutexLock lk(mu_);
        KeepForResend(std::move(*req));  // not run here: sent to the next leader
      } else if (req) {
        InDoubt(*req);
        counts_.failed.fetch_add(req->count, std::memory_order_relaxed);
        counts_.results.fetch_add(req->count, std::memory_order_relaxed);
      }
      FailRun("not the leader any more");
      return Status::Unavailable(Who() + ": not the leader (any more): it names " +
                                 (nl.leader_node.empty() ? std::string("no leader")
                                                         : nl.leader_node + " at " + nl.leader_address));
    }
    default:
      return Violation("an unexpected message of type " + std::to_string(type));
  }
}

Status LoadConnection::OnReply(std::string_view body, int64_t now) {
  if (Status st = proto::DecodeTxnReply(body, &reply_); !st.ok()) return Violation(st.message());
  std::optional<Req> req = Take(reply_.request_id, /*front_only=*/true);
  if (!req) {
    return Violation("a reply to request " + std::to_string(reply_.request_id) +
                     ", which is not the oldest request in flight (replies must come in request order)");
  }
  if (req->count != reply_.results.size()) {
    return Violation("request " + std::to_string(req->id) + ": " + std::to_string(reply_.results.size()) +
                     " results for " + std::to_string(req->count) + " txns");
  }
  if (req->count == 0) EndProbe("", Status::Ok());
  const bool in_window = window_->In(now);
  const int64_t latency = now - req->send_ns;
  uint64_t committed = 0, aborted = 0, rejected = 0, failed = 0, acked = 0, writes = 0, doubt_writes = 0;
  uint64_t doubted = 0, results = 0;
  std::string failed_detail;
  std::vector<uint32_t> resend;  // sessions: `failed` positions, sent again to the next leader
  for (size_t i = 0; i < reply_.results.size(); ++i) {
    if (req->Answered(i)) continue;  // a resent request: answered before (the table says so again)
    const proto::TxnResult& r = reply_.results[i];
    const uint64_t w = i < req->writes.size() ? req->writes[i] : 0;
    if (r.code == ResultCode::kFailed && cfg_.sessions) {
      if (resend.empty()) {
        failed_detail = "failed: " + std::string(r.detail);
        errors_->Note(Who() + ": " + failed_detail + " (sent again to the next leader)", false);
      }
      resend.push_back(static_cast<uint32_t>(i));
      continue;
    }
    ++results;
    switch (r.code) {
      case ResultCode::kCommittedNoValues:
        counts_.no_values.fetch_add(1, std::memory_order_relaxed);
        [[fallthrough]];
      case ResultCode::kCommitted:
        ++committed;
        writes += w;
        if (in_window) latency_ns_.Record(latency);
        acked = std::max(acked, r.batch + 1);
        break;
      case ResultCode::kAbortedLogic:
      case ResultCode::kAbortedCascade:
        ++aborted;
        acked = std::max(acked, r.batch + 1);
        break;
      case ResultCode::kRejected:
        if (rejected++ == 0) errors_->Note(Who() + ": rejected: " + std::string(r.detail), false);
        break;
      case ResultCode::kExpired:
        // The session forgot it: it may or may not have run, and it never runs again.
        if (doubted++ == 0) errors_->Note(Who() + ": expired: " + std::string(r.detail), false);
        doubt_writes += w;
        break;
      case ResultCode::kFailed:
        if (failed++ == 0) {
          failed_detail = "failed: " + std::string(r.detail);
          errors_->Note(Who() + ": " + failed_detail, false);
        }
        ++doubted;
        doubt_writes += w;
        break;
    }
    if (cfg_.keep_records) {
      const bool values = r.code == ResultCode::kCommitted;
      records_.push_back(ClientTxnRecord{req->first_seq + i, r.batch, values ? ReadsHash(r.values) : 0, r.planner,
                                         r.index, static_cast<uint16_t>(cfg_.index), static_cast<uint8_t>(r.code)});
    }
  }
  constexpr auto kRelaxed = std::memory_order_relaxed;
  counts_.committed.fetch_add(committed, kRelaxed);
  counts_.aborted.fetch_add(aborted, kRelaxed);
  counts_.rejected.fetch_add(rejected, kRelaxed);
  counts_.failed.fetch_add(failed, kRelaxed);
  counts_.results.fetch_add(results, kRelaxed);
  counts_.write_ops_committed.fetch_add(writes, kRelaxed);
  counts_.in_doubt.fetch_add(doubted, kRelaxed);
  counts_.write_ops_in_doubt.fetch_add(doubt_writes, kRelaxed);
  if (acked > counts_.acked_batches.load(kRelaxed)) counts_.acked_batches.store(acked, kRelaxed);
  if (in_window) {
    counts_.w_committed.fetch_add(committed, kRelaxed);
    counts_.w_aborted.fetch_add(aborted, kRelaxed);
  }
  if (!resend.empty()) {
    // The leader answered these `failed` (deposed, or its replication failed): their outcome is
    // unknown, so the next leader is asked again; what is answered now is not counted twice.
    Req again = std::move(*req);
    again.answered.assign(again.count, true);
    for (uint32_t i : resend) again.answered[i] = false;
    {
      MutexLock lk(mu_);
      KeepForResend(std::move(again));
    }
    FailRun(failed_detail);
  } else if (failed > 0) {
    FailRun(failed_detail);
  }
  Released();
  return Status::Ok();
}

std::optional<LoadConnection::Req> LoadConnection::Take(uint64_t id, bool front_only) {
  MutexLock lk(mu_);
  auto it = front_only ? pending_.begin()
                       : std::find_if(pending_.begin(), pending_.end(), [&](const Req& r) { return r.id == id; });
  if (it == pending_.end() || it->id != id) return std::nullopt;
  Req r = *it;
  pending_.erase(it);
  inflight_ -= r.count;
  return r;
}

void LoadConnection::Released() {
  bool done = false;
  {
    MutexLock lk(mu_);
    done = sender_done_ && pending_.empty();
  }
  cv_.notify_all();
  if (done) signal_->Notify();
}

void LoadConnection::EndProbe(std::string redirect, Status error) {
  MutexLock lk(mu_);
  if (!probing_) return;
  probing_ = false;
  probe_redirect_ = std::move(redirect);
  probe_error_ = std::move(error);
}

void LoadConnection::FailRun(const std::string& why) {
  if (cfg_.follow_leader) {
    {
      MutexLock lk(mu_);
      if (!lost_leader_) lost_why_ = why;
      lost_leader_ = true;
    }
    cv_.notify_all();    // this sender stops at once
    signal_->Notify();   // the main thread finds the new leader
    return;
  }
  signal_->StopAll();  // the main thread stops every other connection's sender
  cv_.notify_all();    // this one's at once
}

void LoadConnection::Abandon(const std::string& why) {
  FailRun(why);
  if (conn_) conn_->Shutdown(Status::Unavailable(why));
}

bool LoadConnection::LostLeader(std::string* why) {
  MutexLock lk(mu_);
  if (why != nullptr) *why = lost_why_;
  return lost_leader_;
}

Status LoadConnection::Reconnect(const std::string& address) {
  // The old connection: its sender stops, its reader ends (OnClose puts what was in flight in
  // doubt, once).
  StopSending();
  if (conn_) conn_->Shutdown(Status::Ok());
  sender_.Join();
  if (conn_) conn_->Close();
  conn_.reset();
  std::deque<Req> again;
  {
    MutexLock lk(mu_);
    DoubtUnanswered();
    pending_.clear();
    inflight_ = 0;
    stop_ = closed_ = broken_ = lost_leader_ = sender_exited_ = false;
    lost_why_.clear();
    again.swap(resend_);
  }
  if (Status st = Connect(address); !st.ok()) {
    MutexLock lk(mu_);
    for (Req& r : again) resend_.push_back(std::move(r));  // for the next try
    lost_leader_ = true;
    lost_why_ = st.message();
    return st;
  }
  // Sessions: what the old leader left unanswered goes first, in its old order, with its old
  // request ids (all below the sender's next one) and seqs; the session table answers what ran.
  std::sort(again.begin(), again.end(), [](const Req& a, const Req& b) { return a.id < b.id; });
  for (size_t k = 0; k < again.size(); ++k) {
    Req& r = again[k];
    uint64_t unanswered = 0;
    for (uint32_t i = 0; i < r.count; ++i) unanswered += r.Answered(i) ? 0 : 1;
    const std::string body = r.body;
    {
      MutexLock lk(mu_);
      r.send_ns = NowNanos();
      inflight_ += r.count;
      pending_.push_back(std::move(r));
    }
    counts_.retried.fetch_add(unanswered, std::memory_order_relaxed);
    if (!conn_->Send(proto::MsgType::kTxnRequest, body).ok()) {
      // Broken again: OnClose keeps what was registered for the next leader; the rest too.
      MutexLock lk(mu_);
      for (size_t j = k + 1; j < again.size(); ++j) KeepForResend(std::move(again[j]));
      break;
    }
  }
  Start();
  return Status::Ok();
}

void LoadConnection::DoubtUnanswered() {
  if (cfg_.sessions) {
    // Kept, not in doubt: they go to the next leader (Finish counts what is left).
    for (Req& r : pending_) {
      if (r.count > 0) KeepForResend(std::move(r));
    }
    pending_.clear();
    inflight_ = 0;
    return;
  }
  for (Req& r : pending_) {
    if (r.doubted) continue;
    r.doubted = true;
    InDoubt(r);
  }
}

void LoadConnection::KeepForResend(Req r) {
  QR_CHECK(cfg_.sessions && !r.body.empty(), "a resend without a session");
  resend_.push_back(std::move(r));
}

void LoadConnection::InDoubt(const Req& r) {
  uint64_t w = 0, n = 0;
  for (uint32_t i = 0; i < r.count; ++i) {
    if (r.Answered(i)) continue;
    ++n;
    w += i < r.writes.size() ? r.writes[i] : 0;
  }
  counts_.in_doubt.fetch_add(n, std::memory_order_relaxed);
  counts_.write_ops_in_doubt.fetch_add(w, std::memory_order_relaxed);
}

void LoadConnection::OnClose(const Status& why) {
  bool broken = false, lost = false;
  {
    MutexLock lk(mu_);
    closed_ = true;
    const bool had_pending = !pending_.empty() || !resend_.empty();
    DoubtUnanswered();  // sent, never answered: executed or not (with sessions: sent again)
    // A close after the main thread stopped us with nothing in flight loses nothing.
    const bool clean_stop = stop_ && !had_pending;
    broken = !why.ok() && (had_pending || !sender_done_) && !clean_stop;
    // A connection lost (closed, reset) is a lost leader; a server that broke the protocol
    // (kCorruption: a frame this client cannot take) fails the run wherever it leads.
    if (broken && cfg_.follow_leader && why.code() != StatusCode::kCorruption) {
      // Not the end of the run: the main thread moves this connection to the new leader.
      if (!lost_leader_) lost_why_ = why.message();
      lost_leader_ = true;
      lost = true;
    } else {
      broken_ = broken;
    }
  }
  if (!why.ok()) {
    if (broken) {
      errors_->Note(why.message(), /*is_error=*/!lost);
    } else {
      Logger("client")->warn("{} (nothing was in flight)", why.message());
    }
  }
  cv_.notify_all();
  signal_->Notify();
}

}  // namespace qrstore::client
