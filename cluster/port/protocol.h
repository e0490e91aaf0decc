// The client protocol: what clients, servers and followers say to a qrstore server over a byte
// stream (nng streams over TCP; common/net/stream_net.h). Plain encode/decode functions
// over the bounds-checked codec (common/codec.h); no I/O, no threads, no state.
//
// Framing. Every message is one frame: an 8-byte header, then `body_bytes` of body.
//   header:  'Q' 'R' | u8 version (kVersion) | u8 type (MsgType) | u32 body_bytes (LE)
// A receiver reads the header, checks magic and version (a bad one means the stream is not ours
// or is out of step: it replies kError and closes, since a byte stream cannot resynchronise),
// checks body_bytes against its limit (an oversized body is read and discarded, then kError:
// the connection lives on), reads the body and decodes it by type (an unknown type or a body
// that does not decode gets kError; the connection lives on).
//
// Messages (request ids are chosen by the sender and echoed in the reply):
//   kTxnRequest      client -> leader: many transactions, run in the order given.
//   kTxnReply        leader -> client: one result per transaction, in request order: status,
//                    planned position, and for a committed transaction the values of its read
//                    ops (kRead), each a whole record, in op order.
//   kError           server -> client: the request failed as a whole (malformed, unknown,
//                    oversized, server stopping, replication failed); code and message.
//   kNotLeader       server -> client: this node does not take transactions; where the leader is.
//   kStatusRequest   anyone -> server: node status (stats for the client's summary and
//   kStatusReply     cluster.sh status).
//   kFollowerReport  follower -> leader: the follower's state digest after each batch it
//                    applied (no reply).
//   kOpenSession     client -> leader: open a client session (docs/sessions.md). The session
//   kSessionOpened   is opened through the replicated log; the reply carries its id, valid on
//                    whichever node leads later. A txn request names its session and gives
//                    every txn a sequence number; a txn sent again with the same (session, seq)
//                    is answered from the replicated session table, never executed twice.
//   kCheckpointFetch node -> peer: a piece of one of the peer's checkpoint files (a member the
//   kCheckpointChunk group can no longer catch up from its log fetches one: docs/recovery.md);
//                    the chunk carries its own checksum, the file its checksums throughout.
//
// Canonical form: Encode(Decode(bytes)) == bytes for every accepted body (decoders reject
// overlong varints, unknown codes and trailing bytes), so fuzzers can check round trips.
// Limits: every count read from the wire is checked against the bytes left before anything is
// allocated (Reader::GetCount), so a hostile body cannot make a decoder allocate more than its
// own size times a small constant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "commit/outcome.h"
#include "common/status.h"
#include "storage/txn.h"

namespace qrstore::cluster::proto {

constexpr uint8_t kVersion = 1;
constexpr size_t kHeaderBytes = 8;
// Upper bounds a decoder enforces whatever the receiver's own limits.
constexpr uint32_t kMaxOpsPerTxn = 1024;
constexpr uint32_t kMaxStringBytes = 4096;  // names, addresses, messages

enum class MsgType : uint8_t {
  kTxnRequest = 1,
  kTxnReply = 2,
  kError = 3,
  kNotLeader = 4,
  kStatusRequest = 5,
  kStatusReply = 6,
  kFollowerReport = 7,
  kOpenSession = 8,
  kSessionOpened = 9,
  kCheckpointFetch = 10,
  kCheckpointChunk = 11,
};
constexpr uint8_t kMaxMsgType = 11;
const char* MsgTypeName(MsgType t);

struct FrameHeader {
  uint8_t version = kVersion;
  uint8_t type = 0;  // raw: the caller decides what an unknown type means
  uint32_t body_bytes = 0;
};
void EncodeHeader(MsgType type, uint32_t body_bytes, char out[kHeaderBytes]);
// kCorruption when the magic or version is wrong (the type is not checked here).
Status DecodeHeader(const char in[kHeaderBytes], FrameHeader* out);
// Header + body in one string.
std::string Frame(MsgType type, std::string_view body);

// --- kTxnRequest -------------------------------------------------------------------------
// A transaction on the wire is its id and ops (storage/txn.h); client and submit_ns are the
// server's business. Every op carries kind, key, src_key, arg (unused ones are 0).
// Body: request id (8 bytes, always first: a server that cannot read the rest still names the
// request), session (varint; 0: none), txn count, txns. With a session every txn starts with
// its seq as a delta from the previous txn's (the first's from 0): seqs strictly increase in a
// request (a delta of 0 is malformed), but need not be consecutive (a client resends only what
// is unanswered). Without one, Txn::seq is 0 and not sent.
struct TxnRequest {
  uint64_t request_id = 0;
  uint64_t session = 0;
  std::vector<storage::Txn> txns;  // Txn::session = session; Txn::seq as sent
};
std::string EncodeTxnRequest(const TxnRequest& req);
// Incremental form for senders that build requests txn by txn: Begin, Add..., Finish.
class TxnRequestWriter {
 public:
  // `session` 0: txns without a session (their seq is ignored).
  void Begin(uint64_t request_id, uint64_t session = 0);
  // With a session, txn.seq must be above the previous txn's (checked).
  void Add(const storage::Txn& txn);
  uint32_t count() const { return count_; }
  // The body (not framed) as a view into the writer, valid until the next Begin: built in place
  // (room for the id and count before the txns), no copy, no allocation once warm.
  std::string_view FinishView();
  // The same, copied out.
  std::string Finish() { return std::string(FinishView()); }

