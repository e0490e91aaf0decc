#include "cluster/port/client_service.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "common/clock.h"
#include "common/logging.h"

namespace qrstore::cluster {

namespace {

using proto::ResultCode;

constexpr uint8_t kEngine = 0xff;         // a position answered by an engine outcome
constexpr uint8_t kReady = 0xfe;          // answered ahead of its turn (Answer): in Pending::ready
constexpr size_t kMaxQueuedFrames = 1024; // reader-made frames (status, errors) queued per connection
constexpr uint64_t kMaxDiscardBytes = uint64_t{1} << 32;

uint32_t ConnId(uint32_t slot, uint16_t gen) { return slot | (uint32_t{gen} << 16); }

// Why a txn cannot run, or "" when it can.
std::string CheckTxn(const storage::Txn& t, uint64_t records) {
  for (size_t i = 0; i < t.ops.size(); ++i) {
    const storage::Op& op = t.ops[i];
    const auto kind = static_cast<uint8_t>(op.kind);
    if (kind > storage::kMaxOpKind) return "op " + std::to_string(i) + ": unknown op kind " + std::to_string(kind);
    if (op.key >= records) {
      return "op " + std::to_string(i) + ": key " + std::to_string(op.key) + " out of range [0, " +
             std::to_string(records) + ")";
    }
    if (op.kind == storage::OpKind::kDepWrite && op.src_key >= records) {
      return "op " + std::to_string(i) + ": source key " + std::to_string(op.src_key) + " out of range [0, " +
             std::to_string(records) + ")";
    }
  }
  return "";
}

}  // namespace

// One registered request: per position, who answers it (an engine outcome, or a rejected /
// failed result with a detail), and the reply built so far (positions [0, filled)).
struct ClientService::Pending {
  struct Ready {
    ResultCode code = ResultCode::kCommitted;
    commit::PlannedPos pos;
    uint32_t reads = 0;
    std::string values;
    std::string detail;
  };
  uint64_t seq = 0;  // per connection, to find it again
  uint64_t request_id = 0;
  int64_t read_ns = 0;  // a txn request's: when it was read (steady clock; the reply's timing)
  uint32_t total = 0;
  uint32_t filled = 0;
  bool open_session = false;                            // a kOpenSession (total 1)
  uint64_t opened = 0;                                  // its session id, once applied
  uint64_t session = 0;                                 // the request's session (0: none)
  std::vector<uint64_t> seqs;                           // with a session: per position (ascending)
  std::map<uint32_t, Ready> ready;                      // kReady positions' answers
  std::vector<uint8_t> code;                            // kEngine, kReady or a ResultCode
  std::vector<std::pair<uint32_t, std::string>> detail; // rejected positions (ascending) and why
  size_t next_detail = 0;
  std::string failure;                                  // detail of failed positions
  proto::TxnReplyWriter writer;
};

// A frame for the writer. A txn reply carries when it was read and completed (steady clock ns;
// both 0 for other frames), timed once written.
struct OutFrame {
  std::string bytes;
  int64_t read_ns = 0;
  int64_t done_ns = 0;
};

struct ClientService::Conn {
  uint32_t slot = 0;
  uint32_t id = 0;
  std::unique_ptr<net::StreamConn> stream;
  Mutex mu;
  std::condition_variable cv;
  std::deque<Pending> pending GUARDED_BY(mu);  // registered requests, oldest first
  uint64_t next_seq GUARDED_BY(mu) = 0;
  uint64_t inflight GUARDED_BY(mu) = 0;        // submitted txns without an outcome
  std::deque<OutFrame> out GUARDED_BY(mu);     // frames for the writer
  size_t reader_frames GUARDED_BY(mu) = 0;     // frames in `out` the reader made
  bool reader_done GUARDED_BY(mu) = false;
  bool writer_done GUARDED_BY(mu) = false;
  bool close_after_flush GUARDED_BY(mu) = false;
  bool stopping GUARDED_BY(mu) = false;        // the service is stopping
  size_t unsignaled GUARDED_BY(mu) = 0;        // frames OnOutcomes queued without waking the writer
  std::string report_node;                     // reader only: a follower's report connection
  std::vector<storage::Txn> submit_buffer;     // reader only: one request's txns for the engine
  std::vector<uint32_t> submit_positions;      // reader only: their positions in the request
  NamedThread reader;
  NamedThread writer;

