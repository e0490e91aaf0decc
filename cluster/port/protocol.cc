#include "cluster/port/protocol.h"

#include <algorithm>
#include <cstring>

#include "common/codec.h"
#include "common/hash.h"

namespace qrstore::cluster::proto {

namespace {

constexpr char kMagic0 = 'Q';
constexpr char kMagic1 = 'R';
// Smallest encodings, for Reader::GetCount's guard against corrupt counts.
constexpr size_t kMinOpBytes = 4;     // kind + three one-byte varints
constexpr size_t kMinTxnBytes = 8 + 1;
constexpr size_t kMinResultBytes = 2;  // a rejected result with an empty detail
constexpr size_t kMinFollowerBytes = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1;
constexpr size_t kMinDigestBytes = 1 + 8;

Status Bad(const char* what, const std::string& detail) {
  return Status::Corruption(std::string(what) + ": " + detail);
}

size_t VarintBytes(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// A varint in its shortest form (so that every accepted body re-encodes to the same bytes).
bool GetVarint(Reader& r, uint64_t* v) {
  const size_t before = r.remaining();
  if (!r.GetVarint(v)) return false;
  return before - r.remaining() == VarintBytes(*v);
}
bool GetVarint32(Reader& r, uint32_t* v) {
  uint64_t x = 0;
  if (!GetVarint(r, &x) || x > UINT32_MAX) return false;
  *v = static_cast<uint32_t>(x);
  return true;
}
bool GetBool(Reader& r, bool* v) {
  uint8_t b = 0;
  if (!r.GetU8(&b) || b > 1) return false;
  *v = b != 0;
  return true;
}
void PutString(Writer& w, std::string_view s) { w.PutBytes(s.substr(0, kMaxStringBytes)); }
bool GetString(Reader& r, std::string_view* s) {
  uint64_t n = 0;
  if (!GetVarint(r, &n) || n > kMaxStringBytes) return false;
  return r.GetRaw(n, s);
}
bool GetString(Reader& r, std::string* s) {
  std::string_view v;
  if (!GetString(r, &v)) return false;
  s->assign(v);
  return true;
}

// A LEB128 varint appended to `out` (bodies built in place, no temporaries).
inline void AppendVarint(std::string& out, uint64_t v) {
  char buf[Writer::kMaxVarintBytes];
  out.append(buf, static_cast<size_t>(Writer::EncodeVarint(buf, v) - buf));
}

void PutTxn(Writer& w, const storage::Txn& t) {
  w.PutU64(t.id);
  w.PutVarint(t.ops.size());
  for (const storage::Op& op : t.ops) {
    w.PutU8(static_cast<uint8_t>(op.kind));
    w.PutVarint(op.key);
    w.PutVarint(op.src_key);
    w.PutVarint(op.arg);
  }
}

}  // namespace

const char* MsgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kTxnRequest: return "txn-request";
    case MsgType::kTxnReply: return "txn-reply";
    case MsgType::kError: return "error";
    case MsgType::kNotLeader: return "not-leader";
    case MsgType::kStatusRequest: return "status-request";
    case MsgType::kStatusReply: return "status-reply";
    case MsgType::kFollowerReport: return "follower-report";
    case MsgType::kOpenSession: return "open-session";
    case MsgType::kSessionOpened: return "session-opened";
    case MsgType::kCheckpointFetch: return "checkpoint-fetch";
    case MsgType::kCheckpointChunk: return "checkpoint-chunk";
  }
  return "?";
}

const char* ResultCodeName(ResultCode c) {
  switch (c) {
    case ResultCode::kCommitted: return "committed";
    case ResultCode::kAbortedLogic: return "aborted-logic";
    case ResultCode::kAbortedCascade: return "aborted-cascade";
    case ResultCode::kRejected: return "rejected";
    case ResultCode::kFailed: return "failed";
    case ResultCode::kCommittedNoValues: return "committed-no-values";
    case ResultCode::kExpired: return "expired";
  }
  return "?";
}