 private:
  static constexpr size_t kRoom = 8 + 10 + 10;  // request id, session, count: before the txns
  uint64_t request_id_ = 0;
  uint64_t session_ = 0;
  uint64_t prev_seq_ = 0;
  uint32_t count_ = 0;
  std::string buf_;  // kRoom bytes of room, then the txns
};
// Structural checks only: op kinds are range-checked by the server (an unknown kind is a
// rejected transaction, not a malformed request), so kind is decoded as a raw byte into
// Op::kind. `out` is reused (capacity kept).
Status DecodeTxnRequest(std::string_view body, TxnRequest* out);

// --- kTxnReply ---------------------------------------------------------------------------
enum class ResultCode : uint8_t {
  kCommitted = 0,
  kAbortedLogic = 1,    // its own abort check fired or a debit was short
  kAbortedCascade = 2,  // reserved (commit/outcome.h)
  kRejected = 3,        // bad input (unknown op kind, key out of range, too many ops): never ran
  kFailed = 4,          // not run or not acknowledged: replication failed, node stopping
  // Session txns sent again (docs/sessions.md):
  kCommittedNoValues = 5,  // committed earlier, at the position given; its read values are not
                           // kept (a node that replayed it as a follower never read them)
  kExpired = 6,            // the session no longer remembers this seq: outcome unknown; it is
                           // never executed again (detail says why)
};
constexpr uint8_t kMaxResultCode = 6;
// The result code of an engine outcome's fate.
inline ResultCode ResultCodeOf(commit::TxnStatus s) {
  switch (s) {
    case commit::TxnStatus::kCommitted: return ResultCode::kCommitted;
    case commit::TxnStatus::kAbortedLogic: return ResultCode::kAbortedLogic;
    case commit::TxnStatus::kAbortedCascade: return ResultCode::kAbortedCascade;
  }
  return ResultCode::kAbortedLogic;
}
// Results that carry a detail string instead of a position (rejected, failed, expired).
inline bool HasDetail(ResultCode c) {
  return c == ResultCode::kRejected || c == ResultCode::kFailed || c == ResultCode::kExpired;
}
const char* ResultCodeName(ResultCode c);

struct TxnResult {
  ResultCode code = ResultCode::kCommitted;
  uint64_t batch = 0;     // planned position (committed / aborted)
  uint32_t planner = 0;
  uint32_t index = 0;
  uint32_t reads = 0;     // committed: records in `values`
  std::string_view values;  // reads * record_bytes bytes (a view into the decoded body)
  std::string_view detail;  // rejected / failed: why (a view into the decoded body)
};
struct TxnReply {
  uint64_t request_id = 0;
  uint32_t record_bytes = 0;  // size of one read value
  std::vector<TxnResult> results;
};
// Builds a reply result by result (the server's commit path appends as outcomes arrive).
class TxnReplyWriter {
 public:
  // `reads`: the read values the results are expected to carry (the request's kRead ops), so the
  // body is allocated once at its final size instead of growing (and copying) as values come.
  void Begin(uint64_t request_id, uint32_t record_bytes, uint32_t count, uint64_t reads);
  void AddOutcome(ResultCode code, uint64_t batch, uint32_t planner, uint32_t index, uint32_t reads,
                  std::string_view values);
  void AddRejected(ResultCode code, std::string_view detail);
  uint32_t added() const { return added_; }
  uint32_t expected() const { return expected_; }
  std::string Finish();  // the body; checks that `count` results were added
  // The whole frame (header + body) without copying the body: Begin leaves room for the header.
  std::string FinishFrame();

