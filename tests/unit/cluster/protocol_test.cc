#include <catch2/catch.hpp>

#include <cstring>

#include "cluster/port/protocol.h"
#include "common/rng.h"

using namespace qrstore;
using namespace qrstore::cluster::proto;
using storage::Op;
using storage::OpKind;
using storage::Txn;

namespace {
Txn MakeTxn(uint64_t id, std::vector<Op> ops) {
  Txn t;
  t.id = id;
  t.ops = std::move(ops);
  return t;
}
}  // namespace

TEST_CASE("protocol: header round trip and rejects foreign or other-version streams") {
  char h[kHeaderBytes];
  EncodeHeader(MsgType::kTxnRequest, 12345, h);
  FrameHeader fh;
  REQUIRE(DecodeHeader(h, &fh).ok());
  CHECK(fh.type == static_cast<uint8_t>(MsgType::kTxnRequest));
  CHECK(fh.body_bytes == 12345);
  char bad[kHeaderBytes];
  std::memcpy(bad, h, kHeaderBytes);
  bad[0] = 'X';
  CHECK(DecodeHeader(bad, &fh).message().find("bad magic") != std::string::npos);
  std::memcpy(bad, h, kHeaderBytes);
  bad[2] = 9;
  CHECK(DecodeHeader(bad, &fh).message().find("protocol version 9") != std::string::npos);
  CHECK(Frame(MsgType::kError, "abc").size() == kHeaderBytes + 3);
}

TEST_CASE("protocol: txn requests round trip, whole or built txn by txn") {
  TxnRequest req;
  req.request_id = 77;
  req.txns.push_back(MakeTxn(1, {Op{OpKind::kRead, 5, 0, 0}, Op{OpKind::kUpdate, 1ull << 40, 0, 0}}));
  req.txns.push_back(MakeTxn(2, {Op{OpKind::kDepWrite, 9, 10, 0}, Op{OpKind::kDebit, 3, 0, 150}}));
  req.txns.push_back(MakeTxn(3, {}));
  const std::string body = EncodeTxnRequest(req);
  TxnRequestWriter w;
  w.Begin(77);
  for (const Txn& t : req.txns) w.Add(t);
  CHECK(w.count() == 3);
  CHECK(w.Finish() == body);
  TxnRequest got;
  REQUIRE(DecodeTxnRequest(body, &got).ok());
  CHECK(got.request_id == 77);
  REQUIRE(got.txns.size() == 3);
  CHECK(got.txns[1].ops[0].kind == OpKind::kDepWrite);
  CHECK(got.txns[1].ops[0].src_key == 10);
  CHECK(got.txns[1].ops[1].arg == 150);
  CHECK(got.txns[0].ops[1].key == (1ull << 40));
  CHECK(EncodeTxnRequest(got) == body);
  // An unknown op kind is structurally fine (the server rejects that txn, not the request).
  req.txns[0].ops[0].kind = static_cast<OpKind>(200);
  REQUIRE(DecodeTxnRequest(EncodeTxnRequest(req), &got).ok());
  CHECK(static_cast<int>(got.txns[0].ops[0].kind) == 200);
}

TEST_CASE("protocol: every truncation, trailing byte and overlong varint of a request is rejected") {
  TxnRequest req;
  req.request_id = 5;
  for (uint64_t i = 0; i < 4; ++i) req.txns.push_back(MakeTxn(i, {Op{OpKind::kRead, i * 1000, 0, 0}, Op{OpKind::kCredit, i, 0, 300}}));
  const std::string body = EncodeTxnRequest(req);
  TxnRequest got;
  for (size_t n = 0; n < body.size(); ++n) CHECK_FALSE(DecodeTxnRequest(body.substr(0, n), &got).ok());
  CHECK(DecodeTxnRequest(body + "x", &got).message().find("trailing") != std::string::npos);
  // The count varint (byte 9 = 4, after the session's byte 8 = 0) written in two bytes: same
  // value, not canonical.
  std::string overlong = body.substr(0, 9) + std::string("\x84\x00", 2) + body.substr(10);
  CHECK_FALSE(DecodeTxnRequest(overlong, &got).ok());
  // A count far beyond the body is refused before allocating.
  std::string huge = body.substr(0, 9) + std::string("\xff\xff\xff\xff\x0f", 5);
  CHECK(DecodeTxnRequest(huge, &got).message().find("exceeds the body") != std::string::npos);
  // Too many ops in one txn.
  Txn big;
  big.ops.assign(kMaxOpsPerTxn + 1, Op{});
  TxnRequest r2;
  r2.txns.push_back(big);
  CHECK(DecodeTxnRequest(EncodeTxnRequest(r2), &got).message().find("at most 1024") != std::string::npos);
}

