// Helpers for the in-process RaftReplicator integration tests: free ports, configs, payloads,
// and thread-safe collectors for callbacks (callbacks only record and notify; all assertions
// stay on the test thread).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/rng.h"
#include "replication/raft/raft_replicator.h"

namespace qrstore::replication::raft::testing {

// Ports the kernel considers free right now (bound to 127.0.0.1:0 and released). Another
// process could take one before we listen; the risk is small on a test machine.
inline std::vector<int> FreePorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ports.push_back(ntohs(a.sin_port));
    fds.push_back(fd);
  }
  for (int fd : fds) ::close(fd);
  return ports;
}

// The schema a real binary gets from replication/factory.h, limited to what raft reads.
inline const ConfigSchema& TestSchema() {
  static const ConfigSchema schema = [] {
    ConfigSchema s;
    s.AddInt("replication.groups", 1, 1, 4096, "groups");
    s.AddInt("replication.planners", 1, 1, 1024, "planners");
    s.AddInt("replication.max_payload_bytes", 64ll << 20, 1, 1ll << 32, "max payload");
    AddConfigKeys(&s);
    return s;
  }();
  return schema;
}

inline std::unique_ptr<RaftReplicator> MakeReplicator(const std::vector<int>& ports, int node_id,
                                                      std::vector<std::string> extra = {}) {
  std::string members;
  for (size_t i = 0; i < ports.size(); ++i) members += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(ports[i]);
  std::vector<std::string> overrides = {"replication.raft.members=" + members,
                                        "replication.raft.node_id=" + std::to_string(node_id),
                                        "replication.raft.tick_ms=10",
                                        "replication.raft.election_ticks=50",
                                        "replication.raft.stats_interval_ms=0"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  Result<Config> config = Config::LoadString(TestSchema(), "", overrides);
  if (!config.ok()) return nullptr;
  Result<RaftReplicatorOptions> options = RaftOptionsFromConfig(config.value());
  if (!options.ok()) return nullptr;
  return std::make_unique<RaftReplicator>(std::move(options).value());
}

// Deterministic payload of batch (planner, batch) with `size` bytes.
inline std::string Payload(uint32_t planner, uint64_t batch, size_t size) {
  Rng rng(planner * 1000003ull + batch);
  std::string s(size, '\0');
  for (auto& c : s) c = static_cast<char>(rng.Next());
  return s;
}

// Polls `pred` until true or timeout (integration tests only: real time, real sockets).
inline bool WaitFor(const std::function<bool()>& pred, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// Collects callback outcomes keyed by batch id; the test thread waits for a count. The state
// is shared with the callbacks, so a callback firing late (e.g. kAborted at Stop after a
// failed REQUIRE unwound the test) never touches a destroyed collector.
class Collector {
 public:
  ReplicateCallback ReplicateCb() {
    return [s = state_](const ReplicateMeta& meta, Status st) {
      std::lock_guard<std::mutex> lock(s->mu);
      s->statuses[meta.batch_id] = st;
      s->cv.notify_all();
    };
  }
  ReceiveCallback ReceiveCb() {
    return [s = state_](const ReplicateMeta& meta, Status st, SharedBytes bytes) {
      std::lock_guard<std::mutex> lock(s->mu);
      s->statuses[meta.batch_id] = st;
      s->bytes[meta.batch_id] = std::move(bytes);
      s->order.push_back(meta.batch_id);
      s->cv.notify_all();
    };
  }
  bool WaitCount(size_t n, int timeout_ms) {
    std::unique_lock<std::mutex> lock(state_->mu);
    return state_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                               [&] { return state_->statuses.size() >= n; });
  }
  std::map<uint64_t, Status> statuses() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->statuses;
  }
  std::map<uint64_t, std::string> bytes() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->bytes;
  }
  std::vector<uint64_t> order() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->order;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::map<uint64_t, Status> statuses;
    std::map<uint64_t, std::string> bytes;
    std::vector<uint64_t> order;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace qrstore::replication::raft::testing
