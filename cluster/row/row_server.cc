#include "cluster/row/row_server.h"

#include <mutex>

#include "cluster/client_service.h"
#include "cluster/replica_monitor.h"
#include "common/logging.h"

namespace qrstore::cluster {

RowServer::RowServer(RowServerContext ctx) : ctx_(std::move(ctx)) {
  const Config& c = *ctx_.config;
  const NodeInfo& me = *ctx_.me;
  const bool replicated = ctx_.topo->replication_factor() > 0;
  RowNodeOptions ro;
  ro.partition = me.partition;
  // This node's row: node (q, me.row) for every partition q.
  for (uint32_t q = 0; q < ctx_.topo->partitions(); ++q) ro.peer_addresses.push_back(ctx_.topo->At(q, me.row).row_address());
  ro.partitions = ctx_.partition_map;
  ro.pipeline = ctx_.engine->pipeline;
  ro.pipeline.first_batch = ctx_.first_batch;
  ro.pipeline.image_sink = ctx_.checkpointer;
  ro.pipeline.track_digest = true;
  ro.pipeline.executors_wait_for_replication = ctx_.mode == "sync";
  ro.planner = ctx_.engine->planner;
  ro.record_bytes = ctx_.record_bytes;
  ro.connect_timeout_ms = c.GetInt("server.start_timeout_ms");
  ro.peer_timeout_ms = c.GetInt("row.peer_timeout_ms");
  ro.follower = !ctx_.leader;
  // Each batch's digest: a leader's monitor (with rf = 0 one of no followers, as on one
  // partition) or a follower's reporter, and the checkpointer.
  std::function<void(uint64_t, uint64_t)> record;
  if (ctx_.leader) {
    record = [m = ctx_.monitor](uint64_t b, uint64_t d) { m->RecordOwn(b, d); };
  } else {
    record = [r = ctx_.reporter](uint64_t b, uint64_t d) { r->RecordApplied(b, d); };
  }
  BatchHook on_batch = [record, c = ctx_.checkpointer, x = ctx_.checkpoint_digest_mix](const BatchInfo& b) {
    record(b.batch, b.digest);
    if (c != nullptr) c->OnCommitted(b.batch, b.digest ^ x);
  };
  if (ctx_.leader && replicated) {
    // Every sub-slice this partition runs, its own and its peers', goes to its group, one stream
    // per (home, planner): a follower row replays partition p without any leader.
    ro.replicate = [this](uint64_t b, uint32_t s, std::string bytes) {
      ctx_.replicated_bytes->fetch_add(bytes.size(), std::memory_order_relaxed);
      ctx_.replicator->ReplicateData(replication::ReplicateMeta{ctx_.group, s, b}, std::move(bytes),
                                     [this, b, s](const replication::ReplicateMeta&, Status st) {
                                       ctx_.on_replicated(b, s, st);
                                     });
    };
  }
  node_ = std::make_unique<RowNode>(
      ro, ctx_.table, [svc = ctx_.service](const std::vector<commit::TxnOutcome>& o) { svc->OnOutcomes(o); }, on_batch,
      [this](const Status& st) { ctx_.on_failure(st); }, [this](uint32_t) { ctx_.on_row_ending(); });
}

RowServer::~RowServer() { Stop(); }

Status RowServer::Start() {
  const NodeInfo& me = *ctx_.me;
  if (Status st = node_->Start(); !st.ok()) {
    const std::string port = me.row_port != 0 ? "row_port" : "peer_port";
    return Status(st.code() == StatusCode::kUnavailable
                      ? Status::Unavailable("cluster.nodes[" + std::to_string(me.index) + "]." + port +
                                            " (row transport, " + me.row_address() + "): " + st.message())
                      : st);
  }
  if (!ctx_.leader) {
    FollowerFeedOptions fo;
    fo.group = ctx_.group;
    fo.planners = ctx_.streams;
    fo.ranges = ctx_.engine->pipeline.ranges;
    fo.window = ctx_.engine->pipeline.batches_in_flight + 2;
    fo.first_batch = ctx_.first_batch;
    fo.row = true;
    fo.batch_end_stream = true;
    fo.place = planner::RowPlace{ctx_.partition_map, me.partition};
    fo.on_bundle = [n = node_.get()](const RowHomeBundle& b) { n->KeepBundle(b); };
    feed_ = std::make_unique<FollowerFeed>(fo, node_->pipeline(), ctx_.replicator, [this](uint64_t end) {
      ctx_.reporter->MarkEnded(true);
      node_->SetEnd(end);
    });
    QR_RETURN_IF_ERROR(feed_->Start());
  }
  return Status::Ok();
}

void RowServer::Stop() {
  // A follower's node first: its pipeline may wait for a batch-end record that will not come (a
  // dead leader), and a feed thread in BeginSlice or AwaitBatch returns only once it stopped.
  if (node_ && !ctx_.leader) node_->Stop();
  if (feed_) feed_->Stop();
  if (node_) node_->Stop();
}

Status RowServer::health() const {
  if (feed_) {
    if (Status st = feed_->health(); !st.ok()) return st;
  }
  return node_->health();
}

}  // namespace qrstore::cluster
