// The schema of a cluster config file (configs/cluster-*.yaml): every key a server or a client
// may read. Servers and clients load the same file with this one schema, so a typo fails in
// both alike and the effective config means the same to both.
//   batch.*, threads.*, engine.*     the engine (cluster/engine.h)
//   workload.*, ycsb.*, transfer.*   the workload and the table every node loads (workloads/)
//   replication.*                    backend, compression, mode (replication/factory.h + here)
//   cluster.*                        the node list (cluster/topology.h)
//   server.*                         qrstore-server
//   client.*                         qrstore-client
#pragma once

#include "common/config.h"

namespace qrstore::cluster {

void AddClusterConfigKeys(ConfigSchema* schema);

// replication.* keys a cluster config must not set, because the server derives them from
// cluster.nodes and --node (one list of members, not two): the raft member list, this
// member's id and preferred leader, the role, the group and planner counts, ZooKeeper's
// follower count and follower id.
const std::vector<std::string>& DerivedReplicationKeys();

}  // namespace qrstore::cluster
