// FakeServer: a small in-process stand-in for qrstore-server's client port, for the client's
// tests (tests only). It speaks cluster/port/protocol.h over StreamNet (nng streams on TCP), applies
// the txns it is sent serially on a ReferenceExecutor loaded with workloads::LoadTable (so the
// read values and fates it reports are the real serial ones), and answers:
//   kTxnRequest    leader: one "batch" per non-empty request, numbered in the order requests are
//                  applied (across connections, under one lock): results carry (batch, planner 0,
//                  index i) and each committed txn's read values; a txn with an unknown op kind or
//                  a key out of range is rejected, as the real server does. Follower: kNotLeader
//                  naming the configured leader.
//   kStatusRequest NodeStatus: role, committed batches, the table's digest, counts, this
//                  process's CPU time, fixed phase means, and the configured follower views.
// It can be told to misbehave (Faults) so tests see the client notice.
//
// Threads: "fake-accept"; per connection "fake-rd-<i>" (reads and decodes frames into a bounded
// queue) and "fake-wr-<i>" (applies, optionally after a delay, and writes replies in order), so
// a slow responder lets requests pile up and tests can observe how many txns a client keeps in
// flight. Stop() shuts every stream down and joins every thread. Observers are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/port/protocol.h"
#include "common/net/stream_net.h"
#include "common/status.h"
#include "common/thread.h"
#include "workloads/reference_executor.h"
#include "workloads/workload.h"

namespace qrstore::testing {

// Counted over non-empty txn requests (a client's empty probe is not counted) in the order the
// responders take them, or over applied txns; -1 = off.
struct Faults {
  int64_t corrupt_read_of_txn = -1;  // flip a byte of the first read value of the k-th committed txn that read
  int64_t flip_fate_of_txn = -1;     // report the k-th applied txn's fate inverted (committed <-> aborted)
  int64_t duplicate_position_of_txn = -1;  // report the k-th applied txn at the previous one's position
  int64_t error_on_request = -1;     // answer request k with kError (its id); not applied
  int64_t unmatched_error_on_request = -1;  // answer request k with kError, request id 0; not applied
  int64_t not_leader_on_request = -1;       // answer request k with kNotLeader; not applied
  int64_t swallow_from_request = -1;        // never answer requests >= k (a hung server)
  bool close_on_accept = false;  // accept, then close at once (status queries see a close)
  bool silent = false;           // read everything, answer nothing
};

enum class FollowerState { kAgrees, kLags, kMismatch };

struct FakeServerOptions {
  std::string node = "n0";
  std::string address;  // host:port to listen on
  workloads::WorkloadOptions workload;
  bool follower = false;           // answer txn requests with kNotLeader
  std::string leader_node;         // ... naming this leader
  std::string leader_address;
  // Follower views a leader reports in its status (applied_batches and agreement derived from
  // the state and the leader's committed batches at the time of the query).
  std::vector<std::pair<std::string, FollowerState>> followers;
  // What its status says it loaded (NodeStatus::loaded); empty: it does not say.
  std::vector<std::pair<std::string, std::string>> loaded;
  int reply_delay_us = 0;          // the responder waits this long before each reply
  Faults faults;
};

class FakeServer {
 public:
  explicit FakeServer(FakeServerOptions options);
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  // Loads the table, listens and starts accepting.
  Status Start();
  void Stop();
  // What its status says it loaded from now on (any thread).
  void SetLoaded(std::vector<std::pair<std::string, std::string>> loaded);

  uint64_t txn_requests() const { return txn_requests_.load(); }   // non-empty ones taken
  uint64_t txns_applied() const;
  uint64_t digest() const;
  // Largest number of txns one connection had sent (read by the server) but not yet answered.
  uint64_t max_inflight_txns() const { return max_inflight_.load(); }
  uint64_t connections() const { return connections_.load(); }

 private:
  struct Conn;
  std::atomic<uint64_t> sessions_{0};  // ids handed out by kOpenSession (no session table: a
                                       // txn sent again is applied again)
  void AcceptLoop();
  void ReadLoop(Conn* c);
  void WriteLoop(Conn* c);
  // The reply frame to one decoded request (apply under apply_mu_); "" = no answer.
  std::string Answer(Conn* c, uint8_t type, const std::string& body);
  std::string AnswerTxns(const cluster::proto::TxnRequest& req);
  cluster::proto::NodeStatus Status_();

  const FakeServerOptions opt_;
  std::vector<std::pair<std::string, std::string>> loaded_;  // guarded by apply_mu_
  std::unique_ptr<net::StreamNet> net_;
  std::unique_ptr<net::StreamListener> listener_;
  std::atomic<bool> stop_{false};
  NamedThread acceptor_;
  std::mutex conns_mu_;
  std::vector<std::unique_ptr<Conn>> conns_;  // guarded by conns_mu_

  mutable std::mutex apply_mu_;
  std::unique_ptr<workloads::ReferenceExecutor> ref_;  // guarded by apply_mu_
  uint64_t batches_ = 0;           // guarded by apply_mu_
  uint64_t applied_ = 0;           // guarded by apply_mu_
  uint64_t committed_with_reads_ = 0;  // guarded by apply_mu_
  uint64_t last_batch_ = 0, last_index_ = 0;  // guarded by apply_mu_: the previous txn's position
  std::string reads_;              // guarded by apply_mu_
  std::atomic<uint64_t> txn_requests_{0};
  std::atomic<uint64_t> max_inflight_{0};
  std::atomic<uint64_t> connections_{0};
};

}  // namespace qrstore::testing