  // Fills skipped positions at the head of `pending` and queues every completed request;
  // returns how many frames it queued. The caller wakes the writer.
  size_t Advance() REQUIRES(mu);
};

ClientService::ClientService(ClientServiceOptions options, ClientServiceHandler handler)
    : opt_(std::move(options)), handler_(std::move(handler)), net_(net::MakeNngStreamNet()) {
  slots_.resize(opt_.max_connections);
  generation_.assign(opt_.max_connections, 0);
}

ClientService::~ClientService() { Stop(0); }

Status ClientService::Start() {
  auto l = net_->Listen(opt_.listen_address);
  if (!l.ok()) return l.status();
  listener_ = std::move(l).value();
  acceptor_ = NamedThread("cli-accept", [this] { AcceptLoop(); });
  return Status::Ok();
}

void ClientService::AcceptLoop() {
  while (!stop_.load(std::memory_order_acquire)) {
    std::unique_ptr<net::StreamConn> s = listener_->Accept(200);
    Reap(false);
    if (!s) continue;
    std::shared_ptr<Conn> c;
    {
      MutexLock lk(mu_);
      for (uint32_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i]) continue;
        c = std::make_shared<Conn>();
        c->slot = i;
        c->id = ConnId(i, ++generation_[i]);
        slots_[i] = c;
        ++counters_.connections_accepted;
        break;
      }
      if (!c) ++counters_.connections_refused;
    }
    if (!c) {
      // Full: tell the client why, then close.
      const std::string frame = proto::Frame(
          proto::MsgType::kError,
          proto::EncodeError({0, StatusCode::kResourceExhausted,
                              opt_.node + ": too many connections (server.max_connections = " +
                                  std::to_string(opt_.max_connections) + ")"}));
      iovec iov{const_cast<char*>(frame.data()), frame.size()};
      (void)s->WriteAll(&iov, 1);
      continue;
    }
    c->stream = std::move(s);
    Conn* raw = c.get();
    c->writer = NamedThread("cli-wr-" + std::to_string(c->slot), [this, raw] { WriteLoop(raw); });
    c->reader = NamedThread("cli-rd-" + std::to_string(c->slot), [this, raw] { ReadLoop(raw); });
  }
}

void ClientService::Reap(bool all) {
  std::vector<std::shared_ptr<Conn>> done;
  {
    MutexLock lk(mu_);
    for (auto& c : slots_) {
      if (!c) continue;
      MutexLock ck(c->mu);
      if (all || (c->reader_done && c->writer_done)) {
        done.push_back(std::move(c));
        c = nullptr;
      }
    }
  }
  for (auto& c : done) {
    {
      MutexLock ck(c->mu);
      c->stopping = true;
    }
    c->cv.notify_all();
    if (c->stream) c->stream->Shutdown();
    c->reader.Join();
    c->writer.Join();
    if (!c->report_node.empty() && handler_.report_connection) handler_.report_connection(c->report_node, false);
  }
}

void ClientService::ReadLoop(Conn* c) {
  char header[proto::kHeaderBytes];
  std::string body;
  for (;;) {
    if (!c->stream->ReadFull(header, sizeof header)) break;
    proto::FrameHeader h;
    if (Status st = proto::DecodeHeader(header, &h); !st.ok()) {
      SendError(c, 0, st, /*then_close=*/true);
      break;
    }
    if (h.body_bytes > opt_.max_message_bytes) {
      // Read and drop the body (bounded memory), then say why; the connection lives on. Every
      // request body starts with its request id: the error carries it, so the client knows
      // which request failed.
      uint64_t left = h.body_bytes;
      char sink[64 << 10];
      bool ok = left <= kMaxDiscardBytes;
      uint64_t request_id = 0;
      if (ok && left >= 8) {
        ok = c->stream->ReadFull(sink, 8);
        std::memcpy(&request_id, sink, 8);
        left -= 8;
      }
      while (ok && left > 0) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, sizeof sink));
        ok = c->stream->ReadFull(sink, n);
        left -= n;
      }
      if (!ok) break;
      SendError(c, request_id,
                Status::InvalidArgument("message of " + std::to_string(h.body_bytes) +
                                        " bytes exceeds server.max_message_bytes (" +
                                        std::to_string(opt_.max_message_bytes) + ")"));
      continue;
    }
    body.resize(h.body_bytes);
    if (h.body_bytes > 0 && !c->stream->ReadFull(body.data(), body.size())) break;
    HandleFrame(c, h.type, body);
    MutexLock lk(c->mu);
    if (c->stopping || c->close_after_flush) break;
  }
  {
    MutexLock lk(c->mu);
    c->reader_done = true;
  }
  c->cv.notify_all();
}

