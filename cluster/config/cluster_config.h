// The schema of a cluster config file (configs/cluster-*.yaml): every key a server or a client
// may read. Servers and clients load the same file with this one schema, so a typo fails in
// both alike and the effective config means the same to both.
//   batch.*, threads.*, engine.*     the engine (engine/engine.h)
//   workload.*, ycsb.*, transfer.*   the workload and the table every node loads (workloads/)
//   replication.*                    backend, compression, mode (replication/factory.h + here)
//   cluster.*                        the node list (cluster/config/topology.h)
//   server.*                         qrstore-server
//   client.*                         qrstore-client
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/config.h"

namespace qrstore::cluster {

void AddClusterConfigKeys(ConfigSchema* schema);

// replication.point (docs/replication-points.md): what a leader replicates.
enum class ReplicationPoint {
  kPlan,    // "plan": the planned slices (RP2)
  kInput,   // "input": each slice's sequenced txns; followers plan them (RP1)
  kWrites,  // "writes": each batch's last images and fates; followers install them (RP3)
};
// The point a config's replication.point names (the schema admits only these three words).
ReplicationPoint ReplicationPointOf(const Config& config);
// Its config word: "plan", "input" or "writes".
const char* ReplicationPointName(ReplicationPoint point);

// replication.* keys a cluster config must not set, because the server derives them from
// cluster.nodes and --node (one list of members, not two): the raft member list, this
// member's id and preferred leader, the role, the group and planner counts, ZooKeeper's
// follower count and follower id.
const std::vector<std::string>& DerivedReplicationKeys();

// The keys that shape the table a server loads and the keys a client may send it, with their
// effective values as text (engine.key_space resolved: workloads::EngineKeySpace), in a fixed
// order: workload.kind, ycsb.records, ycsb.fields, ycsb.field_bytes, transfer.accounts,
// transfer.initial_balance, engine.range_function, engine.key_space. A server reports them in
// its status (NodeStatus::loaded), so a client generates for what the servers hold rather than
// for what its own copy of the config file says.
std::vector<std::pair<std::string, std::string>> TableKeys(const Config& config);

}  // namespace qrstore::cluster
