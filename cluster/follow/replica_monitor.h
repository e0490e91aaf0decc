// Replica agreement: followers report their state digest after every batch they applied; the
// leader compares each report with its own digest of that batch. A mismatch means the replicas
// diverged (a bug: the same slices in the same order must give the same state): it is logged as
// an error naming the follower and the batch, and counted. Follower lag (batches) comes from the
// same reports.
//
//   DigestMonitor (leader): its own digests of recent batches (a ring of
//     server.digest_history_batches) and one view per follower. Reports of batches the leader
//     has not committed yet wait (bounded) until it has; reports older than the ring are not
//     checked (counted as unchecked).
//   DigestReporter (follower): collects (batch, digest) from the pipeline's batch hook and a
//     "report" thread sends them to the leader's client port every server.report_interval_ms,
//     reconnecting with back-off when the leader is unreachable (bounded: beyond max_pending
//     unsent digests the oldest are dropped and counted).
//
// Thread-safety: every method may be called from any thread (one mutex each).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/port/protocol.h"
#include "common/mutex.h"
#include "common/net/stream_net.h"
#include "common/status.h"
#include "common/thread.h"

namespace qrstore::cluster {

class DigestMonitor {
 public:
  DigestMonitor(std::vector<std::string> followers, size_t history);

  // The leader committed `batch` with state `digest` (batch hook; batches in order).
  void RecordOwn(uint64_t batch, uint64_t digest);
  // A follower's report. kInvalidArgument for a node that is not a follower of this partition.
  Status OnReport(const proto::FollowerReport& report);
  void SetConnected(const std::string& node, bool connected);

  // The followers with a report connection open that have not said the leader's end marker
  // reached them (a clean stop waits for them before replication stops), in name order.
  std::vector<std::string> ConnectedNotEnded() const;
  // Views for NodeStatus; `committed_batches` is the leader's count (for lag).
  std::vector<proto::FollowerView> Views(uint64_t committed_batches) const;
  uint64_t mismatches() const;
  uint64_t unchecked() const;

 private:
  struct Follower {
    proto::FollowerView view;
    std::map<uint64_t, uint64_t> ahead;  // reported before the leader committed them
    uint64_t last_batch = UINT64_MAX;    // last batch reported
    bool last_matched = false;
    bool ended = false;                  // it saw the leader's end marker
  };
  // Compares one digest; false when the leader's digest of `batch` is gone.
  void Check(Follower& f, uint64_t batch, uint64_t digest) REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, Follower> followers_ GUARDED_BY(mu_);        // ordered: stable output
  std::vector<std::pair<uint64_t, uint64_t>> ring_ GUARDED_BY(mu_);  // (batch, digest) at batch % size
  uint64_t own_next_ GUARDED_BY(mu_) = 0;                            // batches [0, this) recorded
  uint64_t own_last_digest_ GUARDED_BY(mu_) = 0;
  uint64_t mismatches_ GUARDED_BY(mu_) = 0;
  uint64_t unchecked_ GUARDED_BY(mu_) = 0;
};

class DigestReporter {
 public:
  struct Options {
    std::string node;            // this follower
    std::string leader_address;  // host:client_port ("" = none known yet: wait for SetLeader)
    int64_t interval_ms = 50;
    size_t max_pending = 1 << 16;
  };
  explicit DigestReporter(Options options);
  ~DigestReporter();

  // The pipeline's batch hook calls this (quick: a deque push).
  void RecordApplied(uint64_t batch, uint64_t digest);
  // The leader's end marker arrived (true), or a batch after it did (false: the group went on
  // under a new leader); the next report says so.
  void MarkEnded(bool ended);
  // The group's leader changed: reports go to `address` from now on (the connection to the
  // old one is dropped; "" = none known: wait). Digests not yet sent go to the new leader.
  void SetLeader(const std::string& address);
  Status Start();
  // Sends what is pending once more (bounded by `timeout_ms`), then stops the thread.
  void Stop(int64_t timeout_ms);
  uint64_t dropped() const;

 private:
  void Loop();
  // Sends the pending digests (and the end flag once); with `always`, a report even when
  // there is nothing new (a new connection: the leader learns where this follower is).
  bool SendPending(net::StreamConn* conn, bool always);

  const Options opt_;
  std::unique_ptr<net::StreamNet> net_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::string leader_address_ GUARDED_BY(mu_);
  bool leader_changed_ GUARDED_BY(mu_) = false;      // drop the connection to the old one
  std::deque<proto::BatchDigest> pending_ GUARDED_BY(mu_);
  uint64_t applied_ GUARDED_BY(mu_) = 0;
  bool ended_ GUARDED_BY(mu_) = false;
  bool ended_sent_ GUARDED_BY(mu_) = false;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  bool done_ GUARDED_BY(mu_) = false;                // the thread finished
  int64_t flush_deadline_ns_ GUARDED_BY(mu_) = 0;    // Stop's last send
  net::StreamConn* conn_ GUARDED_BY(mu_) = nullptr;  // to Shutdown a blocked write
  NamedThread thread_;
};

}  // namespace qrstore::cluster