void ClientService::HandleFrame(Conn* c, uint8_t type, std::string_view body) {
  using proto::MsgType;
  switch (static_cast<MsgType>(type)) {
    case MsgType::kTxnRequest:
      HandleTxnRequest(c, body);
      return;
    case MsgType::kOpenSession:
      HandleOpenSession(c, body);
      return;
    case MsgType::kStatusRequest: {
      proto::StatusRequest req;
      if (Status st = proto::DecodeStatusRequest(body, &req); !st.ok()) return SendError(c, 0, st);
      proto::NodeStatus s = handler_.status();
      s.request_id = req.request_id;
      Send(c, proto::Frame(MsgType::kStatusReply, proto::EncodeStatusReply(s)));
      return;
    }
    case MsgType::kCheckpointFetch: {
      proto::CheckpointFetch req;
      if (Status st = proto::DecodeCheckpointFetch(body, &req); !st.ok()) return SendError(c, 0, st);
      if (!handler_.checkpoint_fetch) {
        return SendError(c, req.request_id, Status::NotFound(opt_.node + " keeps no checkpoints"));
      }
      Result<std::string> chunk = handler_.checkpoint_fetch(req);
      if (!chunk.ok()) return SendError(c, req.request_id, chunk.status());
      Send(c, proto::Frame(MsgType::kCheckpointChunk, chunk.value()));
      return;
    }
    case MsgType::kFollowerReport: {
      proto::FollowerReport r;
      if (Status st = proto::DecodeFollowerReport(body, &r); !st.ok()) return SendError(c, 0, st);
      if (!handler_.report) return SendError(c, 0, Status::InvalidArgument(opt_.node + " is not a leader: report ignored"));
      if (c->report_node.empty()) {
        c->report_node = r.node;
        if (handler_.report_connection) handler_.report_connection(r.node, true);
      }
      if (Status st = handler_.report(r); !st.ok()) {
        SendError(c, 0, st);
      }
      return;
    }
    default:
      break;
  }
  SendError(c, 0,
            Status::InvalidArgument("unexpected message type " + std::to_string(type) +
                                    (type >= 1 && type <= proto::kMaxMsgType
                                         ? std::string(" (") + proto::MsgTypeName(static_cast<MsgType>(type)) + ")"
                                         : std::string(" (unknown)"))));
}

bool ClientService::SentNotLeader(Conn* c, uint64_t request_id) {
  proto::NotLeaderReply nl;
  if (handler_.submit && !(handler_.not_leader && handler_.not_leader(&nl))) return false;
  nl.request_id = request_id;
  Send(c, proto::Frame(proto::MsgType::kNotLeader, proto::EncodeNotLeader(nl)));
  return true;
}

Status ClientService::Refusal() {
  MutexLock lk(mu_);
  ++counters_.requests;
  if (failed_) return failure_;
  if (!admitting_) return refusal_;
  return Status::Ok();
}

void ClientService::HandleOpenSession(Conn* c, std::string_view body) {
  proto::OpenSession req;
  if (Status st = proto::DecodeOpenSession(body, &req); !st.ok()) return SendError(c, 0, st);
  if (!handler_.sessions) {
    return SendError(c, req.request_id,
                     Status::InvalidArgument("this node takes no client sessions (send txn requests without "
                                             "a session)"));
  }
  if (SentNotLeader(c, req.request_id)) return;
  if (Status refused = Refusal(); !refused.ok()) return SendError(c, req.request_id, refused);
  Pending p;
  p.request_id = req.request_id;
  p.total = 1;
  p.code.assign(1, kEngine);
  p.open_session = true;
  std::vector<storage::Txn> txns(1);
  txns[0].session = storage::kOpenSession;
  RegisterAndSubmit(c, std::move(p), 1, txns);
}

