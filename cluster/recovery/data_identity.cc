#include "cluster/recovery/data_identity.h"

#include <map>

#include "cluster/config/cluster_config.h"
#include "cluster/recovery/checkpointer.h"
#include "common/file.h"

namespace qrstore::cluster {
namespace {

constexpr const char* kHeader = "qrstore data identity v1";
constexpr size_t kMaxIdentityBytes = 1 << 20;

}  // namespace

DataIdentity NodeDataIdentity(const Config& config, const Topology& topo, const NodeInfo& me) {
  DataIdentity id;
  id.emplace_back("cluster.name", topo.name());
  std::string nodes;
  for (const NodeInfo& n : topo.nodes()) {
    nodes += (nodes.empty() ? "" : ",") + n.name + ":p" + std::to_string(n.partition) + "r" + std::to_string(n.row);
  }
  id.emplace_back("cluster.nodes", nodes);
  id.emplace_back("node", me.name);
  id.emplace_back("node.partition", std::to_string(me.partition));
  id.emplace_back("node.row", std::to_string(me.row));
  const std::string kind = config.GetString("workload.kind");
  for (const auto& [key, value] : TableKeys(config)) {
    // Only the keys of this workload shape its table (transfer.* mean nothing to a YCSB table).
    const bool other_kind = (key.rfind("ycsb.", 0) == 0 && kind != "ycsb") ||
                            (key.rfind("transfer.", 0) == 0 && kind != "transfer");
    if (!other_kind) id.emplace_back(key, value);
  }
  id.emplace_back("threads.planners", std::to_string(config.GetInt("threads.planners")));
  id.emplace_back("replication.backend", config.GetString("replication.backend"));
  // A log of inputs is not a log of planned slices (docs/replication-points.md).
  id.emplace_back("replication.point", config.GetString("replication.point"));
  return id;
}

std::vector<std::string> NodeDataFolders(const Config& config, const std::string& node) {
  std::vector<std::string> out;
  if (std::string d = NodeCheckpointDir(config, node); !d.empty()) out.push_back(std::move(d));
  if (config.GetString("replication.backend") == "raft" && config.GetString("replication.raft.log") == "disk") {
    if (const std::string& d = config.GetString("replication.raft.dir"); !d.empty()) out.push_back(d + "/" + node);
  }
  return out;
}

std::string EncodeDataIdentity(const DataIdentity& id) {
  std::string out = std::string(kHeader) + "\n";
  for (const auto& [key, value] : id) out += key + "=" + value + "\n";
  return out;
}

Result<DataIdentity> DecodeDataIdentity(const std::string& text) {
  DataIdentity id;
  size_t pos = 0;
  bool header = true;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) return Status::Corruption("the last line is not ended");
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (header) {
      if (line != kHeader) return Status::Corruption("does not start with '" + std::string(kHeader) + "'");
      header = false;
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) return Status::Corruption("line '" + line + "' is not key=value");
    id.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  if (header) return Status::Corruption("empty");
  return id;
}

Status CheckDataIdentity(const std::vector<std::string>& folders, const DataIdentity& want, const Config& config,
                         const std::string& node, bool record, std::vector<std::string>* without) {
  std::map<std::string, std::string> wanted(want.begin(), want.end());
  for (const std::string& folder : folders) {
    const std::string path = folder + "/" + kIdentityFileName;
    Result<std::string> text = file::ReadFile(path, kMaxIdentityBytes);
    if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
      if (record) {
        QR_RETURN_IF_ERROR(file::MakeDirs(folder));
        QR_RETURN_IF_ERROR(file::WriteFileAtomic(path, EncodeDataIdentity(want)));
      }
      if (without != nullptr) without->push_back(folder);
      continue;
    }
    if (!text.ok()) return text.status();
    Result<DataIdentity> had = DecodeDataIdentity(text.value());
    if (!had.ok()) {
      return Status::InvalidArgument(path + ": not a data identity file (" + had.status().message() +
                                     "): restore it, or start anew with `cluster.sh up CONFIG --fresh` (it deletes "
                                     "the cluster's data)");
    }
    std::string differ, use;
    for (const auto& [key, value] : had.value()) {
      auto it = wanted.find(key);
      const std::string mine = it == wanted.end() ? std::string("(not recorded by this version)") : it->second;
      if (mine == value) continue;
      differ += "\n  " + key + ": " + value + " in the data, " + mine + " in the config";
      // The ones a --key=value can set (the resolved key space only where the config sets it).
      const bool settable = key != "cluster.nodes" && key.rfind("node", 0) != 0 && key != "cluster.name" &&
                            (key != "engine.key_space" || config.IsSet(key));
      if (settable) use += " --" + key + "=" + value;
    }
    for (const auto& [key, value] : want) {
      bool found = false;
      for (const auto& kv : had.value()) found = found || kv.first == key;
      // Data recorded before replication.point existed replicated planned slices.
      if (!found && key == "replication.point" && value == "plan") continue;
      if (!found) differ += "\n  " + key + ": not recorded in the data, " + value + " in the config";
    }
    if (!differ.empty()) {
      return Status::InvalidArgument(
          "node " + node + ": its data in " + folder + " was made with another config (" + path + "):" + differ +
          "\nStart it with the data's values" + (use.empty() ? std::string(" (the config that made it)") : " (" + use.substr(1) + ")") +
          " (scripts/cluster.sh up uses the overrides a cluster's data was made with when given none), or start "
          "anew with `scripts/cluster.sh up CONFIG --fresh`, which deletes the cluster's data");
    }
  }
  return Status::Ok();
}

}  // namespace qrstore::cluster
