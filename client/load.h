// The closed loop of qrstore-client: one LoadConnection per connection keeps at most K txns in
// flight, in requests of at most n txns, drawn from its own deterministic generator
// (client/verify.h ConnectionSeed), and accounts every answer into its own counters,
// latency histogram and (--verify) records.
//
// Threads: a LoadConnection's sender runs on "cli-send-<c>", its answers arrive on the
// connection's reader "cli-recv-<c>" (client/client.h); the program's main thread owns the
// timeline (Start, StopSending, Shutdown, Finish) and reads counters. Connections share no lock:
// each has its own mutex (pending requests, window room) and its counters are relaxed atomics
// written by its reader only; histogram and records are the reader's, read after Finish. The
// shared pieces are ErrorLog (rare path, own mutex), RunSignal (wakes the main thread on events
// that are not per reply: a quota done, a connection closed, the first failure) and Window
// (two atomics).
// Memory per connection: at most K/n + 1 pending requests, one reply buffer, a fixed histogram,
// and with --verify one 40-byte ClientTxnRecord per txn (at most its quota).
// Invariants: pending requests are answered in request order (an error reply may answer any
// one); inflight = txns of pending requests (+ one request being encoded) <= K; a connection
// never sends after StopSending, Shutdown or its first failure.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/client.h"
#include "client/verify.h"
#include "cluster/port/protocol.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "workloads/latency_histogram.h"
#include "workloads/workload.h"

namespace qrstore::client {

// Bytes of the largest request body of `n` txns this workload can produce (varints at their
// widest for the workload's keys and arguments, with a session and seqs), and of the largest
// reply to it.
uint64_t MaxRequestBytes(const workloads::WorkloadOptions& o, uint64_t n);
uint64_t MaxReplyBytes(const workloads::WorkloadOptions& o, uint64_t n);

// The first few problems for the summary, and how many errors (error replies, broken or stalled
// connections) there were; rejected and failed txns are noted but counted by result.
class ErrorLog {
 public:
  void Note(const std::string& e, bool is_error = true);
  std::vector<std::string> first() const;
  uint64_t count() const;

 private:
  static constexpr size_t kKeep = 5;
  mutable Mutex mu_;
  std::vector<std::string> first_ GUARDED_BY(mu_);
  uint64_t count_ GUARDED_BY(mu_) = 0;
};

// Wakes the main thread when something it waits for may have happened, and carries the run-wide
// stop: set on the first failed txn or error reply (the run has failed; hammering a node that
// refuses work only multiplies the errors).
class RunSignal {
 public:
  void Notify();
  // Waits until a Notify after event count `seen`, or the timeout; returns the event count.
  uint64_t WaitFor(uint64_t seen, int64_t timeout_ns);
  void StopAll() {
    stop_all_.store(true, std::memory_order_release);
    Notify();
  }
  bool stopping() const { return stop_all_.load(std::memory_order_acquire); }