TEST_CASE("protocol: session requests carry increasing seqs, open-session messages round trip") {
  TxnRequest req;
  req.request_id = 12;
  req.session = 300;
  for (uint64_t seq : {1ull, 2ull, 7ull, 1000000ull}) {
    Txn t = MakeTxn(seq * 10, {Op{OpKind::kUpdate, seq, 0, 0}});
    t.session = 300;
    t.seq = seq;
    req.txns.push_back(t);
  }
  const std::string body = EncodeTxnRequest(req);
  TxnRequestWriter w;
  w.Begin(12, 300);
  for (const Txn& t : req.txns) w.Add(t);
  CHECK(w.Finish() == body);
  TxnRequest got;
  REQUIRE(DecodeTxnRequest(body, &got).ok());
  CHECK(got.session == 300);
  REQUIRE(got.txns.size() == 4);
  CHECK(got.txns[2].seq == 7);
  CHECK(got.txns[3].seq == 1000000);
  CHECK(got.txns[3].session == 300);
  CHECK(EncodeTxnRequest(got) == body);
  for (size_t n = 0; n < body.size(); ++n) CHECK_FALSE(DecodeTxnRequest(body.substr(0, n), &got).ok());
  // A seq that does not increase (a delta of 0) is malformed.
  req.txns[1].seq = 1;
  CHECK(DecodeTxnRequest(EncodeTxnRequest(req), &got).message().find("bad seq") != std::string::npos);
  // Without a session no seq is sent, whatever Txn::seq says.
  TxnRequest plain;
  plain.txns.push_back(MakeTxn(1, {}));
  plain.txns[0].seq = 99;
  REQUIRE(DecodeTxnRequest(EncodeTxnRequest(plain), &got).ok());
  CHECK(got.txns[0].seq == 0);
  CHECK(got.txns[0].session == 0);

  OpenSession os{41}, os2;
  REQUIRE(DecodeOpenSession(EncodeOpenSession(os), &os2).ok());
  CHECK(os2.request_id == 41);
  CHECK_FALSE(DecodeOpenSession(EncodeOpenSession(os) + "x", &os2).ok());
  SessionOpened so{41, 123456}, so2;
  REQUIRE(DecodeSessionOpened(EncodeSessionOpened(so), &so2).ok());
  CHECK(so2.session == 123456);
  CHECK(DecodeSessionOpened(EncodeSessionOpened({41, 0}), &so2).message().find("session 0") != std::string::npos);

  // The answers of retries: committed without values (a position), expired (a detail).
  TxnReplyWriter rw;
  rw.Begin(5, 8, 2, 0);
  rw.AddOutcome(ResultCode::kCommittedNoValues, 4, 1, 2, 0, "");
  rw.AddRejected(ResultCode::kExpired, "session 3 seq 1 expired");
  const std::string rb = rw.Finish();
  TxnReply rep;
  REQUIRE(DecodeTxnReply(rb, &rep).ok());
  CHECK(rep.results[0].code == ResultCode::kCommittedNoValues);
  CHECK(rep.results[0].batch == 4);
  CHECK(rep.results[1].code == ResultCode::kExpired);
  CHECK(rep.results[1].detail == "session 3 seq 1 expired");
  CHECK(EncodeTxnReply(rep) == rb);
}

