// Topology: the cluster's nodes as the config lists them once (cluster.nodes), validated, and
// everything derived from that list: who leads each partition, the members of each
// replication group, which node a --node name means. Servers, clients, scripts and the
// replication backends all read the node list from here, so there is no second list to keep
// in step.
//
// Shape (the paper's figure 2): node (partition p, row r). Row 0 holds the initial leaders,
// rows 1..rf the followers; the nodes of one partition form its replication group; the nodes of
// one row form a cluster instance (with P > 1 a partitioned row: docs/partitioned-rows.md).
//
// Immutable after FromConfig; safe to share between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "storage/key_map.h"

namespace qrstore::cluster {

struct NodeInfo {
  std::string name;
  std::string host;
  uint16_t client_port = 0;
  uint16_t peer_port = 0;
  uint32_t partition = 0;
  uint32_t row = 0;
  uint16_t row_port = 0;  // 0: unset (a row without followers uses peer_port)
  uint32_t index = 0;  // position in cluster.nodes (for error messages: cluster.nodes[index])

  std::string client_address() const { return host + ":" + std::to_string(client_port); }
  std::string peer_address() const { return host + ":" + std::to_string(peer_port); }
  // Where its row peers reach it in a partitioned row.
  std::string row_address() const { return host + ":" + std::to_string(row_port != 0 ? row_port : peer_port); }
  bool is_leader_row() const { return row == 0; }
};

class Topology {
 public:
  // Adds cluster.name and cluster.nodes (a table: name, host, client_port, peer_port,
  // partition, row).
  static void AddConfigKeys(ConfigSchema* schema);
  // Validates cluster.nodes; every violation is listed, each naming its key
  // (cluster.nodes[i].column): no nodes, bad or duplicate names, duplicate addresses, a
  // partition or row numbering with holes, a partition without a row-0 leader, rows of
  // different sizes.
  static Result<Topology> FromConfig(const Config& config);

  const std::string& name() const { return name_; }
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  uint32_t partitions() const { return partitions_; }
  uint32_t rows() const { return rows_; }  // rf + 1
  uint32_t replication_factor() const { return rows_ - 1; }

  // The node called `name`, or kNotFound listing the known names.
  Result<const NodeInfo*> Find(const std::string& name) const;
  // Node (partition, row); both must exist (checked).
  const NodeInfo& At(uint32_t partition, uint32_t row) const;
  const NodeInfo& Leader(uint32_t partition) const { return At(partition, 0); }
  // The replication group of `partition`: its nodes by row (row 0 first).
  std::vector<const NodeInfo*> Group(uint32_t partition) const;
  // Names this cluster in its checkpoints (another cluster's are refused): a hash of
  // cluster.name, the partition count and the node names in cluster.nodes order; not of hosts
  // or ports (a cluster moved to other ports is the same cluster).
  uint64_t ClusterId() const;

 private:
  std::string name_;
  std::vector<NodeInfo> nodes_;
  std::vector<std::vector<uint32_t>> grid_;  // [partition][row] -> index in nodes_
  uint32_t partitions_ = 0;
  uint32_t rows_ = 0;
};

// The key -> partition mapping that servers, clients and workload generators share (nothing
// else decides where a key lives): engine.range_function's kind (hash or contiguous ranges of
// engine.key_space). With more than one partition in cluster.nodes, their count; engine.partitions
// must then be left unset or agree (kInvalidArgument naming it). A one-partition cluster keeps
// engine.partitions, which only shapes the workload's draws there.
Result<storage::KeyMapper> PartitionMapFor(const Config& config, const Topology& topo);

}  // namespace qrstore::cluster