 private:
  Mutex mu_;
  std::condition_variable cv_;
  uint64_t events_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_all_{false};
};

// The measured window [start, end) on the NowNanos clock; a reply counts in the window's figures
// when it is received inside it. INT64_MAX: not started / not ended.
struct Window {
  std::atomic<int64_t> start_ns{INT64_MAX};
  std::atomic<int64_t> end_ns{INT64_MAX};
  bool In(int64_t t) const {
    return t >= start_ns.load(std::memory_order_acquire) && t < end_ns.load(std::memory_order_acquire);
  }
};

// Result counts of one connection, whole run and inside the window. Written by its reader thread
// only (relaxed: the main thread reads them for progress lines, and exactly after Finish).
struct Counts {
  std::atomic<uint64_t> results{0}, committed{0}, aborted{0}, rejected{0}, failed{0};
  std::atomic<uint64_t> w_committed{0}, w_aborted{0};
  std::atomic<uint64_t> acked_batches{0};  // 1 + the highest batch a committed/aborted answer came from
  // Write ops (kUpdate, kDepWrite, kDebit, kCredit: what qrstore-bench counts) of committed txns;
  // txns whose outcome this client does not know (answered `failed` or an error, or in flight
  // when their connection closed) and their write ops: each may or may not have been executed.
  std::atomic<uint64_t> write_ops_committed{0}, in_doubt{0}, write_ops_in_doubt{0};
  // Sessions: txns sent again after a lost leader (each time); committed ones answered from the
  // server's session table without their read values (they had run before: committed-no-values).
  std::atomic<uint64_t> retried{0}, no_values{0};
};

struct ConnectionConfig {
  uint32_t index = 0;
  uint64_t quota = UINT64_MAX;  // txns to send in all
  uint64_t outstanding = 1;     // K: txns in flight at most
  uint32_t per_request = 1;     // txns per request, <= outstanding
  // --target-tps: the sender sends a request every this many ns at most (YCSB's -target), still
  // within the window of K; 0: as fast as the window allows (the closed loop).
  int64_t request_interval_ns = 0;
  bool keep_records = false;    // --verify
  // One partition: losing the leader (the connection closes, a not-leader reply, a `failed`
  // reply or an error reply: the node no longer leads or is being deposed) does not end the
  // run: the connection stops sending, what it had in flight is in doubt, and it waits for the
  // main thread to move it to the new leader (Reconnect). Else those end the run, as before.
  bool follow_leader = false;
  // With follow_leader: a client session (OpenSession before Start; docs/sessions.md). Every txn
  // gets a seq; what a lost leader left unanswered (in flight, `failed`, an Unavailable error, a
  // not-leader reply) is sent again to the next leader with the same seqs instead of being in
  // doubt: the server's session table answers what already ran, so nothing runs twice.
  bool sessions = false;
  int connect_timeout_ms = 5000;
  uint32_t max_frame_bytes = 64u << 20;
};

class LoadConnection {
 public:
  LoadConnection(ConnectionConfig cfg, std::unique_ptr<workloads::Generator> gen, const Window* window,
                 ErrorLog* errors, RunSignal* signal)
      : cfg_(cfg), gen_(std::move(gen)), window_(window), errors_(errors), signal_(signal) {}
  ~LoadConnection() { Finish(); }
  LoadConnection(const LoadConnection&) = delete;
  LoadConnection& operator=(const LoadConnection&) = delete;

  Status Connect(const std::string& address);
  // Sends an empty request and waits for the answer: "" when this node takes transactions, the
  // leader's address when it answers not-leader. Before Start only.
  Result<std::string> Probe(int timeout_ms);
  // sessions: opens this connection's session on the node it is connected to (the leader),
  // waiting up to timeout_ms. Before the first Start only; the session is kept across Reconnect.
  Status OpenSession(int timeout_ms);
  uint64_t session() const { return session_; }
  void Start();
  // The sender sends no more requests (in-flight ones are still answered).
  void StopSending();
  // StopSending, and the connection ends with `why` (unblocks its sender and reader).
  void Shutdown(Status why);
  // Stops the sender and closes the connection (joins the reader). Idempotent.
  void Finish();

  // Quota sent and every request answered.
  bool Done();
  // After StopSending: the sender has exited and nothing is in flight (or the connection is
  // gone). Until the sender exits it may hold a request it reserved room for but has not
  // registered.
  bool Idle();
  // The connection closed while it still had work: txns in flight or a quota not sent.
  bool Broken();
  // follow_leader: the node it drives no longer leads (or is gone); why (for the log).
  bool LostLeader(std::string* why = nullptr);
  // follow_leader, main thread: another node leads now while this one's node went silent (paused,
  // cut off): treat it as lost (what is in flight is in doubt).
  void Abandon(const std::string& why);
  // follow_leader, main thread, after LostLeader: closes the old connection (what it still
  // had in flight is in doubt; with sessions it is sent again, first, on the new one), connects
  // to `address` and sends on from where it was.
  Status Reconnect(const std::string& address);
  uint64_t inflight();
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }
  const Counts& counts() const { return counts_; }
  // After Finish: what only the reader thread wrote.
  const workloads::LatencyHistogram& latency() const { return latency_ns_; }
  std::vector<ClientTxnRecord>& records() { return records_; }