void EncodeHeader(MsgType type, uint32_t body_bytes, char out[kHeaderBytes]) {
  out[0] = kMagic0;
  out[1] = kMagic1;
  out[2] = static_cast<char>(kVersion);
  out[3] = static_cast<char>(type);
  std::memcpy(out + 4, &body_bytes, 4);  // little-endian hosts only (common/codec.h)
}

Status DecodeHeader(const char in[kHeaderBytes], FrameHeader* out) {
  if (in[0] != kMagic0 || in[1] != kMagic1) return Status::Corruption("frame: bad magic (not a qrstore client stream)");
  out->version = static_cast<uint8_t>(in[2]);
  if (out->version != kVersion) {
    return Status::Corruption("frame: protocol version " + std::to_string(out->version) + " (this side speaks " +
                              std::to_string(kVersion) + ")");
  }
  out->type = static_cast<uint8_t>(in[3]);
  std::memcpy(&out->body_bytes, in + 4, 4);
  return Status::Ok();
}

std::string Frame(MsgType type, std::string_view body) {
  std::string out(kHeaderBytes, '\0');
  EncodeHeader(type, static_cast<uint32_t>(body.size()), out.data());
  out.append(body);
  return out;
}

// --- kTxnRequest -------------------------------------------------------------------------

void TxnRequestWriter::Begin(uint64_t request_id, uint64_t session) {
  request_id_ = request_id;
  session_ = session;
  prev_seq_ = 0;
  count_ = 0;
  buf_.assign(kRoom, '\0');
}

void TxnRequestWriter::Add(const storage::Txn& txn) {
  // PutTxn's layout, appended in place; with a session, the seq delta first.
  if (session_ != 0) {
    QR_CHECK(txn.seq > prev_seq_, "TxnRequestWriter: seq %llu after %llu (seqs must increase)",
             static_cast<unsigned long long>(txn.seq), static_cast<unsigned long long>(prev_seq_));
    AppendVarint(buf_, txn.seq - prev_seq_);
    prev_seq_ = txn.seq;
  }
  char id[8];
  std::memcpy(id, &txn.id, 8);
  buf_.append(id, 8);
  AppendVarint(buf_, txn.ops.size());
  for (const storage::Op& op : txn.ops) {
    buf_.push_back(static_cast<char>(op.kind));
    AppendVarint(buf_, op.key);
    AppendVarint(buf_, op.src_key);
    AppendVarint(buf_, op.arg);
  }
  ++count_;
}

std::string_view TxnRequestWriter::FinishView() {
  if (buf_.size() < kRoom) buf_.assign(kRoom, '\0');  // Finish without Begin: an empty request
  // The id, session and count go right before the txns, so the body is one contiguous view.
  char head[2 * Writer::kMaxVarintBytes];
  char* p = Writer::EncodeVarint(head, session_);
  p = Writer::EncodeVarint(p, count_);
  const size_t n = static_cast<size_t>(p - head);
  const size_t start = kRoom - 8 - n;
  std::memcpy(buf_.data() + start, &request_id_, 8);
  std::memcpy(buf_.data() + start + 8, head, n);
  return std::string_view(buf_).substr(start);
}

std::string EncodeTxnRequest(const TxnRequest& req) {
  size_t ops = 0;
  for (const auto& t : req.txns) ops += t.ops.size();
  Writer w(16 + req.txns.size() * 10 + ops * 8);
  w.PutU64(req.request_id);
  w.PutVarint(req.session);
  w.PutVarint(req.txns.size());
  uint64_t prev = 0;
  for (const auto& t : req.txns) {
    if (req.session != 0) {
      w.PutVarint(t.seq - prev);
      prev = t.seq;
    }
    PutTxn(w, t);
  }
  return w.Release();
}

