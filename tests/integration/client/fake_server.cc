#include "tests/integration/client/fake_server.h"

#include <time.h>

#include <chrono>
#include <thread>

#include "common/bounded_queue.h"
#include "common/codec.h"
#include "storage/table.h"

namespace qrstore::testing {

namespace proto = cluster::proto;
using proto::MsgType;
using proto::ResultCode;

struct FakeServer::Conn {
  explicit Conn(uint32_t i, std::unique_ptr<net::StreamConn> s) : index(i), stream(std::move(s)) {}
  struct Frame {
    uint8_t type = 0;
    std::string body;
    uint64_t txns = 0;
  };
  const uint32_t index;
  std::unique_ptr<net::StreamConn> stream;
  BoundedQueue<Frame> frames{4096};
  std::atomic<uint64_t> unanswered{0};  // txns read, not yet answered
  NamedThread reader, writer;
};

FakeServer::FakeServer(FakeServerOptions options) : opt_(std::move(options)), loaded_(opt_.loaded) {}

FakeServer::~FakeServer() { Stop(); }

Status FakeServer::Start() {
  QR_RETURN_IF_ERROR(opt_.workload.Validate());
  ref_ = std::make_unique<workloads::ReferenceExecutor>(opt_.workload.Layout(), opt_.workload.RecordCount());
  QR_RETURN_IF_ERROR(workloads::LoadTable(opt_.workload, ref_->mutable_table()));
  net_ = net::MakeNngStreamNet();
  auto l = net_->Listen(opt_.address);
  if (!l.ok()) return l.status();
  listener_ = std::move(l).value();
  acceptor_ = NamedThread("fake-accept", [this] { AcceptLoop(); });
  return Status::Ok();
}

void FakeServer::Stop() {
  if (stop_.exchange(true)) return;
  if (listener_) listener_->Shutdown();
  acceptor_.Join();
  std::vector<std::unique_ptr<Conn>> conns;
  {
    std::lock_guard<std::mutex> lk(conns_mu_);
    conns.swap(conns_);
  }
  for (auto& c : conns) {
    c->stream->Shutdown();
    c->frames.Close();
  }
  for (auto& c : conns) {
    c->reader.Join();
    c->writer.Join();
  }
}

uint64_t FakeServer::txns_applied() const {
  std::lock_guard<std::mutex> lk(apply_mu_);
  return applied_;
}

uint64_t FakeServer::digest() const {
  std::lock_guard<std::mutex> lk(apply_mu_);
  return ref_->table().Digest();
}

void FakeServer::AcceptLoop() {
  uint32_t next = 0;
  while (!stop_.load()) {
    std::unique_ptr<net::StreamConn> s = listener_->Accept(100);
    if (!s) continue;
    connections_.fetch_add(1);
    if (opt_.faults.close_on_accept) {
      s->Shutdown();
      continue;
    }
    auto c = std::make_unique<Conn>(next++, std::move(s));
    Conn* raw = c.get();
    raw->reader = NamedThread("fake-rd-" + std::to_string(raw->index), [this, raw] { ReadLoop(raw); });
    raw->writer = NamedThread("fake-wr-" + std::to_string(raw->index), [this, raw] { WriteLoop(raw); });
    std::lock_guard<std::mutex> lk(conns_mu_);
    conns_.push_back(std::move(c));
  }
}

void FakeServer::ReadLoop(Conn* c) {
  for (;;) {
    char header[proto::kHeaderBytes];
    if (!c->stream->ReadFull(header, sizeof header)) break;
    proto::FrameHeader h;
    if (!proto::DecodeHeader(header, &h).ok() || h.body_bytes > (64u << 20)) break;
    Conn::Frame f;
    f.type = h.type;
    f.body.resize(h.body_bytes);
    if (h.body_bytes > 0 && !c->stream->ReadFull(f.body.data(), f.body.size())) break;
    if (h.type == static_cast<uint8_t>(MsgType::kTxnRequest) && f.body.size() >= 8 + 1) {
      // The session and the txn count follow the 8-byte id as varints; decoding the whole
      // request here would do the responder's work twice: the count is enough to track what is
      // in flight.
      Reader r(std::string_view(f.body).substr(8));
      uint64_t session = 0;
      if (r.GetVarint(&session) && r.GetVarint(&f.txns)) {
        const uint64_t now = c->unanswered.fetch_add(f.txns) + f.txns;
        uint64_t seen = max_inflight_.load();
        while (now > seen && !max_inflight_.compare_exchange_weak(seen, now)) {
        }
      }
    }
    if (!c->frames.Push(std::move(f))) break;
  }
  c->frames.Close();
}

void FakeServer::WriteLoop(Conn* c) {
  while (auto f = c->frames.Pop()) {
    if (opt_.reply_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(opt_.reply_delay_us));
    const std::string reply = Answer(c, f->type, f->body);
    c->unanswered.fetch_sub(f->txns);
    if (reply.empty()) continue;
    iovec iov{const_cast<char*>(reply.data()), reply.size()};
    if (!c->stream->WriteAll(&iov, 1)) break;
  }
}

std::string FakeServer::Answer(Conn*, uint8_t type, const std::string& body) {
  if (opt_.faults.silent) return "";
  if (type == static_cast<uint8_t>(MsgType::kStatusRequest)) {
    proto::StatusRequest req;
    if (!proto::DecodeStatusRequest(body, &req).ok()) return "";
    proto::NodeStatus s = Status_();
    s.request_id = req.request_id;
    return proto::Frame(MsgType::kStatusReply, proto::EncodeStatusReply(s));
  }
  if (type == static_cast<uint8_t>(MsgType::kOpenSession)) {
    proto::OpenSession req;
    if (!proto::DecodeOpenSession(body, &req).ok()) return "";
    if (opt_.follower) {
      return proto::Frame(MsgType::kNotLeader,
                          proto::EncodeNotLeader({req.request_id, opt_.leader_node, opt_.leader_address}));
    }
    return proto::Frame(MsgType::kSessionOpened, proto::EncodeSessionOpened({req.request_id, ++sessions_}));
  }
  if (type != static_cast<uint8_t>(MsgType::kTxnRequest)) {
    return proto::Frame(MsgType::kError, proto::EncodeError({0, StatusCode::kInvalidArgument, "fake: unexpected type"}));
  }
  proto::TxnRequest req;
  if (Status st = proto::DecodeTxnRequest(body, &req); !st.ok()) {
    return proto::Frame(MsgType::kError, proto::EncodeError({0, StatusCode::kInvalidArgument, st.message()}));
  }
  if (opt_.follower) {
    return proto::Frame(MsgType::kNotLeader,
                        proto::EncodeNotLeader({req.request_id, opt_.leader_node, opt_.leader_address}));
  }
  if (req.txns.empty()) return AnswerTxns(req);
  const int64_t k = static_cast<int64_t>(txn_requests_.fetch_add(1));
  const Faults& f = opt_.faults;
  if (f.swallow_from_request >= 0 && k >= f.swallow_from_request) return "";
  if (k == f.error_on_request) {
    return proto::Frame(MsgType::kError,
                        proto::EncodeError({req.request_id, StatusCode::kUnavailable, "fake: injected error"}));
  }
  if (k == f.unmatched_error_on_request) {
    return proto::Frame(MsgType::kError, proto::EncodeError({0, StatusCode::kInvalidArgument, "fake: unreadable"}));
  }
  if (k == f.not_leader_on_request) {
    return proto::Frame(MsgType::kNotLeader, proto::EncodeNotLeader({req.request_id, "n9", "127.0.0.1:9"}));
  }
  return AnswerTxns(req);
}

std::string FakeServer::AnswerTxns(const proto::TxnRequest& req) {
  const uint32_t record_bytes = opt_.workload.Layout().size();
  const uint64_t records = opt_.workload.RecordCount();
  proto::TxnReplyWriter w;
  uint64_t reads = 0;
  for (const storage::Txn& t : req.txns) reads += storage::ReadOps(t);
  w.Begin(req.request_id, record_bytes, static_cast<uint32_t>(req.txns.size()), reads);
  std::lock_guard<std::mutex> lk(apply_mu_);
  const uint64_t batch = req.txns.empty() ? 0 : batches_++;
  uint32_t index = 0;
  for (const storage::Txn& t : req.txns) {
    std::string bad;
    for (const storage::Op& op : t.ops) {
      if (static_cast<uint8_t>(op.kind) > storage::kMaxOpKind) bad = "unknown op kind";
      if (op.key >= records || (op.kind == storage::OpKind::kDepWrite && op.src_key >= records)) bad = "key out of range";
    }
    if (!bad.empty()) {
      w.AddRejected(ResultCode::kRejected, "fake: " + bad);
      continue;
    }
    reads_.clear();
    auto r = ref_->Apply(t, /*keep=*/true, &reads_);
    if (!r.ok()) {
      w.AddRejected(ResultCode::kFailed, "fake: " + r.status().message());
      continue;
    }
    const int64_t seq = static_cast<int64_t>(applied_++);
    bool committed = r.value();
    uint64_t pos_batch = batch, pos_index = index;
    if (seq == opt_.faults.duplicate_position_of_txn && seq > 0) {
      pos_batch = last_batch_;
      pos_index = last_index_;
    }
    last_batch_ = batch;
    last_index_ = index;
    ++index;
    if (seq == opt_.faults.flip_fate_of_txn) committed = !committed;
    if (!committed) {
      w.AddOutcome(ResultCode::kAbortedLogic, pos_batch, 0, static_cast<uint32_t>(pos_index), 0, {});
      continue;
    }
    if (!reads_.empty() && static_cast<int64_t>(committed_with_reads_++) == opt_.faults.corrupt_read_of_txn) {
      reads_[0] ^= 0x20;
    }
    w.AddOutcome(ResultCode::kCommitted, pos_batch, 0, static_cast<uint32_t>(pos_index),
                 static_cast<uint32_t>(reads_.size() / record_bytes), reads_);
  }
  return w.FinishFrame();
}

void FakeServer::SetLoaded(std::vector<std::pair<std::string, std::string>> loaded) {
  std::lock_guard<std::mutex> lk(apply_mu_);
  loaded_ = std::move(loaded);
}

proto::NodeStatus FakeServer::Status_() {
  proto::NodeStatus s;
  s.node = opt_.node;
  s.role = opt_.follower ? "follower" : "leader";
  s.state = "serving";
  s.backend = "fake";
  s.mode = "speculative";
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  s.cpu_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
  s.phases = proto::PhaseMeans{0.5, 0.25, 2, 1, 0.125, 0.75};
  std::lock_guard<std::mutex> lk(apply_mu_);
  s.loaded = loaded_;
  s.committed_batches = batches_;
  s.last_digest = ref_->table().Digest();
  s.committed_txns = ref_->committed();
  s.aborted_txns = ref_->aborted();
  // Time totals that grow with the batches (2 syncs of 0.75 ms each) and the txns (a reply per
  // txn, 0.25 ms from complete to written, 4 ms in the server): a client's window means are
  // exactly these.
  s.times.log_syncs = 2 * batches_;
  s.times.log_sync_ns = 1'500'000 * batches_;
  const uint64_t txns = ref_->committed() + ref_->aborted();
  s.times.replies = txns;
  s.times.reply_ns = 250'000 * txns;
  s.times.request_ns = 4'000'000 * txns;
  if (opt_.follower) return s;
  for (const auto& [name, state] : opt_.followers) {
    proto::FollowerView v;
    v.node = name;
    v.connected = true;
    v.applied_batches = state == FollowerState::kLags ? batches_ / 2 : batches_;
    v.lag_batches = batches_ - v.applied_batches;
    v.checked_batches = v.applied_batches;
    v.mismatches = state == FollowerState::kMismatch ? 1 : 0;
    v.agrees_at_last = state == FollowerState::kAgrees || batches_ == 0;
    s.digest_mismatches += v.mismatches;
    s.followers.push_back(v);
  }
  return s;
}

}  // namespace qrstore::testing