 private:
  std::string body_;     // kHeaderBytes of room for the frame header, then the body
  uint32_t expected_ = 0;
  uint32_t added_ = 0;
  uint32_t record_bytes_ = 0;
};
std::string EncodeTxnReply(const TxnReply& reply);
// Views in `out` point into `body`, which must outlive them.
Status DecodeTxnReply(std::string_view body, TxnReply* out);

// --- kError, kNotLeader ------------------------------------------------------------------
struct ErrorReply {
  uint64_t request_id = 0;  // 0 when the request could not be read
  StatusCode code = StatusCode::kInvalidArgument;
  std::string message;
};
std::string EncodeError(const ErrorReply& e);
Status DecodeError(std::string_view body, ErrorReply* out);

struct NotLeaderReply {
  uint64_t request_id = 0;
  std::string leader_node;     // "" when unknown
  std::string leader_address;  // host:client_port, "" when unknown
};
std::string EncodeNotLeader(const NotLeaderReply& r);
Status DecodeNotLeader(std::string_view body, NotLeaderReply* out);

// --- kOpenSession / kSessionOpened --------------------------------------------------------
struct OpenSession {
  uint64_t request_id = 0;
};
std::string EncodeOpenSession(const OpenSession& r);
Status DecodeOpenSession(std::string_view body, OpenSession* out);
struct SessionOpened {
  uint64_t request_id = 0;
  uint64_t session = 0;  // >= 1
};
std::string EncodeSessionOpened(const SessionOpened& r);
Status DecodeSessionOpened(std::string_view body, SessionOpened* out);

// --- kStatusRequest / kStatusReply ------------------------------------------------------
struct StatusRequest {
  uint64_t request_id = 0;
};
std::string EncodeStatusRequest(const StatusRequest& r);
Status DecodeStatusRequest(std::string_view body, StatusRequest* out);

// What a leader knows of one follower (from its reports).
struct FollowerView {
  std::string node;
  bool connected = false;         // a report connection is open now
  uint64_t applied_batches = 0;   // batches [0, this) applied, per its last report
  uint64_t lag_batches = 0;       // leader's committed batches minus applied_batches
  uint64_t checked_batches = 0;   // reported digests compared with the leader's
  uint64_t mismatches = 0;        // of those, how many differed
  bool agrees_at_last = false;    // its digest for the leader's last committed batch matched
  // The replication backend can no longer bring it up to date (what it lacks is gone from the
  // backend): it is out of the group's flow control and of the replicas' agreement check.
  bool stranded = false;
  std::string note;               // why it is stranded ("" otherwise)
};

// Mean per-batch phase times on a node, milliseconds (the paper's T_pl, T_deliv, T_ex, T_repl,
// T_c; repl_wait is the part of T_repl not hidden behind execution; cut is how long a batch
// stayed open, 0 on a follower).
struct PhaseMeans {
  double plan_ms = 0;
  double deliver_ms = 0;
  double exec_ms = 0;
  double repl_ms = 0;
  double repl_wait_ms = 0;
  double commit_ms = 0;
  double cut_ms = 0;  // a leader's: the batch open, its first txn taken -> its last slice closed
};

// Time totals on a node since its process started (a client takes differences over its window):
// the parts of a txn's time that are not a batch's phase.
struct TimeTotals {
  // The replication log's fsyncs on this member and their total time (raft; 0 where the log is
  // not this process's to sync: zookeeper's is the ZooKeeper server's, none has none).
  uint64_t log_syncs = 0;
  uint64_t log_sync_ns = 0;
  // Txn reply frames written to clients; over them, the sums of: the reply complete (its last
  // outcome in) -> written to the socket (`reply_ns`), and the request read off the socket ->
  // its reply written (`request_ns`: the request's whole time in this server).
  uint64_t replies = 0;
  uint64_t reply_ns = 0;
  uint64_t request_ns = 0;
};

struct NodeStatus {
  uint64_t request_id = 0;
  std::string node;
  std::string role;        // "leader" | "follower" | "promoting" | "deposed"
  std::string state;       // "serving" | "stopping" | "failed" | "stranded" | "recovering" | "rejoining"
  std::string error;       // why, when failed ("" otherwise)
  std::string backend;     // replication.backend
  std::string mode;        // replication.mode
  uint32_t partition = 0;
  uint32_t row = 0;
  uint64_t committed_batches = 0;  // batches [0, this) committed (follower: applied)
  uint64_t last_digest = 0;        // state digest after batch committed_batches - 1
  uint64_t committed_txns = 0;
  uint64_t aborted_txns = 0;
  uint64_t rejected_txns = 0;
  uint64_t failed_txns = 0;
  uint64_t cpu_ns = 0;             // CPU time this server process used since it started
  uint64_t digest_mismatches = 0;  // leader: follower digests that differed from its own
  PhaseMeans phases;
  std::vector<FollowerView> followers;  // leader only
  // What this server loaded (cluster_config.h TableKeys: key, effective value); empty from a
  // server that does not say.
  std::vector<std::pair<std::string, std::string>> loaded;
  // The node this one believes leads its group (itself when it leads; "" when it knows none)
  // and the backend's term (raft) or epoch (zookeeper) of that leadership (0: none).
  std::string leader;
  uint64_t term = 0;
  // The replicated client-session table (planner/session_table.h): sessions and outcomes held.
  uint64_t sessions = 0;
  uint64_t session_outcomes = 0;
  // server.checkpoint_dir: the newest checkpoint this process wrote (has_checkpoint false: none
  // yet, or no checkpoints), and how old it is.
  bool has_checkpoint = false;
  uint64_t checkpoint_batch = 0;
  uint64_t checkpoint_age_s = 0;
  // How many times this node's process re-executed itself to rejoin its group after it was
  // deposed (server.rejoin_when_deposed); 0: it did not.
  uint64_t rejoins = 0;
  TimeTotals times;
  // replication.point ("" from a server that does not say) and the bytes this node handed its
  // replication layer since it started (a leader's entries; 0 on a follower).
  std::string point;
  uint64_t replicated_bytes = 0;
};
std::string EncodeStatusReply(const NodeStatus& s);
Status DecodeStatusReply(std::string_view body, NodeStatus* out);

// --- kFollowerReport ---------------------------------------------------------------------
struct BatchDigest {
  uint64_t batch = 0;
  uint64_t digest = 0;  // state digest after the batch
};
struct FollowerReport {
  std::string node;
  uint64_t applied_batches = 0;      // batches [0, this) applied
  bool ended = false;                // the leader's end marker arrived: nothing more will come
  std::vector<BatchDigest> digests;  // batches applied since the previous report, in order
};
std::string EncodeFollowerReport(const FollowerReport& r);
Status DecodeFollowerReport(std::string_view body, FollowerReport* out);

// --- kCheckpointFetch / kCheckpointChunk ---------------------------------------------------
// `batch` kAnyCheckpoint asks for the newest checkpoint of batch >= min_batch (the reply names
// the one chosen); later pieces name that batch, so a file replaced meanwhile is not mixed in
// (the reply is then an error: start again).
constexpr uint64_t kAnyCheckpoint = UINT64_MAX;
constexpr uint32_t kMaxCheckpointChunk = 8u << 20;
struct CheckpointFetch {
  uint64_t request_id = 0;
  uint64_t min_batch = 0;
  uint64_t batch = kAnyCheckpoint;
  uint64_t offset = 0;
  uint32_t max_bytes = 1u << 20;  // 1..kMaxCheckpointChunk
};
std::string EncodeCheckpointFetch(const CheckpointFetch& f);
Status DecodeCheckpointFetch(std::string_view body, CheckpointFetch* out);
struct CheckpointChunk {
  uint64_t request_id = 0;
  uint64_t batch = 0;        // the checkpoint's batch
  uint64_t file_bytes = 0;   // the whole file's size
  uint64_t offset = 0;       // of `data` in the file
  std::string_view data;     // a view into the decoded body (valid while it lives)
  uint64_t checksum = 0;     // ChunkChecksum(data)
};
uint64_t ChunkChecksum(std::string_view data);
std::string EncodeCheckpointChunk(const CheckpointChunk& c);
// Checks the checksum, and that the chunk lies within the file.
Status DecodeCheckpointChunk(std::string_view body, CheckpointChunk* out);

}  // namespace qrstore::cluster::proto