void ClientService::HandleTxnRequest(Conn* c, std::string_view body) {
  const int64_t read_ns = NowNanos();
  uint64_t id = 0;
  if (body.size() >= 8) std::memcpy(&id, body.data(), 8);  // the request id leads the body
  if (SentNotLeader(c, id)) return;
  proto::TxnRequest req;
  if (Status st = proto::DecodeTxnRequest(body, &req); !st.ok()) return SendError(c, id, st);
  if (Status refused = Refusal(); !refused.ok()) return SendError(c, req.request_id, refused);

  const uint32_t n = static_cast<uint32_t>(req.txns.size());
  Pending p;
  p.request_id = req.request_id;
  p.read_ns = read_ns;
  p.total = n;
  p.code.assign(n, kEngine);
  // A session this node cannot take: every txn is rejected (none runs without its session).
  std::string bad_session;
  if (req.session != 0) {
    if (!handler_.sessions) {
      bad_session = "this node takes no client sessions";
    } else if (req.session == storage::kOpenSession) {
      bad_session = "session " + std::to_string(req.session) + " is not a session id";
    } else {
      p.session = req.session;
      p.seqs.resize(n);
      for (uint32_t i = 0; i < n; ++i) p.seqs[i] = req.txns[i].seq;
    }
  }
  uint64_t engine_txns = 0;
  uint64_t reads = 0;  // what the reply will carry: one value per kRead of an accepted txn
  for (uint32_t i = 0; i < n; ++i) {
    std::string bad = bad_session.empty() ? CheckTxn(req.txns[i], opt_.records) : bad_session;
    if (bad.empty()) {
      ++engine_txns;
      reads += storage::ReadOps(req.txns[i]);
      continue;
    }
    p.code[i] = static_cast<uint8_t>(ResultCode::kRejected);
    p.detail.emplace_back(i, std::move(bad));
  }
  if (!p.detail.empty()) {
    MutexLock lk(mu_);
    counters_.rejected_txns += p.detail.size();
  }
  p.writer.Begin(req.request_id, opt_.record_bytes, n, reads);
  RegisterAndSubmit(c, std::move(p), engine_txns, req.txns);
}

void ClientService::RegisterAndSubmit(Conn* c, Pending p, uint64_t engine_txns, std::vector<storage::Txn>& txns) {
  const uint32_t n = p.total;
  const std::vector<uint8_t> codes = p.code;
  uint64_t seq = 0;
  {
    MutexUniqueLock lk(c->mu);
    // Back-pressure: read nothing more while this connection has too many txns unanswered.
    // Replies not yet written count too: a client that sends (even empty) requests and never
    // reads the answers is not read any more either.
    c->cv.wait(lk.native(), [&]() REQUIRES(c->mu) {
      return c->stopping || c->writer_done ||
             ((c->inflight == 0 || c->inflight + engine_txns <= opt_.max_inflight_txns) && c->out.size() < kMaxQueuedFrames);
    });
    if (c->stopping || c->writer_done) return;  // the client is gone: nothing to run for it
    seq = p.seq = ++c->next_seq;
    c->pending.push_back(std::move(p));
    c->inflight += engine_txns;
    if (c->Advance() > 0) c->cv.notify_all();
  }
  // Submit in order, outside every lock (the engine's queue may block: back-pressure).
  std::vector<storage::Txn>& batch = c->submit_buffer;
  std::vector<uint32_t>& positions = c->submit_positions;
  batch.clear();
  positions.clear();
  const int64_t now = NowNanos();
  for (uint32_t i = 0; i < n; ++i) {
    if (codes[i] != kEngine) continue;
    storage::Txn& t = txns[i];
    t.client = c->id;
    t.submit_ns = now;
    batch.push_back(std::move(t));
    positions.push_back(i);
  }
  const size_t taken = batch.empty() ? 0 : handler_.submit(batch);
  if (taken == batch.size()) return;
  // The engine takes no more (stopping or failed): the positions not taken fail now.
  Status reason;
  {
    MutexLock lk(mu_);
    reason = failed_ ? failure_ : (!refusal_.ok() ? refusal_ : Status::Unavailable("the engine stopped"));
    counters_.failed_txns += batch.size() - taken;
  }
  MutexLock lk(c->mu);
  for (Pending& q : c->pending) {
    if (q.seq != seq) continue;  // (gone if FailPending answered it already)
    q.failure = opt_.node + ": not run: " + reason.message();
    for (size_t k = taken; k < positions.size(); ++k) {
      if (q.code[positions[k]] != kEngine) continue;
      q.code[positions[k]] = static_cast<uint8_t>(ResultCode::kFailed);
      --c->inflight;
    }
  }
  if (c->Advance() > 0) c->cv.notify_all();
}