Status DecodeTxnRequest(std::string_view body, TxnRequest* out) {
  constexpr const char* kWhat = "txn request";
  Reader r(body);
  uint64_t n = 0;
  if (!r.GetU64(&out->request_id)) return Bad(kWhat, "truncated request id");
  if (!GetVarint(r, &out->session)) return Bad(kWhat, "bad session");
  if (!GetVarint(r, &n) || !r.ok()) return Bad(kWhat, "bad txn count");
  if (n > r.remaining() / kMinTxnBytes) return Bad(kWhat, "txn count " + std::to_string(n) + " exceeds the body");
  out->txns.resize(n);
  uint64_t seq = 0;
  for (uint64_t i = 0; i < n; ++i) {
    storage::Txn& t = out->txns[i];
    t.client = 0;
    t.submit_ns = 0;
    t.session = out->session;
    t.seq = 0;
    if (out->session != 0) {
      uint64_t delta = 0;
      if (!GetVarint(r, &delta) || delta == 0 || delta > UINT64_MAX - seq) {
        return Bad(kWhat, "txn " + std::to_string(i) + ": bad seq (seqs must increase within a request)");
      }
      t.seq = seq += delta;
    }
    uint64_t nops = 0;
    if (!r.GetU64(&t.id) || !GetVarint(r, &nops)) return Bad(kWhat, "txn " + std::to_string(i) + ": truncated");
    if (nops > kMaxOpsPerTxn) {
      return Bad(kWhat, "txn " + std::to_string(i) + ": " + std::to_string(nops) + " ops (at most " +
                            std::to_string(kMaxOpsPerTxn) + ")");
    }
    if (nops > r.remaining() / kMinOpBytes) return Bad(kWhat, "txn " + std::to_string(i) + ": op count exceeds the body");
    t.ops.resize(nops);
    for (storage::Op& op : t.ops) {
      uint8_t kind = 0;
      if (!r.GetU8(&kind) || !GetVarint(r, &op.key) || !GetVarint(r, &op.src_key) || !GetVarint(r, &op.arg)) {
        return Bad(kWhat, "txn " + std::to_string(i) + ": truncated or non-canonical op");
      }
      op.kind = static_cast<storage::OpKind>(kind);
    }
  }
  if (!r.done()) return Bad(kWhat, std::to_string(r.remaining()) + " trailing bytes");
  return Status::Ok();
}

// --- kTxnReply ---------------------------------------------------------------------------

void TxnReplyWriter::Begin(uint64_t request_id, uint32_t record_bytes, uint32_t count, uint64_t reads) {
  body_.assign(kHeaderBytes, '\0');
  // Committed results: a status, four varints and the values. Reserved within reason (the counts
  // may come from a decoded message: a fuzzer made this reserve terabytes once).
  const uint64_t want = kHeaderBytes + 24 + uint64_t{count} * 16 + std::min<uint64_t>(reads, 1u << 26) * record_bytes;
  body_.reserve(std::min<uint64_t>(want, 4u << 20));
  body_.append(reinterpret_cast<const char*>(&request_id), 8);
  AppendVarint(body_, record_bytes);
  AppendVarint(body_, count);
  expected_ = count;
  added_ = 0;
  record_bytes_ = record_bytes;
}

void TxnReplyWriter::AddOutcome(ResultCode code, uint64_t batch, uint32_t planner, uint32_t index, uint32_t reads,
                                std::string_view values) {
  QR_CHECK(!HasDetail(code), "AddOutcome with a detail code");
  QR_CHECK_EQ(values.size(), uint64_t{reads} * record_bytes_);
  QR_CHECK_LT(added_, expected_);
  body_.push_back(static_cast<char>(code));
  AppendVarint(body_, batch);
  AppendVarint(body_, planner);
  AppendVarint(body_, index);
  AppendVarint(body_, reads);
  body_.append(values.data(), values.size());
  ++added_;
}

void TxnReplyWriter::AddRejected(ResultCode code, std::string_view detail) {
  QR_CHECK(HasDetail(code), "AddRejected with an outcome code");
  QR_CHECK_LT(added_, expected_);
  Writer w(8 + detail.size());
  w.PutU8(static_cast<uint8_t>(code));
  PutString(w, detail);
  body_.append(w.data());
  ++added_;
}

std::string TxnReplyWriter::Finish() {
  QR_CHECK_EQ(added_, expected_);
  std::string body = body_.substr(kHeaderBytes);
  body_.clear();
  return body;
}

