// Test harness of the conformance suite: builds a replication group of one backend (the
// binary's QRSTORE_CONFORMANCE_BACKEND: none | raft | zookeeper) through the real factory,
// with everything a backend needs on 127.0.0.1 (free ports for raft; a ZooKeeper server from
// $QRSTORE_ZK_HOSTS, or one started with scripts/zk-server.sh if that is unset: a server
// that cannot be had is a test FAILURE, never a skip), and checks deliveries files.
// Used from the Catch2 test thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "replication/replication.h"

namespace qrstore::replication::conformance {

std::string Backend();

// Connect string of a ZooKeeper server for this test binary (started once on first use and
// stopped at exit when the environment did not provide one). Error if none can be had.
Result<std::string> ZkHosts();

// A group of `members` members (for zookeeper, `extra` may set replication.zookeeper.hosts,
// e.g. to an ensemble; otherwise ZkHosts() is used) (member 0 leads: by config for none/zookeeper, as the
// preferred leader for raft). Extra members created later with index >= members are
// followers (none/zookeeper only; raft membership is fixed).
class GroupSpec {
 public:
  GroupSpec(uint32_t members, uint32_t groups, uint32_t planners, std::string compression = "none",
            std::vector<std::string> extra = {});
  // Config overrides for member i (also usable on a qrstore-repl-node command line).
  std::vector<std::string> Overrides(uint32_t member) const;
  Result<std::unique_ptr<Replicator>> Create(uint32_t member) const;
  const ConfigSchema& schema() const { return schema_; }
  uint32_t groups() const { return groups_; }
  uint32_t planners() const { return planners_; }

 private:
  ConfigSchema schema_;
  uint32_t members_, groups_, planners_;
  std::vector<std::string> common_;
  bool zk_hosts_from_env_ = false;  // zookeeper: hosts from ZkHosts(), not from `extra`
};

// Waits until r leads every group (bounded); false on timeout.
bool WaitLeader(Replicator* r, uint32_t groups, int64_t timeout_ms);

// One parsed line of a deliveries file: "group planner batch bytes hash".
struct Delivery {
  uint32_t group = 0, planner = 0;
  uint64_t batch = 0, bytes = 0, hash = 0;
};
std::vector<Delivery> ReadDeliveries(const std::string& path);
// "" when, for every stream, the lines of `d` are batches [0, n) in order, each with the size
// `bytes_of(group, planner, batch)` and the hash of the generated payload; else what is wrong.
std::string CheckDeliveries(const std::vector<Delivery>& d, uint32_t groups, uint32_t planners,
                            const std::vector<uint64_t>& n_per_stream, size_t payload_bytes);

}  // namespace qrstore::replication::conformance