TEST_CASE("protocol: replies carry outcomes, read values and reject details in order") {
  const uint32_t rec = 16;
  TxnReplyWriter w;
  w.Begin(9, rec, 4, 2);
  std::string v1(2 * rec, 'a');
  v1[rec] = 'b';
  w.AddOutcome(ResultCode::kCommitted, 3, 0, 17, 2, v1);
  w.AddOutcome(ResultCode::kAbortedLogic, 3, 1, 0, 0, "");
  w.AddRejected(ResultCode::kRejected, "op 2: key 99 out of range [0, 50)");
  w.AddRejected(ResultCode::kFailed, "replication failed");
  const std::string body = w.Finish();
  TxnReply got;
  REQUIRE(DecodeTxnReply(body, &got).ok());
  CHECK(got.request_id == 9);
  CHECK(got.record_bytes == rec);
  REQUIRE(got.results.size() == 4);
  CHECK(got.results[0].code == ResultCode::kCommitted);
  CHECK(got.results[0].batch == 3);
  CHECK(got.results[0].index == 17);
  CHECK(got.results[0].reads == 2);
  CHECK(got.results[0].values == v1);
  CHECK(got.results[1].code == ResultCode::kAbortedLogic);
  CHECK(got.results[1].planner == 1);
  CHECK(got.results[2].detail == "op 2: key 99 out of range [0, 50)");
  CHECK(got.results[3].code == ResultCode::kFailed);
  CHECK(EncodeTxnReply(got) == body);
  for (size_t n = 0; n < body.size(); ++n) CHECK_FALSE(DecodeTxnReply(body.substr(0, n), &got).ok());
  std::string bad_code = body;
  bad_code[8 + 1 + 1] = 9;  // first result's code
  CHECK(DecodeTxnReply(bad_code, &got).message().find("bad code") != std::string::npos);
}

