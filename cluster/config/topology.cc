#include "cluster/config/topology.h"

#include <map>
#include <set>

#include "common/hash.h"
#include "workloads/workload.h"

namespace qrstore::cluster {

void Topology::AddConfigKeys(ConfigSchema* schema) {
  schema->AddString("cluster.name", "qrstore", "the cluster's name (logs, run folders, ZooKeeper paths)");
  schema->AddTable("cluster.nodes", "every node of the cluster, once: one map per node",
                   {StringColumn("name", "", "unique node name (letters, digits, - and _)", true),
                    StringColumn("host", "", "host name or address the node listens on", true),
                    IntColumn("client_port", 0, 1, 65535, "port for clients (and follower reports)", true),
                    IntColumn("peer_port", 0, 1, 65535, "port for replication peers (raft)", true),
                    IntColumn("partition", 0, 0, 4095, "the partition the node holds"),
                    IntColumn("row_port", 0, 0, 65535,
                              "port for the node's row peers in a partitioned row (0: peer_port, which a row "
                              "without followers does not use for replication); needed with followers"),
                    IntColumn("row", 0, 0, 255, "0 = the partition's initial leader, 1..rf = its followers", true)});
}

Result<Topology> Topology::FromConfig(const Config& config) {
  Topology t;
  t.name_ = config.GetString("cluster.name");
  std::vector<std::string> errors;
  const auto& rows = config.GetTable("cluster.nodes");
  if (rows.empty()) errors.push_back("cluster.nodes: no nodes (list every node once: name, host, client_port, peer_port, row)");
  std::map<std::string, uint32_t> by_name;
  std::map<std::string, std::string> by_address;  // host:port -> key that uses it
  for (uint32_t i = 0; i < rows.size(); ++i) {
    const ConfigRow& r = rows[i];
    const std::string key = "cluster.nodes[" + std::to_string(i) + "]";
    NodeInfo n;
    n.index = i;
    n.name = r.GetString("name");
    n.host = r.GetString("host");
    n.client_port = static_cast<uint16_t>(r.GetInt("client_port"));
    n.peer_port = static_cast<uint16_t>(r.GetInt("peer_port"));
    n.partition = static_cast<uint32_t>(r.GetInt("partition"));
    n.row_port = static_cast<uint16_t>(r.GetInt("row_port"));
    n.row = static_cast<uint32_t>(r.GetInt("row"));
    bool name_ok = !n.name.empty() && n.name.size() <= 64;
    for (char c : n.name) name_ok &= (std::isalnum(static_cast<unsigned char>(c)) != 0) || c == '-' || c == '_';
    if (!name_ok) errors.push_back(key + ".name: '" + n.name + "' must be 1-64 letters, digits, - or _");
    if (n.host.empty()) errors.push_back(key + ".host: empty");
    if (!by_name.emplace(n.name, i).second) {
      errors.push_back(key + ".name: '" + n.name + "' is also cluster.nodes[" + std::to_string(by_name[n.name]) + "].name");
    }
    for (const auto& [col, port] : {std::pair<const char*, uint16_t>{"client_port", n.client_port},
                                    {"peer_port", n.peer_port}, {"row_port", n.row_port}}) {
      if (port == 0) continue;  // row_port unset
      const std::string addr = n.host + ":" + std::to_string(port);
      auto [it, fresh] = by_address.emplace(addr, key + "." + col);
      if (!fresh) errors.push_back(key + "." + col + ": " + addr + " is also used by " + it->second);
    }
    t.nodes_.push_back(std::move(n));
  }
  // Grid: partitions 0..P-1, rows 0..R-1, exactly one node in every cell.
  uint32_t max_p = 0, max_r = 0;
  for (const NodeInfo& n : t.nodes_) {
    max_p = std::max(max_p, n.partition);
    max_r = std::max(max_r, n.row);
  }
  if (!t.nodes_.empty()) {
    t.partitions_ = max_p + 1;
    t.rows_ = max_r + 1;
    t.grid_.assign(t.partitions_, std::vector<uint32_t>(t.rows_, UINT32_MAX));
    for (const NodeInfo& n : t.nodes_) {
      uint32_t& cell = t.grid_[n.partition][n.row];
      if (cell != UINT32_MAX) {
        errors.push_back("cluster.nodes[" + std::to_string(n.index) + "]: partition " + std::to_string(n.partition) +
                         " row " + std::to_string(n.row) + " is also cluster.nodes[" + std::to_string(cell) +
                         "] (one node per partition and row)");
      } else {
        cell = n.index;
      }
    }
    for (uint32_t p = 0; p < t.partitions_; ++p) {
      for (uint32_t r = 0; r < t.rows_; ++r) {
        if (t.grid_[p][r] != UINT32_MAX) continue;
        if (r == 0) {
          errors.push_back("cluster.nodes: partition " + std::to_string(p) + " has no leader (no node with row 0)");
        } else {
          errors.push_back("cluster.nodes: partition " + std::to_string(p) + " has no node in row " + std::to_string(r) +
                           " (rows must be 0..rf in every partition)");
        }
      }
    }
  }
  if (t.partitions_ > 1 && t.rows_ > 1) {
    // Raft listens on peer_port; the row transport needs a port of its own.
    for (const NodeInfo& n : t.nodes_) {
      if (n.row_port == 0) {
        errors.push_back("cluster.nodes[" + std::to_string(n.index) + "].row_port: a partitioned row with followers needs "
                         "a port for the row's messages apart from peer_port (replication)");
      }
    }
  }
  if (!errors.empty()) {
    std::string msg = "invalid cluster config:";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::InvalidArgument(msg);
  }
  return t;
}

Result<const NodeInfo*> Topology::Find(const std::string& name) const {
  for (const NodeInfo& n : nodes_) {
    if (n.name == name) return &n;
  }
  std::string known;
  for (const NodeInfo& n : nodes_) known += (known.empty() ? "" : ", ") + n.name;
  return Status::NotFound("--node " + name + ": not in cluster.nodes (nodes: " + known + ")");
}

const NodeInfo& Topology::At(uint32_t partition, uint32_t row) const {
  QR_CHECK(partition < partitions_ && row < rows_, "no node at partition %u row %u", partition, row);
  return nodes_[grid_[partition][row]];
}

std::vector<const NodeInfo*> Topology::Group(uint32_t partition) const {
  std::vector<const NodeInfo*> out;
  for (uint32_t r = 0; r < rows_; ++r) out.push_back(&At(partition, r));
  return out;
}

Result<storage::KeyMapper> PartitionMapFor(const Config& config, const Topology& topo) {
  const bool range_fn = config.GetString("engine.range_function") == "range";
  auto partitions = static_cast<uint32_t>(config.GetInt("engine.partitions"));
  const uint64_t key_space = workloads::EngineKeySpace(config);
  if (topo.partitions() > 1) {
    if (config.IsSet("engine.partitions") && partitions != topo.partitions()) {
      return Status::InvalidArgument("engine.partitions (" + std::to_string(partitions) + ") disagrees with cluster.nodes (" +
                                     std::to_string(topo.partitions()) + " partitions): remove it, it is derived");
    }
    partitions = topo.partitions();
  }
  if (range_fn && key_space < partitions) {
    return Status::InvalidArgument("engine.key_space (" + std::to_string(key_space) +
                                   (config.GetInt("engine.key_space") > 0 ? "" : ", the workload's key count") +
                                   ") must be >= the partition count (" + std::to_string(partitions) +
                                   ") with engine.range_function=range");
  }
  return storage::KeyMapper(range_fn ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash, partitions,
                            key_space);
}

uint64_t Topology::ClusterId() const {
  std::string id = name_ + "/" + std::to_string(partitions_);
  for (const NodeInfo& n : nodes_) id += "," + n.name;
  return Hash64(id);
}

}  // namespace qrstore::cluster
