#include "cluster/row/row_server.h"

#include <cstdlib>
#include <mutex>
#include <thread>

#include "cluster/follow/replica_monitor.h"
#include "cluster/port/client_service.h"
#include "cluster/row/row_feed.h"
#include "cluster/sessions/session_store.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"

namespace qrstore::cluster {

Result<RowCrash> ParseRowCrash(const std::string& value) {
  RowCrash out;
  if (value.empty()) return out;
  const size_t a = value.find(':'), b = value.rfind(':');
  if (a != std::string::npos && b > a) {
    out.node = value.substr(0, a);
    out.step = value.substr(a + 1, b - a - 1);
  }
  const bool known = out.step == "before_bundle" || out.step == "bundle_proposed" || out.step == "before_send" ||
                     out.step == "after_send" || out.step == "executed";
  if (!known || b + 1 >= value.size() || value.find_first_not_of("0123456789", b + 1) != std::string::npos) {
    return Status::InvalidArgument("server.test_row_crash: '" + value +
                                   "' is not NODE:STEP:BATCH with STEP one of before_bundle, bundle_proposed, "
                                   "before_send, after_send, executed");
  }
  out.batch = std::strtoull(value.c_str() + b + 1, nullptr, 10);
  return out;
}

RowServer::RowServer(RowServerContext ctx) : ctx_(std::move(ctx)), leader_(ctx_.leader) {
  nodes_.push_back(MakeNode(Options(ctx_.leader), ctx_.leader));
  node_.store(nodes_.back().get(), std::memory_order_release);
}

RowNodeOptions RowServer::Options(bool leader) {
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
  ro.follower = !leader;
  // With followers a lost row peer is waited for: its group elects a successor that resumes its
  // place (docs/partitioned-rows.md 9.5).
  ro.failover_timeout_ms = replicated ? c.GetInt("row.failover_timeout_ms") : 0;
  ro.term = ctx_.term;
  // server.test_row_crash (validated at the node's start): a test kills this node at a step of
  // the exchange.
  if (auto crash = ParseRowCrash(c.GetString("server.test_row_crash")); leader && crash.ok() && crash->node == me.name) {
    ro.crash_step = crash->step;
    ro.crash_batch = crash->batch;
  }
  if (ctx_.sessions != nullptr) {
    // Client sessions (docs/sessions.md, rows): every member applies its home's session entries;
    // a leader checks its clients' session txns as its planners pop them.
    ro.own_outcomes = [this](const std::vector<commit::TxnOutcome>& v) { ApplySessions(v); };
    if (leader) {
      ro.planner.admit = [this](uint64_t b, uint32_t p, std::vector<storage::Txn>* t, size_t from) {
        Admit(b, p, t, from);
      };
    }
  }
  ro.replicate_input = ctx_.input;
  ro.replicate_writes = ctx_.writes;
  if (leader && replicated) {
    // Every sub-slice this partition runs, its own and its peers', goes to its group, one stream
    // per (home, planner), and its batch-end records on one more: its followers replay it alone.
    const int64_t corrupt_batch = c.GetInt("server.test_corrupt_slice_batch");
    ro.replicate = [this, corrupt_batch](uint64_t b, uint32_t s, std::string bytes) {
      if (s == 0 && static_cast<int64_t>(b) == corrupt_batch && DamageEntryForTest(&bytes)) {
        Logger("server")->warn("test hook: damaged stream 0's entry of batch {} on its way to the group", b);
      }
      ctx_.replicated_bytes->fetch_add(bytes.size(), std::memory_order_relaxed);
      ctx_.replicator->ReplicateData(replication::ReplicateMeta{ctx_.group, s, b}, std::move(bytes),
                                     [this, b, s](const replication::ReplicateMeta&, Status st) {
                                       ctx_.on_replicated(b, s, st);
                                     });
    };
  }
  return ro;
}

std::unique_ptr<RowNode> RowServer::MakeNode(RowNodeOptions ro, bool leader) {
  // Each batch's digest: a leader's monitor (with rf = 0 one of no followers, as on one
  // partition) or a follower's reporter, and the checkpointer.
  std::function<void(uint64_t, uint64_t)> record;
  if (leader) {
    record = [m = ctx_.monitor](uint64_t b, uint64_t d) { m->RecordOwn(b, d); };
  } else {
    record = [r = ctx_.reporter](uint64_t b, uint64_t d) { r->RecordApplied(b, d); };
  }
  // The session table is replicated state: its digest goes into the one replicas compare (the
  // commit thread applied the batch's session entries before this hook).
  commit::BatchHook on_batch = [record, c = ctx_.checkpointer, s = ctx_.sessions](const commit::BatchInfo& b) {
    const uint64_t d = s != nullptr ? b.digest ^ Mix64(s->Digest()) : b.digest;
    record(b.batch, d);
    if (c != nullptr) c->OnCommitted(b.batch, d);
  };
  return std::make_unique<RowNode>(
      std::move(ro), ctx_.table, [this](const std::vector<commit::TxnOutcome>& o) { Deliver(o); }, on_batch,
      [this](const Status& st) { ctx_.on_failure(st); }, [this](uint32_t) { ctx_.on_row_ending(); });
}

void RowServer::Admit(uint64_t b, uint32_t planner, std::vector<storage::Txn>* txns, size_t from) {
  RowNode* n = node();
  if (admit_ready_.load(std::memory_order_acquire) != n) {
    // A new leader's table must hold every session entry its group logged before its first check,
    // or a txn of its predecessor's that committed but is not applied yet would look new: every
    // batch before the first it plans committed here (as on one partition, server_roles.cc).
    const uint64_t first = n->first_own_batch();
    const int64_t timeout_ms = ctx_.config->GetInt("server.drain_timeout_ms");
    const int64_t deadline = NowNanos() + timeout_ms * 1'000'000;
    while (n->pipeline()->committed_batches() < first) {
      Status h = n->health();
      if (h.ok() && NowNanos() >= deadline) {
        h = Status::Timeout("the batches before " + std::to_string(first) + ", its first, not committed within " +
                            "server.drain_timeout_ms (" + std::to_string(timeout_ms) + " ms): its session table is " +
                            "incomplete");
        n->Fail(h);
      }
      if (!h.ok()) {
        txns->resize(from);  // nothing is checked, so nothing runs: answered `failed` with the rest
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    admit_ready_.store(n, std::memory_order_release);
  }
  std::vector<SessionAnswer> answers;
  ctx_.sessions->Admit(b, ctx_.me->partition * ctx_.engine->planner.planners + planner, txns, from, &answers);
  if (!answers.empty()) ctx_.service->Answer(answers);
}

void RowServer::ApplySessions(const std::vector<commit::TxnOutcome>& v) {
  std::vector<std::pair<size_t, uint64_t>> opened;
  std::vector<SessionAnswer> answers;
  ctx_.sessions->Apply(v, &opened, &answers);
  if (!opened.empty() && leader()) {
    MutexLock lk(opened_mu_);
    for (const auto& [i, id] : opened) opened_[{v[i].pos.batch, v[i].pos.planner, v[i].home_index}] = id;
  }
  if (!answers.empty()) ctx_.service->Answer(answers);  // duplicates that waited for these outcomes
}

void RowServer::Deliver(const std::vector<commit::TxnOutcome>& v) {
  std::vector<std::pair<size_t, uint64_t>> opened;
  {
    MutexLock lk(opened_mu_);
    if (!opened_.empty()) {
      // Home slices are answered in (batch, planner) order: entries before this one are of slices
      // nobody answers here (a predecessor's).
      const commit::PlannedPos& p = v.front().pos;
      auto it = opened_.erase(opened_.begin(), opened_.lower_bound({p.batch, p.planner, 0}));
      for (; it != opened_.end() && std::get<0>(it->first) == p.batch && std::get<1>(it->first) == p.planner;
           it = opened_.erase(it)) {
        opened.emplace_back(std::get<2>(it->first), it->second);
      }
    }
  }
  ctx_.service->OnOutcomes(v, opened);
}

RowServer::~RowServer() { Stop(); }

Status RowServer::Start() {
  const NodeInfo& me = *ctx_.me;
  if (Status st = node()->Start(); !st.ok()) {
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
    RowNode* n = node();
    fo.record_bytes = static_cast<uint32_t>(ctx_.record_bytes);
    SetRowFeedReaders(&fo, n, ctx_.input, ctx_.writes);
    feed_ = std::make_unique<FollowerFeed>(fo, n->pipeline(), ctx_.replicator, [this, n](uint64_t end) {
      ctx_.reporter->MarkEnded(true);
      n->SetEnd(end);
    });
    QR_RETURN_IF_ERROR(feed_->Start());
  }
  return Status::Ok();
}

Status RowServer::Promote(uint64_t term, int64_t timeout_ms) {
  auto log = Logger("row");
  if (leader() || !feed_) return Status::InvalidArgument("only a follower is promoted");
  RowNode* follower = node();
  // 1. Where each stream of the group's log ends; the feed applies every batch the log holds
  // whole (below D) and hands over the rest.
  std::vector<uint64_t> next(ctx_.streams);
  for (uint32_t s = 0; s < ctx_.streams; ++s) {
    auto n = ctx_.replicator->NextBatchId(ctx_.group, s);
    if (!n.ok()) return n.status();
    next[s] = n.value();
  }
  uint64_t d = 0;
  RowNodeOptions ro = Options(/*leader=*/true);
  QR_RETURN_IF_ERROR(feed_->CollectFrom(next, timeout_ms, &d, &ro.resume.entries));
  // 2. Every batch below D committed here; then the follower stops there.
  const int64_t deadline = NowNanos() + timeout_ms * 1'000'000;
  while (follower->Stats().committed_batches + ctx_.first_batch < d) {
    if (Status h = follower->health(); !h.ok()) return h;
    if (NowNanos() >= deadline) {
      return Status::Timeout("batches below " + std::to_string(d) + " not applied within " + std::to_string(timeout_ms) +
                             " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (uint32_t p = 0; p < ctx_.topo->partitions(); ++p) ro.resume.kept.push_back(follower->RetainedFrames(p));
  follower->Stop();
  feed_->Stop();
  ctx_.replicator->CancelReceives(ctx_.group);
  // 3. The successor: a leader's node over the same table, from D. Its peers are the other
  // partitions' leaders now, whichever rows they are in (each group's member whose row port
  // answers; the config's leader first).
  for (uint32_t q = 0; q < ctx_.topo->partitions(); ++q) {
    std::vector<std::string> cands;
    cands.push_back(ctx_.topo->Leader(q).row_address());
    for (const NodeInfo* m : ctx_.topo->Group(q)) {
      if (m->name != ctx_.topo->Leader(q).name) cands.push_back(m->row_address());
    }
    if (q != ctx_.me->partition) ro.peer_addresses[q] = cands.front();
    ro.resume.candidates.push_back(std::move(cands));
  }
  ro.successor = true;
  ro.term = term;
  ro.pipeline.first_batch = d;
  ro.resume.next = next;
  log->warn("[partition {}] takes its dead leader's place in the row (term {}): resumes at batch {}",
            ctx_.me->partition, term, d);
  nodes_.push_back(MakeNode(std::move(ro), /*leader=*/true));
  node_.store(nodes_.back().get(), std::memory_order_release);
  leader_.store(true, std::memory_order_release);
  return node()->Start();
}

void RowServer::Stop() {
  // A follower's node first: its pipeline may wait for a batch-end record that will not come (a
  // dead leader), and a feed thread in BeginSlice or AwaitBatch returns only once it stopped.
  if (!leader()) node()->Stop();
  if (feed_) feed_->Stop();
  for (auto& n : nodes_) n->Stop();
}

Status RowServer::health() const {
  if (feed_ && !leader()) {
    if (Status st = feed_->health(); !st.ok()) return st;
  }
  return node()->health();
}

}  // namespace qrstore::cluster
