// The replication.zookeeper.* config keys and their reading into ZkOptions (declared in
// zk_replicator.h): plain functions, no state, no threads.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator.h"

namespace qrstore::replication::zookeeper {


Result<ZkOptions> OptionsFromConfig(const Config& config) {
  ZkOptions o;
  std::vector<std::string> errors;
  o.hosts = config.GetString("replication.zookeeper.hosts");
  if (o.hosts.empty()) {
    const char* env = std::getenv("QRSTORE_ZK_HOSTS");
    if (env != nullptr) o.hosts = env;
  }
  if (o.hosts.empty()) {
    errors.push_back(
        "replication.zookeeper.hosts: empty and $QRSTORE_ZK_HOSTS unset (start a server: scripts/zk-server.sh "
        "start DIR)");
  } else if (o.hosts.find(':') == std::string::npos) {
    errors.push_back("replication.zookeeper.hosts: '" + o.hosts + "' is not a host:port[,host:port] list");
  }
  o.root = config.GetString("replication.zookeeper.root");
  if (Status s = ValidateRoot(o.root); !s.ok()) errors.push_back(s.message());
  const std::string& role = config.GetString("replication.role");
  if (role == "leader") {
    o.leader = true;
  } else if (role == "follower") {
    o.leader = false;
  } else {
    errors.push_back("replication.role: must be leader or follower for the zookeeper backend (got '" + role + "')");
  }
  int64_t groups = config.GetInt("replication.groups");
  int64_t planners = config.GetInt("replication.planners");
  if (groups < 1 || groups > 65536) errors.push_back("replication.groups: must be in [1, 65536]");
  if (planners < 1 || planners > 65536) errors.push_back("replication.planners: must be in [1, 65536]");
  if (groups * planners > 100000) {
    errors.push_back("replication.groups x replication.planners: at most 100000 streams for the zookeeper backend");
  }
  o.groups = static_cast<uint32_t>(std::clamp<int64_t>(groups, 1, 65536));
  o.planners = static_cast<uint32_t>(std::clamp<int64_t>(planners, 1, 65536));
  o.session_timeout_ms = static_cast<int>(config.GetInt("replication.zookeeper.session_timeout_ms"));
  o.connect_timeout_ms = static_cast<int>(config.GetInt("replication.zookeeper.connect_timeout_ms"));
  o.chunk_bytes = static_cast<uint64_t>(config.GetInt("replication.zookeeper.chunk_bytes"));
  o.max_inflight = static_cast<int>(config.GetInt("replication.zookeeper.max_inflight"));
  o.max_inflight_bytes = static_cast<uint64_t>(config.GetInt("replication.zookeeper.max_inflight_bytes"));
  o.op_deadline_ms = static_cast<int>(config.GetInt("replication.zookeeper.op_deadline_ms"));
  o.followers = static_cast<int>(config.GetInt("replication.zookeeper.followers"));
  o.follower_id = config.GetString("replication.zookeeper.follower_id");
  o.election = config.GetBool("replication.zookeeper.election");
  if (!o.follower_id.empty()) {
    if (Status s = ValidateFollowerId(o.follower_id); !s.ok()) errors.push_back(s.message());
  }
  o.cleanup_interval_ms = static_cast<int>(config.GetInt("replication.zookeeper.cleanup_interval_ms"));
  o.retain_bytes = static_cast<uint64_t>(config.GetInt("replication.zookeeper.retain_bytes"));
  o.poll_ms = static_cast<int>(config.GetInt("replication.zookeeper.poll_ms"));
  o.progress_interval_ms = static_cast<int>(config.GetInt("replication.zookeeper.progress_interval_ms"));
  if (!errors.empty()) {
    std::string msg;
    for (const auto& e : errors) msg += (msg.empty() ? "" : "; ") + e;
    return Status::InvalidArgument(msg);
  }
  return o;
}

}  // namespace qrstore::replication::zookeeper