size_t ClientService::Conn::Advance() {
  // Invariant after every change under mu: the oldest request's next position is answered by
  // an engine outcome (or the deque is empty).
  size_t queued = 0;
  while (!pending.empty()) {
    Pending& p = pending.front();
    while (p.filled < p.total && p.code[p.filled] != kEngine) {
      if (p.code[p.filled] == kReady) {
        auto it = p.ready.find(p.filled);
        QR_CHECK(it != p.ready.end());
        const Pending::Ready& r = it->second;
        if (proto::HasDetail(r.code)) {
          p.writer.AddRejected(r.code, r.detail);
        } else {
          p.writer.AddOutcome(r.code, r.pos.batch, r.pos.planner, r.pos.index, r.reads, r.values);
        }
        p.ready.erase(it);
      } else if (p.code[p.filled] == static_cast<uint8_t>(ResultCode::kRejected)) {
        QR_CHECK(p.next_detail < p.detail.size() && p.detail[p.next_detail].first == p.filled);
        p.writer.AddRejected(ResultCode::kRejected, p.detail[p.next_detail++].second);
      } else if (!p.open_session) {
        p.writer.AddRejected(ResultCode::kFailed, p.failure);
      }
      ++p.filled;
    }
    if (p.filled < p.total) break;
    if (!p.open_session) {
      out.push_back(OutFrame{p.writer.FinishFrame(), p.read_ns, NowNanos()});
    } else if (p.opened != 0) {
      out.push_back(OutFrame{
          proto::Frame(proto::MsgType::kSessionOpened, proto::EncodeSessionOpened({p.request_id, p.opened}))});
    } else {  // failed: not run, or not acknowledged
      out.push_back(OutFrame{proto::Frame(
          proto::MsgType::kError, proto::EncodeError({p.request_id, StatusCode::kUnavailable, p.failure}))});
    }
    pending.pop_front();
    ++queued;
  }
  return queued;
}

void ClientService::OnOutcomes(const std::vector<commit::TxnOutcome>& outcomes,
                               const std::vector<std::pair<size_t, uint64_t>>& opened) {
  MutexLock lk(mu_);
  if (failed_) return;  // FailPending answered them already
  // The session id opened[] (in outcome order) gives outcome i (0: none); asked with i ascending.
  size_t next_open = 0;
  auto opened_id = [&](size_t i) -> uint64_t {
    while (next_open < opened.size() && opened[next_open].first < i) ++next_open;
    return next_open < opened.size() && opened[next_open].first == i ? opened[next_open].second : 0;
  };
  // A slice's replies wake each connection's writer every kWakeFrames frames and once at the
  // end, not once per request: a writer woken per request would mostly wait for c->mu, which
  // this thread holds (docs/benchmarks-log.md, "Wake-ups").
  std::vector<Conn*> to_wake;  // connections with unsignaled frames
  size_t oi = 0;
  while (oi < outcomes.size()) {
    const uint32_t client = outcomes[oi].client;
    const uint32_t slot = client & 0xffff;
    if (outcomes[oi].history || slot >= slots_.size() || !slots_[slot] || slots_[slot]->id != client) {
      // A retry's history read (the retry is answered by Answer: session_store.h), or a
      // connection closed since.
      ++oi;
      continue;
    }
    Conn* c = slots_[slot].get();
    // Outcomes of one connection usually come in runs: one lock per run.
    MutexLock ck(c->mu);
    for (; oi < outcomes.size() && (outcomes[oi].history || outcomes[oi].client == client); ++oi) {
      const commit::TxnOutcome& o = outcomes[oi];
      if (o.history) continue;  // (as above)
      // Advance keeps the oldest request's next position an engine one, so this is it.
      QR_CHECK(!c->pending.empty(), "an outcome for connection %u with nothing pending", o.client);
      Pending& q = c->pending.front();
      QR_CHECK(q.filled < q.total && q.code[q.filled] == kEngine);
      if (q.open_session) {
        q.opened = opened_id(oi);
        if (q.opened == 0) q.failure = opt_.node + ": the open-session entry got no session id";
      } else {
        q.writer.AddOutcome(proto::ResultCodeOf(o.status), o.pos.batch, o.pos.planner, o.pos.index, o.reads, o.values);
      }
      ++q.filled;
      --c->inflight;
      if (const size_t queued = c->Advance(); queued > 0) {
        if (c->unsignaled == 0) to_wake.push_back(c);
        c->unsignaled += queued;
        if (c->unsignaled >= kWakeFrames) {
          c->unsignaled = 0;
          c->cv.notify_all();
        }
      }
    }
  }
  for (Conn* w : to_wake) {  // still in slots_: mu_ is held, and only Reap removes them under it
    {
      MutexLock wk(w->mu);
      if (w->unsignaled == 0) continue;  // woken at kWakeFrames since
      w->unsignaled = 0;
    }
    w->cv.notify_all();
  }
}

