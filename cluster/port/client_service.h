// ClientService: a server's client port (cluster/port/protocol.h over nng streams on TCP). Clients
// send transaction requests, status requests; followers send digest reports to their leader;
// a node behind its group's log fetches a checkpoint of this one (kCheckpointFetch).
//
// Shape. A "cli-accept" thread accepts connections (at most server.max_connections; one more
// gets an error reply and is closed) and reaps finished ones. Each connection has a reader
// ("cli-rd-<slot>") and a writer ("cli-wr-<slot>") thread:
//   reader: reads a frame, answers what it can at once (status, not-leader, errors) and for a
//     transaction request: checks every txn (op kinds, keys in [0, records), op counts) — a bad
//     txn is a `rejected` result, never reaches the engine — registers the request, then
//     submits its txns in order (so a connection's txns are planned in the order it sent them).
//     While the connection has server.max_inflight_txns_per_connection txns unanswered it reads
//     nothing more (TCP back-pressure, not memory growth).
//   commit path: OnOutcomes (the pipeline's sink, on a commit thread) routes each outcome to its
//     connection (Txn::client = slot | generation << 16) and fills that connection's oldest
//     request; a full request becomes a reply frame for the writer. Replies go out in request
//     order with results in txn order.
//   sessions (docs/sessions.md; handler.sessions): kOpenSession is submitted as an open-session
//     entry and answered kSessionOpened with the id its outcome got. A session txn the leader
//     answers without running it (a duplicate, an expired or refused one: cluster/
//     session_store.h) is answered by Answer() at its own position, found by (session, seq);
//     the connection's later outcomes fill the positions after it as usual.
//   writer: writes reply frames; on a write error the connection is closed.
// Bad input: a bad magic or version gets an error reply and the connection is closed (a byte
// stream cannot resynchronise); an oversized body is read and discarded, then an error reply; a
// body that does not decode or an unknown type gets an error reply; the connection lives on.
//
// Failure and shutdown: StopAdmitting makes later requests get an error saying why;
// FailPending answers every registered txn that has no outcome with `failed` (after a
// replication failure: nothing un-replicated is acknowledged), and outcomes arriving after it
// are dropped. Stop flushes pending replies (bounded) and closes everything.
//
// Thread-safety: OnOutcomes from the sink (serialized by the pipeline); the rest from the
// server's controlling thread. Locks: registry mu_ before a connection's mu, never the reverse.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "cluster/port/protocol.h"
#include "commit/outcome.h"
#include "common/mutex.h"
#include "common/net/stream_net.h"
#include "common/status.h"
#include "common/thread.h"
#include "storage/txn.h"

namespace qrstore::cluster {

struct ClientServiceOptions {
  std::string node;
  std::string listen_address;       // host:client_port
  uint32_t max_connections = 64;
  uint32_t max_message_bytes = 16 << 20;
  uint64_t max_inflight_txns = 100000;  // per connection
  uint32_t record_bytes = 0;        // size of one read value
  uint64_t records = 0;             // keys are [0, records)
};

struct ClientServiceHandler {
  // Hands txns to the engine in order (moved out), blocking while its queue is full; returns
  // how many it took (fewer once the engine takes no more). Called only while `not_leader`
  // says this node leads; empty: txn requests always get kNotLeader.
  std::function<size_t(std::vector<storage::Txn>& txns)> submit;
  // Asked for every txn request: true when this node does not take transactions now (a
  // follower, or a node whose role is changing), with *reply naming the leader it believes in
  // ("" when it knows none). Empty: always leads (when `submit` is set). Any reader thread.
  std::function<bool(proto::NotLeaderReply* reply)> not_leader;
  std::function<proto::NodeStatus()> status;
  // Leader: a follower's digest report; an error is answered (e.g. an unknown follower, or
  // this node does not lead).
  std::function<Status(const proto::FollowerReport&)> report;
  std::function<void(const std::string& node, bool connected)> report_connection;
  // A piece of one of this node's checkpoints (cluster/recovery/checkpoint_transfer.h): the encoded
  // kCheckpointChunk body, or an error to answer. Empty: fetches get an error.
  std::function<Result<std::string>(const proto::CheckpointFetch&)> checkpoint_fetch;
  // This node takes client sessions (a server always does). Else kOpenSession gets an error and the
  // txns of a request that names a session are rejected.
  bool sessions = false;
};

struct ClientServiceCounters {
  uint64_t connections_accepted = 0;
  uint64_t connections_refused = 0;
  uint64_t requests = 0;
  uint64_t rejected_txns = 0;
  uint64_t failed_txns = 0;
  uint64_t error_replies = 0;
  // Txn reply frames written, and over them the sums of: complete -> written (reply_ns), the
  // request read -> its reply written (request_ns).
  uint64_t replies = 0;
  uint64_t reply_ns = 0;
  uint64_t request_ns = 0;
};

class ClientService {
 public:
  ClientService(ClientServiceOptions options, ClientServiceHandler handler);
  ~ClientService();
  ClientService(const ClientService&) = delete;
  ClientService& operator=(const ClientService&) = delete;

