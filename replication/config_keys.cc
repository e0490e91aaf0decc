// The replication.* config keys of every backend built into this binary: the schema alone, so a
// program that only reads configs (the client) links no backend.
#include "replication/config_keys.h"

#include "replication/compression.h"
#include "replication/none/none_replicator.h"
#if QRSTORE_HAVE_RAFT
#include "replication/raft/raft_replicator.h"
#endif
#if QRSTORE_HAVE_ZOOKEEPER
#include "replication/zookeeper/zk_replicator.h"
#endif

namespace qrstore::replication {
namespace none {

void AddConfigKeys(ConfigSchema* schema) {
  schema->AddString("replication.none.hub", "default",
                    "none backend: in-process hub name; replicators of one process with the same hub share streams");
  schema->AddInt("replication.none.retain_batches", 1024, 0, 1 << 20,
                 "none backend: payloads kept per stream for ReceiveData (0: keep none, nobody reads)");
}

}  // namespace none

void AddConfigKeys(ConfigSchema* schema) {
  schema->AddString("replication.backend", "none", "replication backend", {"none", "raft", "zookeeper"});
  schema->AddString("replication.compression", "none", "payload compression (done before the backend sees the bytes)",
                    {"none", "snappy"});
  schema->AddString("replication.role", "leader",
                    "this member's role for none/zookeeper (raft elects its leaders)", {"leader", "follower"});
  schema->AddInt("replication.groups", 1, 1, 4096, "replication groups (= partitions) this member hosts");
  schema->AddInt("replication.planners", 1, 1, 1024, "planner streams per group");
  schema->AddInt("replication.max_payload_bytes", 64ll << 20, 1, static_cast<int64_t>(kFrameMaxRawBytes),
                 "largest payload accepted by ReplicateData (and by a receiver, before allocating)");
  schema->AddInt("replication.max_pending_receives", 4096, 1, 1 << 20,
                 "ReceiveData calls that may be outstanding at once (bounds the decode queue)");
  none::AddConfigKeys(schema);
#if QRSTORE_HAVE_RAFT
  raft::AddConfigKeys(schema);
#endif
#if QRSTORE_HAVE_ZOOKEEPER
  zookeeper::AddConfigKeys(schema);
#endif
}

std::vector<std::string> BuiltBackends() {
  std::vector<std::string> out{"none"};
#if QRSTORE_HAVE_RAFT
  out.push_back("raft");
#endif
#if QRSTORE_HAVE_ZOOKEEPER
  out.push_back("zookeeper");
#endif
  return out;
}

}  // namespace qrstore::replication