void ClientService::AnswerOne(uint32_t client, uint64_t session, uint64_t seq, ResultCode code,
                              const commit::PlannedPos& pos, uint32_t reads, std::string_view values,
                              std::string_view detail) {
  MutexLock lk(mu_);
  if (failed_) return;  // FailPending answered it already
  const uint32_t slot = client & 0xffff;
  if (slot >= slots_.size() || !slots_[slot] || slots_[slot]->id != client) return;  // closed since
  Conn* c = slots_[slot].get();
  size_t queued = 0;
  {
    MutexLock ck(c->mu);
    for (Pending& q : c->pending) {
      if (q.session != session || q.seqs.empty() || seq < q.seqs.front() || seq > q.seqs.back()) continue;
      auto it = std::lower_bound(q.seqs.begin(), q.seqs.end(), seq);
      if (it == q.seqs.end() || *it != seq) continue;
      const auto i = static_cast<uint32_t>(it - q.seqs.begin());
      if (q.code[i] != kEngine) continue;  // (the same seq sent again in a later request)
      q.code[i] = kReady;
      Pending::Ready& r = q.ready[i];
      r.code = code;
      r.pos = pos;
      r.reads = proto::HasDetail(code) ? 0 : reads;
      r.values.assign(values.data(), proto::HasDetail(code) ? 0 : values.size());
      r.detail.assign(detail);
      --c->inflight;
      queued = c->Advance();
      break;
    }
  }
  if (queued > 0) c->cv.notify_all();
}

void ClientService::FailPending(Status reason) {
  std::vector<std::shared_ptr<Conn>> conns;
  {
    MutexLock lk(mu_);
    if (failed_) return;
    failed_ = true;
    failure_ = reason;
    for (auto& c : slots_) {
      if (c) conns.push_back(c);
    }
    for (auto& c : conns) {
      MutexLock ck(c->mu);
      for (Pending& p : c->pending) {
        p.failure = opt_.node + ": not acknowledged: " + reason.message();
        for (uint32_t j = p.filled; j < p.total; ++j) {
          if (p.code[j] == kEngine) {
            p.code[j] = static_cast<uint8_t>(ResultCode::kFailed);
            ++counters_.failed_txns;
          }
        }
      }
      c->inflight = 0;
      c->unsignaled = 0;
      c->Advance();
    }
  }
  for (auto& c : conns) c->cv.notify_all();
}

void ClientService::StopAdmitting(Status reason) {
  MutexLock lk(mu_);
  admitting_ = false;
  refusal_ = std::move(reason);
}

uint64_t ClientService::pending_txns() const {
  MutexLock lk(mu_);
  uint64_t n = 0;
  for (const auto& c : slots_) {
    if (!c) continue;
    MutexLock ck(c->mu);
    for (const Pending& p : c->pending) n += p.total - p.filled;
  }
  return n;
}