TEST_CASE("protocol: error, not-leader, status and follower reports round trip") {
  ErrorReply e{4, StatusCode::kUnavailable, "replication failed: not leader"};
  ErrorReply e2;
  REQUIRE(DecodeError(EncodeError(e), &e2).ok());
  CHECK(e2.code == StatusCode::kUnavailable);
  CHECK(e2.message == e.message);
  std::string bad = EncodeError(e);
  bad[8] = 0;  // code OK is not an error
  CHECK_FALSE(DecodeError(bad, &e2).ok());

  NotLeaderReply n{6, "n0", "127.0.0.1:7100"}, n2;
  REQUIRE(DecodeNotLeader(EncodeNotLeader(n), &n2).ok());
  CHECK(n2.leader_address == "127.0.0.1:7100");

  StatusRequest sr{11}, sr2;
  REQUIRE(DecodeStatusRequest(EncodeStatusRequest(sr), &sr2).ok());
  CHECK(sr2.request_id == 11);
  CHECK_FALSE(DecodeStatusRequest(EncodeStatusRequest(sr) + "z", &sr2).ok());

  NodeStatus s;
  s.request_id = 11;
  s.node = "n0";
  s.role = "leader";
  s.state = "serving";
  s.backend = "raft";
  s.mode = "speculative";
  s.committed_batches = 42;
  s.last_digest = 0xdeadbeefcafef00dULL;
  s.committed_txns = 420000;
  s.cpu_ns = 123456789;
  s.phases.exec_ms = 3.5;
  s.phases.cut_ms = 9.25;
  s.followers.push_back(FollowerView{"n1", true, 41, 1, 41, 0, false, false, ""});
  s.followers.push_back(FollowerView{"n2", false, 42, 0, 42, 1, true, true, "its log ends at 7"});
  s.loaded = {{"workload.kind", "transfer"}, {"transfer.accounts", "20000"}};
  s.leader = "n2";
  s.term = 7;
  s.times = TimeTotals{5, 5'000'000, 300, 1'500'000, 9'000'000'000};
  s.point = "input";
  s.replicated_bytes = 123'456'789'000;
  const std::string sb = EncodeStatusReply(s);
  NodeStatus s2;
  REQUIRE(DecodeStatusReply(sb, &s2).ok());
  CHECK(s2.node == "n0");
  CHECK(s2.last_digest == s.last_digest);
  CHECK(s2.phases.exec_ms == 3.5);
  CHECK(s2.phases.cut_ms == 9.25);
  REQUIRE(s2.followers.size() == 2);
  CHECK(s2.followers[1].mismatches == 1);
  CHECK(s2.followers[1].agrees_at_last);
  CHECK_FALSE(s2.followers[0].stranded);
  CHECK(s2.followers[1].stranded);
  CHECK(s2.followers[1].note == "its log ends at 7");
  CHECK(s2.loaded == s.loaded);
  CHECK(s2.leader == "n2");
  CHECK(s2.term == 7);
  CHECK(s2.times.log_syncs == 5);
  CHECK(s2.times.log_sync_ns == 5'000'000);
  CHECK(s2.times.replies == 300);
  CHECK(s2.times.reply_ns == 1'500'000);
  CHECK(s2.times.request_ns == 9'000'000'000);
  CHECK(s2.point == "input");
  CHECK(s2.replicated_bytes == 123'456'789'000);
  CHECK(EncodeStatusReply(s2) == sb);
  for (size_t k = 0; k < sb.size(); ++k) CHECK_FALSE(DecodeStatusReply(sb.substr(0, k), &s2).ok());

  FollowerReport f{"n1", 10, true, {{8, 1}, {9, 2}}}, f2;
  const std::string fb = EncodeFollowerReport(f);
  REQUIRE(DecodeFollowerReport(fb, &f2).ok());
  CHECK(f2.applied_batches == 10);
  CHECK(f2.ended);
  REQUIRE(f2.digests.size() == 2);
  CHECK(f2.digests[1].digest == 2);
  CHECK(EncodeFollowerReport(f2) == fb);
}

TEST_CASE("protocol: random bytes never crash a decoder and what decodes re-encodes to itself") {
  Rng rng(7);
  TxnRequest req;
  TxnReply rep;
  NodeStatus st;
  FollowerReport fr;
  ErrorReply er;
  NotLeaderReply nl;
  OpenSession os;
  SessionOpened so;
  CheckpointFetch cf;
  CheckpointChunk cc;
  for (int i = 0; i < 20000; ++i) {
    std::string b(rng.Uniform(64), '\0');
    for (char& c : b) c = static_cast<char>(rng.Uniform(4) == 0 ? 0 : rng.Next());
    if (DecodeTxnRequest(b, &req).ok()) CHECK(EncodeTxnRequest(req) == b);
    if (DecodeTxnReply(b, &rep).ok()) CHECK(EncodeTxnReply(rep) == b);
    if (DecodeStatusReply(b, &st).ok()) CHECK(EncodeStatusReply(st) == b);
    if (DecodeFollowerReport(b, &fr).ok()) CHECK(EncodeFollowerReport(fr) == b);
    if (DecodeError(b, &er).ok()) CHECK(EncodeError(er) == b);
    if (DecodeNotLeader(b, &nl).ok()) CHECK(EncodeNotLeader(nl) == b);
    if (DecodeOpenSession(b, &os).ok()) CHECK(EncodeOpenSession(os) == b);
    if (DecodeSessionOpened(b, &so).ok()) CHECK(EncodeSessionOpened(so) == b);
    if (DecodeCheckpointFetch(b, &cf).ok()) CHECK(EncodeCheckpointFetch(cf) == b);
    if (DecodeCheckpointChunk(b, &cc).ok()) CHECK(EncodeCheckpointChunk(cc) == b);
  }
}

TEST_CASE("protocol: checkpoint fetches and pieces round trip, a piece that lies is refused") {
  CheckpointFetch f{5, 120, kAnyCheckpoint, 4096, 1 << 20};
  CheckpointFetch f2;
  REQUIRE(DecodeCheckpointFetch(EncodeCheckpointFetch(f), &f2).ok());
  CHECK(f2.request_id == 5);
  CHECK(f2.min_batch == 120);
  CHECK(f2.batch == kAnyCheckpoint);
  CHECK(f2.offset == 4096);
  CHECK(f2.max_bytes == (1u << 20));
  for (uint32_t bad : {0u, kMaxCheckpointChunk + 1}) {
    f.max_bytes = bad;
    Status st = DecodeCheckpointFetch(EncodeCheckpointFetch(f), &f2);
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("max_bytes") != std::string::npos);
  }

  const std::string data = "a piece of the file";
  CheckpointChunk c;
  c.request_id = 5;
  c.batch = 140;
  c.file_bytes = 1000;
  c.offset = 980;
  c.data = data;
  c.checksum = ChunkChecksum(c.data);
  const std::string body = EncodeCheckpointChunk(c);
  CheckpointChunk d;
  REQUIRE(DecodeCheckpointChunk(body, &d).ok());
  CHECK(d.batch == 140);
  CHECK(d.offset == 980);
  CHECK(d.data == c.data);
  // A flipped byte in the data fails the checksum.
  std::string flipped = body;
  flipped[flipped.size() - 9] ^= 1;
  Status st = DecodeCheckpointChunk(flipped, &d);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("checksum") != std::string::npos);
  // A piece that runs past the file's end.
  c.offset = 990;
  st = DecodeCheckpointChunk(EncodeCheckpointChunk(c), &d);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("outside a file of 1000") != std::string::npos);
}
