// The engine's config keys (batch.*, threads.*, engine.*), apart from the engine itself so a
// program that only reads configs (the client) does not link the pipeline.
#include <cstdint>

#include "engine/engine.h"

namespace qrstore::engine {

void Engine::AddConfigKeys(ConfigSchema* schema) {
  schema->AddInt("batch.txns", 10000, 1, 1'000'000, "transactions per batch (split among the planners)");
  schema->AddInt("batch.timeout_ms", 10, 0, 60'000,
                 "a batch closes this long after its first txn even if not full (0: take what is queued)");
  schema->AddInt("threads.planners", 1, 1, 64, "planner threads (planner-<i>, priority i)");
  schema->AddInt("threads.executors", 2, 1, 256, "executor threads, one per key range (executor-<i>)");
  schema->AddInt("threads.committers", 1, 1, 16, "commit threads (commit-<i>)");
  schema->AddString("engine.sync", "thread",
                    "thread: planning of batch b+1 overlaps execution of b; node: a barrier per batch",
                    {"thread", "node"});
  schema->AddInt("engine.client_queue_txns", 40000, 1, 10'000'000,
                 "capacity of the client txn queue (Submit blocks while it is full)");
  // At least 2: one batch in flight would serialize planning and execution (that is
  // engine.sync=node, which ignores this key). The range is the whole check, one message.
  schema->AddInt("engine.batches_in_flight", 3, 2, 16,
                 "batches planned/executing/committing at once with engine.sync=thread (memory bound; "
                 "engine.sync=node ignores it)");
  schema->AddString("engine.range_function", "hash",
                    "key -> executor range: hash (Mix64) or range (contiguous ranges of [0, engine.key_space))",
                    {"hash", "range"});
  schema->AddInt("engine.key_space", 0, 0, INT64_MAX,
                 "keys are expected in [0, key_space): engine.range_function=range cuts it into the executor "
                 "ranges and a partitioned row's partitions; 0 = the workload's key count (ycsb.records or "
                 "transfer.accounts)");
  schema->AddInt("engine.partitions", 1, 1, 4096,
                 "partitions (distributed engine); a single node holds them all and ignores it");
}

}  // namespace qrstore::engine