std::string TxnReplyWriter::FinishFrame() {
  QR_CHECK_EQ(added_, expected_);
  EncodeHeader(MsgType::kTxnReply, static_cast<uint32_t>(body_.size() - kHeaderBytes), body_.data());
  return std::move(body_);
}

std::string EncodeTxnReply(const TxnReply& reply) {
  TxnReplyWriter w;
  uint64_t reads = 0;
  for (const TxnResult& r : reply.results) reads += r.reads;
  w.Begin(reply.request_id, reply.record_bytes, static_cast<uint32_t>(reply.results.size()), reads);
  for (const TxnResult& r : reply.results) {
    if (HasDetail(r.code)) {
      w.AddRejected(r.code, r.detail);
    } else {
      w.AddOutcome(r.code, r.batch, r.planner, r.index, r.reads, r.values);
    }
  }
  return w.Finish();
}

Status DecodeTxnReply(std::string_view body, TxnReply* out) {
  constexpr const char* kWhat = "txn reply";
  Reader r(body);
  uint64_t n = 0;
  if (!r.GetU64(&out->request_id) || !GetVarint32(r, &out->record_bytes) || !GetVarint(r, &n)) {
    return Bad(kWhat, "truncated or non-canonical header");
  }
  if (n > r.remaining() / kMinResultBytes) return Bad(kWhat, "result count " + std::to_string(n) + " exceeds the body");
  out->results.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    TxnResult& t = out->results[i];
    uint8_t code = 0;
    if (!r.GetU8(&code) || code > kMaxResultCode) return Bad(kWhat, "result " + std::to_string(i) + ": bad code");
    t = TxnResult{};
    t.code = static_cast<ResultCode>(code);
    if (HasDetail(t.code)) {
      if (!GetString(r, &t.detail)) return Bad(kWhat, "result " + std::to_string(i) + ": bad detail");
      continue;
    }
    if (!GetVarint(r, &t.batch) || !GetVarint32(r, &t.planner) || !GetVarint32(r, &t.index) ||
        !GetVarint32(r, &t.reads)) {
      return Bad(kWhat, "result " + std::to_string(i) + ": truncated or non-canonical");
    }
    const uint64_t bytes = uint64_t{t.reads} * out->record_bytes;
    if (bytes > r.remaining() || !r.GetRaw(bytes, &t.values)) {
      return Bad(kWhat, "result " + std::to_string(i) + ": read values exceed the body");
    }
  }
  if (!r.done()) return Bad(kWhat, std::to_string(r.remaining()) + " trailing bytes");
  return Status::Ok();
}

// --- kError, kNotLeader ------------------------------------------------------------------

std::string EncodeError(const ErrorReply& e) {
  Writer w(16 + e.message.size());
  w.PutU64(e.request_id);
  w.PutU8(static_cast<uint8_t>(e.code));
  PutString(w, e.message);
  return w.Release();
}

Status DecodeError(std::string_view body, ErrorReply* out) {
  Reader r(body);
  uint8_t code = 0;
  if (!r.GetU64(&out->request_id) || !r.GetU8(&code) || !GetString(r, &out->message)) {
    return Bad("error reply", "truncated or non-canonical");
  }
  if (code == 0 || code > static_cast<uint8_t>(StatusCode::kInternal)) return Bad("error reply", "bad status code");
  out->code = static_cast<StatusCode>(code);
  if (!r.done()) return Bad("error reply", "trailing bytes");
  return Status::Ok();
}

std::string EncodeNotLeader(const NotLeaderReply& n) {
  Writer w(16 + n.leader_node.size() + n.leader_address.size());
  w.PutU64(n.request_id);
  PutString(w, n.leader_node);
  PutString(w, n.leader_address);
  return w.Release();
}

Status DecodeNotLeader(std::string_view body, NotLeaderReply* out) {
  Reader r(body);
  if (!r.GetU64(&out->request_id) || !GetString(r, &out->leader_node) || !GetString(r, &out->leader_address)) {
    return Bad("not-leader reply", "truncated or non-canonical");
  }
  if (!r.done()) return Bad("not-leader reply", "trailing bytes");
  return Status::Ok();
}

