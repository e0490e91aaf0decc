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
