// The two halves of a replication group member used by qrstore-repl-node, qrstore-repl-bench
// and the conformance tests, on top of any Replicator:
//
//  - StreamReceiver: follower side. Its own thread ("recv-<name>") keeps a window of
//    ReceiveData calls outstanding per stream (group x planner: batches next .. next+window-1,
//    so a backend with a round trip per read, like ZooKeeper, can fetch in parallel), hands
//    them on in batch order whatever order the callbacks come in, checks
//    every payload against the deterministic generator (replication/tools/payload.h), and
//    appends "group planner batch_id bytes hash" per delivered batch to a deliveries file
//    (flushed per line, so another process may read it while this one runs or after a kill).
//    A payload that fails the check, or a receive error other than kAborted, is counted as an
//    error and that stream stops (anything after it would be a gap). One exception: a
//    kInvalidArgument while this member leads the group means the batch is its own proposal
//    (raft does not hand a leader its own batches back); the stream's deliveries end there
//    without an error. Limitation: a member that leads and later follows again does not
//    resume receiving that stream.
//
//  - Driver: leader side, run by its owner's thread through Poll(). For every stream of a
//    group this member currently leads, it resumes at NextBatchId and keeps `inflight`
//    deterministic payloads in flight until `batches_per_stream` are acknowledged, logging
//    each acknowledged batch ("group planner batch_id") to an acks file. When leadership is
//    lost or a ReplicateData fails, the stream waits for its in-flight batches and resyncs
//    from NextBatchId when (again) leader.
//
// Ownership and order: both hold a Replicator* they do not own. The Replicator must be
// stopped (which fails pending callbacks with kAborted) before a receiver or driver is
// destroyed; both are then safe to destroy. Queues are sized so callbacks never block:
// at most `window` receives and `inflight` replicates per stream are outstanding.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/bounded_queue.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread.h"
#include "replication/replication.h"

namespace qrstore::replication::tools {

class StreamReceiver {
 public:
  // deliveries: may be null; not owned; written only by the receiver thread. window: receives
  // outstanding per stream.
  StreamReceiver(Replicator* replicator, uint32_t groups, uint32_t planners, std::string name, FILE* deliveries,
                 uint32_t window = 16);
  ~StreamReceiver();

  void Start();
  // Joins the thread. Call after the Replicator's Stop (see the header comment). Idempotent.
  void Stop();

  uint64_t delivered() const { return delivered_.load(std::memory_order_relaxed); }
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  std::string first_error() const;
  // Waits until every stream delivered at least n batches; false on timeout or after an error.
  bool WaitDelivered(uint64_t n_per_stream, int64_t timeout_ms);
  // Batches delivered per stream, index group * planners + planner.
  std::vector<uint64_t> PerStream() const;

 private:
  struct Event {
    ReplicateMeta meta;
    Status status;
    SharedBytes bytes;
  };
  struct StreamState {  // receiver thread only
    uint64_t next_deliver = 0;
    uint64_t next_ask = 0;
    bool stopped = false;
    std::map<uint64_t, Event> arrived;  // came back ahead of next_deliver
  };
  void Loop();
  void Ask(size_t stream);
  void Deliver(size_t stream, Event& e);
  void Fail(const std::string& message);

  Replicator* const replicator_;
  const uint32_t groups_, planners_;
  const std::string name_;
  FILE* const deliveries_;
  const uint32_t window_;
  BoundedQueue<Event> events_;
  std::vector<StreamState> streams_;
  NamedThread thread_;
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> errors_{0};
  mutable Mutex mu_;
  std::condition_variable progress_cv_;
  std::vector<uint64_t> next_ GUARDED_BY(mu_);  // copy of next_deliver for other threads
  std::string first_error_ GUARDED_BY(mu_);
};

struct DriverOptions {
  uint32_t groups = 1;
  uint32_t planners = 1;
  size_t payload_bytes = 1024;
  uint32_t inflight = 1;
  uint64_t batches_per_stream = 0;  // 0: unlimited
  FILE* acks = nullptr;             // not owned; may be null
  // Optional gate asked before each new batch (on the Poll thread): false holds issuing back,
  // e.g. while in-process followers of the none backend catch up.
  std::function<bool()> may_issue;
};

class Driver {
 public:
  // on_ack(meta, latency_ns) runs on the Poll thread for every OK acknowledgement.
  using AckHook = std::function<void(const ReplicateMeta& meta, int64_t latency_ns)>;
  Driver(Replicator* replicator, DriverOptions options, AckHook on_ack);

  // Issues what it may, waits up to wait_ms for an acknowledgement, processes every one
  // available, then issues again. Call repeatedly from one thread.
  void Poll(int64_t wait_ms);
  // No new batches from now on (in-flight ones still complete).
  void StopIssuing() { issuing_ = false; }
  uint64_t inflight() const;
  // Every stream has batches_per_stream acknowledged by this member or found below
  // NextBatchId (only meaningful with a limit).
  bool AllStreamsComplete() const;
  uint64_t acked() const { return acked_; }
  uint64_t failed() const { return failed_; }
  std::string last_failure() const { return last_failure_; }

 private:
  struct Ack {
    ReplicateMeta meta;
    Status status;
    int64_t latency_ns;
  };
  struct Stream {
    bool active = false;  // leading and in sync with NextBatchId
    uint64_t next = 0;    // next batch id to issue
    uint64_t inflight = 0;
    uint64_t complete_upto = 0;  // batches known replicated: [0, complete_upto)
  };
  void Issue();
  void Handle(Ack ack);

  Replicator* const replicator_;
  const DriverOptions options_;
  const AckHook on_ack_;
  BoundedQueue<Ack> acks_;
  std::vector<Stream> streams_;
  bool issuing_ = true;
  uint64_t acked_ = 0;
  uint64_t failed_ = 0;
  std::string last_failure_;
};

}  // namespace qrstore::replication::tools