void ClientService::SendError(Conn* c, uint64_t request_id, const Status& s, bool then_close) {
  {
    MutexLock lk(mu_);
    ++counters_.error_replies;
  }
  std::string frame =
      proto::Frame(proto::MsgType::kError, proto::EncodeError({request_id, s.code() == StatusCode::kOk ? StatusCode::kInternal : s.code(),
                                                               opt_.node + ": " + s.message()}));
  MutexUniqueLock lk(c->mu);
  // A client that sends requests without reading the answers: stop reading it (bounded).
  c->cv.wait(lk.native(),
             [&]() REQUIRES(c->mu) { return c->stopping || c->writer_done || c->reader_frames < kMaxQueuedFrames; });
  c->out.push_back(OutFrame{std::move(frame)});
  ++c->reader_frames;
  if (then_close) c->close_after_flush = true;
  lk.Unlock();
  c->cv.notify_all();
}

void ClientService::Send(Conn* c, std::string frame) {
  MutexUniqueLock lk(c->mu);
  c->cv.wait(lk.native(),
             [&]() REQUIRES(c->mu) { return c->stopping || c->writer_done || c->reader_frames < kMaxQueuedFrames; });
  c->out.push_back(OutFrame{std::move(frame)});
  ++c->reader_frames;
  lk.Unlock();
  c->cv.notify_all();
}

void ClientService::WriteLoop(Conn* c) {
  std::vector<OutFrame> batch;
  std::vector<iovec> iov;
  for (;;) {
    {
      MutexUniqueLock lk(c->mu);
      c->cv.wait(lk.native(), [&]() REQUIRES(c->mu) {
        return !c->out.empty() || c->stopping || (c->reader_done && c->pending.empty()) || c->close_after_flush;
      });
      if (c->out.empty()) {
        if (c->stopping || c->close_after_flush || (c->reader_done && c->pending.empty())) break;
        continue;
      }
      for (size_t i = 0; i < 64 && !c->out.empty(); ++i) {
        batch.push_back(std::move(c->out.front()));
        c->out.pop_front();
      }
      c->reader_frames = c->reader_frames > batch.size() ? c->reader_frames - batch.size() : 0;
    }
    c->cv.notify_all();
    iov.clear();
    for (auto& f : batch) iov.push_back(iovec{f.bytes.data(), f.bytes.size()});
    const bool ok = c->stream->WriteAll(iov.data(), iov.size());
    if (ok) {
      const int64_t now = NowNanos();
      uint64_t replies = 0, reply_ns = 0, request_ns = 0;
      for (const OutFrame& f : batch) {
        if (f.done_ns == 0) continue;
        ++replies;
        reply_ns += static_cast<uint64_t>(std::max<int64_t>(0, now - f.done_ns));
        request_ns += static_cast<uint64_t>(std::max<int64_t>(0, now - f.read_ns));
      }
      if (replies > 0) {
        replies_.fetch_add(replies, std::memory_order_relaxed);
        reply_ns_.fetch_add(reply_ns, std::memory_order_relaxed);
        request_ns_.fetch_add(request_ns, std::memory_order_relaxed);
      }
    }
    batch.clear();
    if (!ok) break;
  }
  c->stream->Shutdown();  // wakes the reader too
  {
    MutexLock lk(c->mu);
    c->writer_done = true;
  }
  c->cv.notify_all();
}

void ClientService::Stop(int64_t flush_timeout_ms) {
  if (stop_.exchange(true)) return;
  if (listener_) listener_->Shutdown();
  acceptor_.Join();
  // Let pending replies drain (bounded), then close everything.
  const int64_t deadline = NowNanos() + flush_timeout_ms * 1'000'000;
  while (NowNanos() < deadline) {
    bool busy = false;
    {
      MutexLock lk(mu_);
      for (const auto& c : slots_) {
        if (!c) continue;
        MutexLock ck(c->mu);
        busy |= !c->pending.empty() || (!c->out.empty() && !c->writer_done);
      }
    }
    if (!busy) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Reap(true);
}

ClientServiceCounters ClientService::counters() const {
  MutexLock lk(mu_);
  ClientServiceCounters out = counters_;
  out.replies = replies_.load(std::memory_order_relaxed);
  out.reply_ns = reply_ns_.load(std::memory_order_relaxed);
  out.request_ns = request_ns_.load(std::memory_order_relaxed);
  return out;
}

}  // namespace qrstore::cluster