// --- kOpenSession / kSessionOpened --------------------------------------------------------

std::string EncodeOpenSession(const OpenSession& s) {
  Writer w(8);
  w.PutU64(s.request_id);
  return w.Release();
}

Status DecodeOpenSession(std::string_view body, OpenSession* out) {
  Reader r(body);
  if (!r.GetU64(&out->request_id) || !r.done()) return Bad("open-session request", "expected exactly a request id");
  return Status::Ok();
}

std::string EncodeSessionOpened(const SessionOpened& s) {
  Writer w(20);
  w.PutU64(s.request_id);
  w.PutVarint(s.session);
  return w.Release();
}

Status DecodeSessionOpened(std::string_view body, SessionOpened* out) {
  Reader r(body);
  if (!r.GetU64(&out->request_id) || !GetVarint(r, &out->session)) return Bad("session-opened reply", "truncated");
  if (out->session == 0) return Bad("session-opened reply", "session 0");
  if (!r.done()) return Bad("session-opened reply", "trailing bytes");
  return Status::Ok();
}

// --- kStatusRequest / kStatusReply ------------------------------------------------------

std::string EncodeStatusRequest(const StatusRequest& s) {
  Writer w(8);
  w.PutU64(s.request_id);
  return w.Release();
}

Status DecodeStatusRequest(std::string_view body, StatusRequest* out) {
  Reader r(body);
  if (!r.GetU64(&out->request_id) || !r.done()) return Bad("status request", "expected exactly a request id");
  return Status::Ok();
}

std::string EncodeStatusReply(const NodeStatus& s) {
  Writer w(256 + s.followers.size() * 64);
  w.PutU64(s.request_id);
  PutString(w, s.node);
  PutString(w, s.role);
  PutString(w, s.state);
  PutString(w, s.error);
  PutString(w, s.backend);
  PutString(w, s.mode);
  w.PutVarint(s.partition);
  w.PutVarint(s.row);
  w.PutVarint(s.committed_batches);
  w.PutU64(s.last_digest);
  w.PutVarint(s.committed_txns);
  w.PutVarint(s.aborted_txns);
  w.PutVarint(s.rejected_txns);
  w.PutVarint(s.failed_txns);
  w.PutVarint(s.cpu_ns);
  w.PutVarint(s.digest_mismatches);
  w.PutDouble(s.phases.plan_ms);
  w.PutDouble(s.phases.deliver_ms);
  w.PutDouble(s.phases.exec_ms);
  w.PutDouble(s.phases.repl_ms);
  w.PutDouble(s.phases.repl_wait_ms);
  w.PutDouble(s.phases.commit_ms);
  w.PutDouble(s.phases.cut_ms);
  w.PutVarint(s.followers.size());
  for (const FollowerView& f : s.followers) {
    PutString(w, f.node);
    w.PutU8(f.connected ? 1 : 0);
    w.PutVarint(f.applied_batches);
    w.PutVarint(f.lag_batches);
    w.PutVarint(f.checked_batches);
    w.PutVarint(f.mismatches);
    w.PutU8(f.agrees_at_last ? 1 : 0);
    w.PutU8(f.stranded ? 1 : 0);
    PutString(w, f.note);
  }
  w.PutVarint(s.loaded.size());
  for (const auto& [key, value] : s.loaded) {
    PutString(w, key);
    PutString(w, value);
  }
  {
    PutString(w, s.leader);
    w.PutVarint(s.term);
  }
  w.PutVarint(s.sessions);
  w.PutVarint(s.session_outcomes);
  w.PutU8(s.has_checkpoint ? 1 : 0);
  w.PutVarint(s.checkpoint_batch);
  w.PutVarint(s.checkpoint_age_s);
  w.PutVarint(s.rejoins);
  w.PutVarint(s.times.log_syncs);
  w.PutVarint(s.times.log_sync_ns);
  w.PutVarint(s.times.replies);
  w.PutVarint(s.times.reply_ns);
  w.PutVarint(s.times.request_ns);
  PutString(w, s.point);
  w.PutVarint(s.replicated_bytes);
  return w.Release();
}

