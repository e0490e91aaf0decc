// What qrstore-client asks a cluster's nodes over their status requests (client/client.h
// QueryStatuses): every node's status, the live leader of a partition, the --status table, and
// the table the servers loaded. Each call asks the nodes in parallel, within one time-out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cluster/config/topology.h"
#include "cluster/port/protocol.h"
#include "common/config.h"
#include "common/status.h"

namespace qrstore::client {

// Every node's status (parallel); a node that does not answer is missing from the map (and,
// with `errors`, named there with why).
std::map<std::string, cluster::proto::NodeStatus> AllStatus(const cluster::Topology& topo, int timeout_ms,
                                                            std::vector<std::string>* errors = nullptr);
// Of `group`'s members, whose statuses `results` are (in the same order), the one that says it
// leads and serves; when several say so (an old leader resumed after a pause has not yet learned
// it was deposed) the highest term wins. nullptr: none.
const cluster::NodeInfo* ServingLeader(const std::vector<const cluster::NodeInfo*>& group,
                                       const std::vector<Result<cluster::proto::NodeStatus>>& results);
// The node of partition `partition` that leads it now as its members say: the one that says it
// leads and serves, else the one the answering members name; nullptr when nobody names one (an
// election under way, or nobody answers).
const cluster::NodeInfo* NamedLeader(const cluster::Topology& topo, uint32_t partition, int timeout_ms);
// NamedLeader, else the config's row 0 (a fresh cluster's leader).
const cluster::NodeInfo& LiveLeader(const cluster::Topology& topo, uint32_t partition, int timeout_ms);
// While some member of `partition` answers and none leads and serves (a group just started or
// restarted, still electing), waits for one, up to wait_ms, saying so once. Returns at once when
// no member answers (the cluster is down: the caller fails naming it).
void WaitForServingLeader(const cluster::Topology& topo, uint32_t partition, int timeout_ms, int64_t wait_ms);
// --status: one line per node on stdout; the exit status (0: every node answered).
int StatusMain(const cluster::Topology& topo, int timeout_ms);
// The table the servers loaded wins over this client's copy of the config (see the .cc);
// kInvalidArgument when the user chose a table key the servers do not hold.
Status FollowTheServers(const cluster::Topology& topo, int timeout_ms, const std::map<std::string, std::string>& chosen,
                        Config* config);

}  // namespace qrstore::client
