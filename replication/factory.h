// Building a Replicator from config: the one place that maps replication.backend to a
// backend, and wraps every backend in the framing/compression decorator
// (replication/compression.h) so backends only ever see framed, opaque bytes.
//
// Its config keys (AddConfigKeys, BuiltBackends) are in replication/config_keys.h, a library of
// their own (the backends add their own replication.<backend>.* keys there when built in):
//   replication.backend       none | raft | zookeeper
//   replication.compression   none | snappy
//   replication.role          leader | follower (who leads for none/zookeeper; raft elects)
//   replication.groups        number of replication groups (streams: groups x planners)
//   replication.planners      planner streams per group
//   replication.max_payload_bytes, replication.max_pending_receives (bounds)
// Stateless functions; call from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/status.h"
#include "replication/config_keys.h"
#include "replication/replication.h"

namespace qrstore::replication {

// The backend named by replication.backend, wrapped by the compression decorator. Fails with
// kInvalidArgument naming the key when the backend was not built into this binary or its
// config is invalid. The Replicator is not started.
Result<std::unique_ptr<Replicator>> CreateReplicator(const Config& config);

}  // namespace qrstore::replication