Status DecodeStatusReply(std::string_view body, NodeStatus* out) {
  Reader r(body);
  bool ok = r.GetU64(&out->request_id) && GetString(r, &out->node) && GetString(r, &out->role) &&
            GetString(r, &out->state) && GetString(r, &out->error) && GetString(r, &out->backend) &&
            GetString(r, &out->mode) && GetVarint32(r, &out->partition) && GetVarint32(r, &out->row) &&
            GetVarint(r, &out->committed_batches) && r.GetU64(&out->last_digest) &&
            GetVarint(r, &out->committed_txns) && GetVarint(r, &out->aborted_txns) &&
            GetVarint(r, &out->rejected_txns) && GetVarint(r, &out->failed_txns) && GetVarint(r, &out->cpu_ns) &&
            GetVarint(r, &out->digest_mismatches) && r.GetDouble(&out->phases.plan_ms) &&
            r.GetDouble(&out->phases.deliver_ms) && r.GetDouble(&out->phases.exec_ms) &&
            r.GetDouble(&out->phases.repl_ms) && r.GetDouble(&out->phases.repl_wait_ms) &&
            r.GetDouble(&out->phases.commit_ms) && r.GetDouble(&out->phases.cut_ms);
  uint64_t n = 0;
  if (!ok || !GetVarint(r, &n)) return Bad("status reply", "truncated or non-canonical");
  if (n > r.remaining() / kMinFollowerBytes) return Bad("status reply", "follower count exceeds the body");
  out->followers.resize(n);
  for (FollowerView& f : out->followers) {
    if (!GetString(r, &f.node) || !GetBool(r, &f.connected) || !GetVarint(r, &f.applied_batches) ||
        !GetVarint(r, &f.lag_batches) || !GetVarint(r, &f.checked_batches) || !GetVarint(r, &f.mismatches) ||
        !GetBool(r, &f.agrees_at_last) || !GetBool(r, &f.stranded) || !GetString(r, &f.note)) {
      return Bad("status reply", "truncated or non-canonical follower");
    }
  }
  uint64_t k = 0;
  if (!GetVarint(r, &k)) return Bad("status reply", "truncated loaded-key count");
  if (k > r.remaining() / 2) return Bad("status reply", "loaded-key count exceeds the body");
  out->loaded.resize(k);
  for (auto& [key, value] : out->loaded) {
    if (!GetString(r, &key) || !GetString(r, &value)) return Bad("status reply", "truncated or non-canonical loaded key");
  }
  if (!GetString(r, &out->leader) || !GetVarint(r, &out->term)) return Bad("status reply", "truncated leader");
  if (!GetVarint(r, &out->sessions) || !GetVarint(r, &out->session_outcomes)) {
    return Bad("status reply", "truncated session counts");
  }
  if (!GetBool(r, &out->has_checkpoint) || !GetVarint(r, &out->checkpoint_batch) ||
      !GetVarint(r, &out->checkpoint_age_s)) {
    return Bad("status reply", "truncated checkpoint");
  }
  if (!GetVarint(r, &out->rejoins)) return Bad("status reply", "truncated rejoin count");
  if (!GetVarint(r, &out->times.log_syncs) || !GetVarint(r, &out->times.log_sync_ns) ||
      !GetVarint(r, &out->times.replies) || !GetVarint(r, &out->times.reply_ns) ||
      !GetVarint(r, &out->times.request_ns)) {
    return Bad("status reply", "truncated time totals");
  }
  if (!GetString(r, &out->point) || !GetVarint(r, &out->replicated_bytes)) {
    return Bad("status reply", "truncated replication point or bytes");
  }
  if (!r.done()) return Bad("status reply", "trailing bytes");
  return Status::Ok();
}

// --- kFollowerReport ---------------------------------------------------------------------

