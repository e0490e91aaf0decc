#include "replication/factory.h"

#include "replication/compression.h"
#include "replication/none/none_replicator.h"
#if QRSTORE_HAVE_RAFT
#include "replication/raft/raft_replicator.h"
#endif
#if QRSTORE_HAVE_ZOOKEEPER
#include "replication/zookeeper/zk_replicator.h"
#endif

namespace qrstore::replication {

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

Result<std::unique_ptr<Replicator>> CreateReplicator(const Config& config) {
  const std::string& backend = config.GetString("replication.backend");
  Result<std::unique_ptr<Replicator>> inner = Status::InvalidArgument(
      "replication.backend: backend '" + backend + "' not built into this binary (its library was missing at build time)");
  if (backend == "none") {
    inner = none::CreateNoneReplicator(config);
  }
#if QRSTORE_HAVE_RAFT
  if (backend == "raft") inner = raft::CreateRaftReplicator(config);
#endif
#if QRSTORE_HAVE_ZOOKEEPER
  if (backend == "zookeeper") inner = zookeeper::CreateZkReplicator(config);
#endif
  if (!inner.ok()) return inner.status();
  CompressionOptions options;
  options.compression =
      config.GetString("replication.compression") == "snappy" ? Compression::kSnappy : Compression::kNone;
  options.max_raw_bytes = static_cast<uint64_t>(config.GetInt("replication.max_payload_bytes"));
  options.max_pending_receives = static_cast<size_t>(config.GetInt("replication.max_pending_receives"));
  return std::unique_ptr<Replicator>(std::make_unique<CompressingReplicator>(std::move(inner).value(), options));
}

}  // namespace qrstore::replication
