// The closed loop of qrstore-client: one Driver per connection keeps at most `outstanding` txns
// in flight in requests of `per_request` txns, drawn from its own deterministic generator, and
// accounts every answer into the shared Totals (counts, the measured window's latency
// histogram, and for --verify one VerifyRecord per txn).
//
// Threads: a Driver's sending loop runs on its "cli-send-<i>" thread, its answers arrive on the
// connection's reader thread ("cli-recv-<i>"); Totals is shared by every driver under its mutex.
// Memory: the pending map (bounded by outstanding / per_request), and 40 bytes per txn only with
// --verify (capped by client.verify_max_txns).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/client.h"
#include "cluster/protocol.h"
#include "common/hash.h"
#include "common/status.h"
#include "common/thread.h"
#include "workloads/latency_histogram.h"
#include "workloads/workload.h"

namespace qrstore::bench {

// Connection c's generator seed: connection 0 runs exactly the seed's sequence.
inline uint64_t ConnSeed(uint64_t seed, uint32_t c) { return c == 0 ? seed : Mix64(seed ^ (0x9e3779b97f4a7c15ULL * c)); }

// What --verify keeps of one txn (40 bytes).
struct VerifyRecord {
  uint64_t seq = 0;
  uint64_t batch = 0;
  uint64_t reads_hash = 0;
  uint32_t planner = 0;
  uint32_t index = 0;
  uint16_t conn = 0;
  uint8_t code = 0;
};

// Totals over the whole run and over the measured window (shared by every connection).
struct Totals {
  std::mutex mu;
  // Set on the first failed txn or error reply: the drivers stop sending (the run has failed;
  // hammering a node that refuses work only multiplies the errors).
  std::atomic<bool> stop_sending{false};
  uint64_t committed = 0, aborted = 0, rejected = 0, failed = 0, errors = 0, results = 0;
  uint64_t accounted = 0;  // txns answered: results, plus the txns of requests answered by an error
  uint64_t max_acked_batch = 0;  // the highest batch of a committed or aborted result (+1; 0: none)
  uint64_t w_committed = 0, w_aborted = 0, w_results = 0;  // received inside the window
  uint64_t last_committed_report = 0;
  workloads::LatencyHistogram latency_ns;  // committed txns received inside the window
  std::vector<std::string> first_errors;
  std::vector<VerifyRecord> records;
  bool keep_records = false;
  uint64_t verify_cap = 0;
  bool verify_overflow = false;
  void Note(const std::string& e) {
    if (first_errors.size() < 5) first_errors.push_back(e);
  }
};

struct Window {
  std::atomic<int64_t> start_ns{INT64_MAX};
  std::atomic<int64_t> end_ns{INT64_MAX};
  bool In(int64_t t) const { return t >= start_ns.load(std::memory_order_relaxed) && t < end_ns.load(std::memory_order_relaxed); }
};

// One connection and its closed loop.
class Driver {
 public:
  Driver(uint32_t index, std::unique_ptr<workloads::Generator> gen, uint64_t quota, uint64_t outstanding,
         uint32_t per_request, Totals* totals, Window* window)
      : index_(index), gen_(std::move(gen)), quota_(quota), outstanding_(outstanding), per_request_(per_request),
        totals_(totals), window_(window) {}

  Status Connect(const std::string& address, int timeout_ms);

  // Sends an empty request: the answer says whether this node takes transactions. Returns the
  // leader's address on kNotLeader, "" when it does.
  Result<std::string> Probe(int timeout_ms);

  void Start() {
    thread_ = NamedThread("cli-send-" + std::to_string(index_), [this] { Loop(); });
  }
  void StopSending() {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  // Waits (bounded) until every request sent has its answer.
  bool Drain(int64_t deadline_ns);
  void Close() {
    if (conn_) conn_->Close();
  }
  uint64_t sent() const { return sent_.load(); }
  uint64_t inflight() {
    std::lock_guard<std::mutex> lk(mu_);
    return inflight_;
  }
  Status conn_status() const { return conn_ ? conn_->status() : Status::Ok(); }
  bool broken() const { return conn_ && !conn_->open(); }

 private:
  struct Req {
    int64_t send_ns = 0;
    uint64_t first_seq = 0;
    uint32_t count = 0;
  };

  void Loop();

  void OnFrame(uint8_t type, std::string_view body);

  void Account(const Req& req, int64_t now);

  void Broken(const std::string& why);

  const uint32_t index_;
  std::unique_ptr<workloads::Generator> gen_;
  const uint64_t quota_;
  const uint64_t outstanding_;
  const uint32_t per_request_;
  Totals* const totals_;
  Window* const window_;
  std::unique_ptr<cluster::ClientConnection> conn_;
  cluster::proto::TxnReply reply_;  // reader thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Req> pending_;  // guarded by mu_
  uint64_t inflight_ = 0;            // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  std::string redirect_;             // guarded by mu_
  std::atomic<uint64_t> sent_{0};
  NamedThread thread_;
};


// --verify (a fresh cluster, one client): sorts the records by planned position and replays each
// connection's generated txns in that order on the serial reference executor. Every txn must
// have a position of its own, in its connection's send order; every committed one must commit
// serially having read the same values, every aborted one abort; and the reference's final
// digest must equal the leader's (when known). Returns a summary, or the first violation.
Result<std::string> VerifyPlannedOrder(const workloads::WorkloadOptions& options, uint64_t seed, uint32_t conns,
                                       std::vector<VerifyRecord> records, uint64_t sent, bool overflow,
                                       std::optional<uint64_t> leader_digest);

}  // namespace qrstore::bench