 private:
  struct Req {
    uint64_t id = 0;
    int64_t send_ns = 0;
    uint64_t first_seq = 0;
    uint32_t count = 0;
    std::vector<uint16_t> writes;  // per txn: its write ops
    bool doubted = false;          // counted in doubt already (its connection closed first)
    // sessions: the encoded request (sent again as it is), and which of its txns were answered
    // already (empty: none), whose answers to a resend are not counted again.
    std::string body;
    std::vector<bool> answered;
    bool Answered(size_t i) const { return i < answered.size() && answered[i]; }
  };
  // Txns of `r` not answered yet (mu_ held or the reader thread) are in doubt.
  void InDoubt(const Req& r);
  // Every pending request not yet counted is in doubt (the connection is gone; a request the
  // sender registered after the close never got an answer either). With sessions they are kept
  // for a resend instead (Finish counts what is left in doubt).
  void DoubtUnanswered() REQUIRES(mu_);
  // Sessions: `r` is sent again on the next connection.
  void KeepForResend(Req r) REQUIRES(mu_);

  // A paced sender that fell behind sends at most this much of its schedule at once.
  static constexpr int64_t kMaxCatchUpNs = 100'000'000;

  void SendLoop();
  Status OnFrame(uint8_t type, std::string_view body);
  Status OnReply(std::string_view body, int64_t now);
  // Removes request `id` from the pending ones (only if it is the oldest, when front_only) and
  // gives its txns' room back to the sender.
  std::optional<Req> Take(uint64_t id, bool front_only);
  // After a request was answered: wake the sender; tell the main thread when the quota is done.
  void Released();
  void EndProbe(std::string redirect, Status error);
  // The run has failed (a failed txn, an error reply): every connection stops sending. With
  // follow_leader only this connection stops: it lost its leader (`why`).
  void FailRun(const std::string& why = "");
  // A frame that breaks the protocol: the connection ends with this reason (OnClose notes it).
  Status Violation(const std::string& why) const { return Status::Corruption(Who() + ": " + why); }
  // Reader thread, once: the stream ended.
  void OnClose(const Status& why);
  std::string Who() const { return "connection " + std::to_string(cfg_.index) + " to " + address_; }

  const ConnectionConfig cfg_;
  std::unique_ptr<workloads::Generator> gen_;  // sender thread
  const Window* const window_;
  ErrorLog* const errors_;
  RunSignal* const signal_;
  std::string address_;  // set before the connection's reader starts
  std::unique_ptr<ClientConnection> conn_;
  uint64_t session_ = 0;    // sessions: set by OpenSession, kept across Reconnect
  uint64_t next_id_ = 1;    // the sender's next request id (unique across reconnects)

  Mutex mu_;
  std::condition_variable cv_;  // the sender waits for room; Probe for its answer
  std::deque<Req> pending_ GUARDED_BY(mu_);     // sent, not answered, in request order
  uint64_t inflight_ GUARDED_BY(mu_) = 0;       // txns of pending_ (+ those being encoded)
  bool stop_ GUARDED_BY(mu_) = false;
  bool sender_done_ GUARDED_BY(mu_) = false;    // the quota is sent
  bool sender_exited_ GUARDED_BY(mu_) = false;  // SendLoop returned
  bool closed_ GUARDED_BY(mu_) = false;
  bool broken_ GUARDED_BY(mu_) = false;
  bool probing_ GUARDED_BY(mu_) = false;
  bool lost_leader_ GUARDED_BY(mu_) = false;    // follow_leader, the node no longer leads
  std::string lost_why_ GUARDED_BY(mu_);
  std::string probe_redirect_ GUARDED_BY(mu_);
  Status probe_error_ GUARDED_BY(mu_);
  bool opening_ GUARDED_BY(mu_) = false;        // OpenSession waits for its reply
  Status open_error_ GUARDED_BY(mu_);
  std::deque<Req> resend_ GUARDED_BY(mu_);      // sessions: to send again on the next connection

  std::atomic<uint64_t> sent_{0};  // written by the sender; relaxed
  Counts counts_;
  // Reader thread only (read by others after Finish).
  cluster::proto::TxnReply reply_;
  workloads::LatencyHistogram latency_ns_;
  std::vector<ClientTxnRecord> records_;

  NamedThread sender_;
};

}  // namespace qrstore::client