std::string EncodeFollowerReport(const FollowerReport& f) {
  Writer w(32 + f.digests.size() * 12);
  PutString(w, f.node);
  w.PutVarint(f.applied_batches);
  w.PutU8(f.ended ? 1 : 0);
  w.PutVarint(f.digests.size());
  for (const BatchDigest& d : f.digests) {
    w.PutVarint(d.batch);
    w.PutU64(d.digest);
  }
  return w.Release();
}

Status DecodeFollowerReport(std::string_view body, FollowerReport* out) {
  Reader r(body);
  uint64_t n = 0;
  if (!GetString(r, &out->node) || !GetVarint(r, &out->applied_batches) || !GetBool(r, &out->ended) ||
      !GetVarint(r, &n)) {
    return Bad("follower report", "truncated or non-canonical");
  }
  if (n > r.remaining() / kMinDigestBytes) return Bad("follower report", "digest count exceeds the body");
  out->digests.resize(n);
  for (BatchDigest& d : out->digests) {
    if (!GetVarint(r, &d.batch) || !r.GetU64(&d.digest)) return Bad("follower report", "truncated digest");
  }
  if (!r.done()) return Bad("follower report", "trailing bytes");
  return Status::Ok();
}

// --- kCheckpointFetch / kCheckpointChunk ---------------------------------------------------

std::string EncodeCheckpointFetch(const CheckpointFetch& f) {
  Writer w(48);
  w.PutU64(f.request_id);
  w.PutVarint(f.min_batch);
  w.PutU64(f.batch);
  w.PutVarint(f.offset);
  w.PutVarint(f.max_bytes);
  return w.Release();
}

Status DecodeCheckpointFetch(std::string_view body, CheckpointFetch* out) {
  Reader r(body);
  if (!r.GetU64(&out->request_id) || !GetVarint(r, &out->min_batch) || !r.GetU64(&out->batch) ||
      !GetVarint(r, &out->offset) || !GetVarint32(r, &out->max_bytes)) {
    return Bad("checkpoint-fetch request", "truncated");
  }
  if (out->max_bytes == 0 || out->max_bytes > kMaxCheckpointChunk) {
    return Bad("checkpoint-fetch request", "max_bytes " + std::to_string(out->max_bytes) + " not in [1, " +
                                               std::to_string(kMaxCheckpointChunk) + "]");
  }
  if (!r.done()) return Bad("checkpoint-fetch request", "trailing bytes");
  return Status::Ok();
}

uint64_t ChunkChecksum(std::string_view data) {
  constexpr uint64_t kSeed = 0x636b70746368756eULL;  // "ckptchun"
  return BulkHash64(data.data(), data.size(), kSeed);
}

std::string EncodeCheckpointChunk(const CheckpointChunk& c) {
  Writer w(48 + c.data.size());
  w.PutU64(c.request_id);
  w.PutVarint(c.batch);
  w.PutVarint(c.file_bytes);
  w.PutVarint(c.offset);
  w.PutBytes(c.data);
  w.PutU64(c.checksum);
  return w.Release();
}

Status DecodeCheckpointChunk(std::string_view body, CheckpointChunk* out) {
  Reader r(body);
  uint64_t n = 0;
  if (!r.GetU64(&out->request_id) || !GetVarint(r, &out->batch) || !GetVarint(r, &out->file_bytes) ||
      !GetVarint(r, &out->offset) || !GetVarint(r, &n) || n > kMaxCheckpointChunk || !r.GetRaw(n, &out->data) ||
      !r.GetU64(&out->checksum)) {
    return Bad("checkpoint-chunk reply", "truncated or oversized");
  }
  if (!r.done()) return Bad("checkpoint-chunk reply", "trailing bytes");
  if (out->offset > out->file_bytes || out->data.size() > out->file_bytes - out->offset) {
    return Bad("checkpoint-chunk reply", "bytes [" + std::to_string(out->offset) + ", " +
                                             std::to_string(out->offset + out->data.size()) + ") outside a file of " +
                                             std::to_string(out->file_bytes));
  }
  if (ChunkChecksum(out->data) != out->checksum) return Bad("checkpoint-chunk reply", "checksum mismatch");
  return Status::Ok();
}

}  // namespace qrstore::cluster::proto