  // Listens (kUnavailable naming the address if it cannot) and starts accepting.
  Status Start();
  // `opened`: (index in outcomes, session id) of the open-session entries among them.
  void OnOutcomes(const std::vector<commit::TxnOutcome>& outcomes,
                  const std::vector<std::pair<size_t, uint64_t>>& opened = {});
  // Session txns answered without an outcome of their own (cluster/sessions/session_store.h). Any
  // thread; each before the outcomes of its connection's later txns are delivered.
  template <typename Answers>
  void Answer(const Answers& answers) {
    for (const auto& a : answers) AnswerOne(a.client, a.session, a.seq, a.code, a.pos, a.reads, a.values, a.detail);
  }
  void StopAdmitting(Status reason);
  void FailPending(Status reason);
  // Txns registered and not yet answered, over all connections.
  uint64_t pending_txns() const;
  // Waits up to flush_timeout_ms for pending replies to be written, then closes every
  // connection and joins every thread. Idempotent.
  void Stop(int64_t flush_timeout_ms);
  ClientServiceCounters counters() const;

 private:
  struct Conn;
  struct Pending;

  void AcceptLoop();
  void ReadLoop(Conn* c);
  void WriteLoop(Conn* c);
  void Reap(bool all);
  void HandleFrame(Conn* c, uint8_t type, std::string_view body);
  void HandleTxnRequest(Conn* c, std::string_view body);
  void HandleOpenSession(Conn* c, std::string_view body);
  // Registers `p` (waiting while the connection has too much unanswered), then submits its
  // kEngine positions' txns (moved out of `txns`) in order; those the engine does not take fail.
  void RegisterAndSubmit(Conn* c, Pending p, uint64_t engine_txns, std::vector<storage::Txn>& txns);
  // Why this node does not take a txn request now (OK: it does); a not-leader reply is sent
  // here (returns true then).
  bool SentNotLeader(Conn* c, uint64_t request_id);
  Status Refusal();
  void AnswerOne(uint32_t client, uint64_t session, uint64_t seq, proto::ResultCode code, const commit::PlannedPos& pos,
                 uint32_t reads, std::string_view values, std::string_view detail);
  void SendError(Conn* c, uint64_t request_id, const Status& s, bool then_close = false);
  void Send(Conn* c, std::string frame);
  static constexpr size_t kWakeFrames = 16;

  const ClientServiceOptions opt_;
  const ClientServiceHandler handler_;
  std::unique_ptr<net::StreamNet> net_;
  std::unique_ptr<net::StreamListener> listener_;
  NamedThread acceptor_;
  std::atomic<bool> stop_{false};

  mutable Mutex mu_;  // the registry
  std::vector<std::shared_ptr<Conn>> slots_ GUARDED_BY(mu_);  // [slot], nullptr = free
  std::vector<uint16_t> generation_ GUARDED_BY(mu_);          // per slot
  bool admitting_ GUARDED_BY(mu_) = true;
  Status refusal_ GUARDED_BY(mu_);                            // why not admitting
  bool failed_ GUARDED_BY(mu_) = false;                       // FailPending ran; outcomes are dropped
  Status failure_ GUARDED_BY(mu_);
  ClientServiceCounters counters_ GUARDED_BY(mu_);
  // The writers' reply timings (ClientServiceCounters::replies, reply_ns, request_ns): atomics,
  // so a writer never takes the registry lock the commit path holds.
  std::atomic<uint64_t> replies_{0};
  std::atomic<uint64_t> reply_ns_{0};
  std::atomic<uint64_t> request_ns_{0};
};

}  // namespace qrstore::cluster
