#include "replication/tools/member.h"

#include <cinttypes>

#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"
#include "replication/tools/payload.h"

namespace qrstore::replication::tools {

StreamReceiver::StreamReceiver(Replicator* replicator, uint32_t groups, uint32_t planners, std::string name,
                               FILE* deliveries, uint32_t window)
    : replicator_(replicator),
      groups_(groups),
      planners_(planners),
      name_(std::move(name)),
      deliveries_(deliveries),
      window_(window),
      events_(static_cast<size_t>(groups) * planners * window + 1),
      streams_(static_cast<size_t>(groups) * planners),
      next_(static_cast<size_t>(groups) * planners, 0) {
  QR_CHECK(window > 0);
}

StreamReceiver::~StreamReceiver() { Stop(); }

void StreamReceiver::Start() {
  thread_ = NamedThread("recv-" + name_, [this] { Loop(); });
}

void StreamReceiver::Stop() {
  events_.Close();
  thread_.Join();
}

std::string StreamReceiver::first_error() const {
  MutexLock lock(mu_);
  return first_error_;
}

std::vector<uint64_t> StreamReceiver::PerStream() const {
  MutexLock lock(mu_);
  return next_;
}

bool StreamReceiver::WaitDelivered(uint64_t n_per_stream, int64_t timeout_ms) {
  MutexUniqueLock lock(mu_);
  return progress_cv_.wait_for(lock.native(), std::chrono::milliseconds(timeout_ms), [&]() REQUIRES(mu_) {
    if (!first_error_.empty()) return true;
    for (uint64_t n : next_) {
      if (n < n_per_stream) return false;
    }
    return true;
  }) && first_error_.empty();
}

void StreamReceiver::Fail(const std::string& message) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  Logger("repl-member")->error("[{}] {}", name_, message);
  {
    MutexLock lock(mu_);
    if (first_error_.empty()) first_error_ = message;
  }
  progress_cv_.notify_all();
}

void StreamReceiver::Ask(size_t stream) {
  StreamState& st = streams_[stream];
  while (!st.stopped && st.next_ask < st.next_deliver + window_) {
    ReplicateMeta meta{static_cast<uint32_t>(stream / planners_), static_cast<uint32_t>(stream % planners_),
                       st.next_ask++};
    replicator_->ReceiveData(meta, [this](const ReplicateMeta& m, Status status, SharedBytes bytes) {
      Event e{m, std::move(status), std::move(bytes)};
      // At most `window` receives per stream are outstanding and the queue holds that many
      // per stream, so this fails only once the queue is closed (stopping) or when a backend
      // fires more callbacks than it was asked for (a contract violation).
      if (!events_.TryPush(e) && !events_.closed()) {
        Fail("g" + std::to_string(m.group) + "/p" + std::to_string(m.planner) + " batch " +
             std::to_string(m.batch_id) + ": more receive callbacks than requests");
      }
    });
  }
}

void StreamReceiver::Deliver(size_t stream, Event& e) {
  StreamState& st = streams_[stream];
  Status v = VerifyPayload(e.meta.group, e.meta.planner, e.meta.batch_id, e.bytes);
  if (!v.ok()) {
    Fail(v.message());
    st.stopped = true;
    return;
  }
  if (deliveries_ != nullptr) {
    std::fprintf(deliveries_, "%u %u %" PRIu64 " %zu %016" PRIx64 "\n", e.meta.group, e.meta.planner, e.meta.batch_id,
                 e.bytes.size(), BulkHash64(e.bytes));
    std::fflush(deliveries_);
  }
  ++st.next_deliver;
  {
    MutexLock lock(mu_);
    next_[stream] = st.next_deliver;
  }
  delivered_.fetch_add(1, std::memory_order_relaxed);
  progress_cv_.notify_all();
}

void StreamReceiver::Loop() {
  for (size_t s = 0; s < streams_.size(); ++s) Ask(s);
  while (std::optional<Event> e = events_.Pop()) {
    QR_CHECK(e->meta.group < groups_ && e->meta.planner < planners_);
    const size_t stream = static_cast<size_t>(e->meta.group) * planners_ + e->meta.planner;
    StreamState& st = streams_[stream];
    const std::string where = "g" + std::to_string(e->meta.group) + "/p" + std::to_string(e->meta.planner) +
                              " batch " + std::to_string(e->meta.batch_id);
    if (st.stopped) continue;
    if (!e->status.ok()) {
      st.stopped = true;  // aborted: shutting down; led: see below; error: a gap would follow
      if (e->status.code() == StatusCode::kInvalidArgument && replicator_->IsLeader(e->meta.group)) {
        // This member leads the group now and the batch is its own proposal: a leader's
        // application already has its own batches, so raft does not hand them back. The
        // stream's deliveries end here; the driver's acks continue it.
        Logger("repl-member")->info("[{}] {}: this member leads the group; receiving stops at batch {} ({})", name_,
                                    where, st.next_deliver, e->status.message());
      } else if (e->status.code() != StatusCode::kAborted) {
        Fail(where + ": receive failed: " + e->status.ToString());
      }
      continue;
    }
    if (e->meta.batch_id < st.next_deliver || e->meta.batch_id >= st.next_ask || st.arrived.count(e->meta.batch_id)) {
      Fail(where + ": delivered twice or never asked for (next expected " + std::to_string(st.next_deliver) + ")");
      st.stopped = true;
      continue;
    }
    st.arrived.emplace(e->meta.batch_id, std::move(*e));
    // Deliver in batch order whatever order the callbacks came in.
    for (auto it = st.arrived.begin(); !st.stopped && it != st.arrived.end() && it->first == st.next_deliver;
         it = st.arrived.erase(it)) {
      Deliver(stream, it->second);
    }
    Ask(stream);
  }
}

Driver::Driver(Replicator* replicator, DriverOptions options, AckHook on_ack)
    : replicator_(replicator),
      options_(options),
      on_ack_(std::move(on_ack)),
      acks_(static_cast<size_t>(options.groups) * options.planners * options.inflight + 1),
      streams_(static_cast<size_t>(options.groups) * options.planners) {
  QR_CHECK(options.inflight > 0);
}

uint64_t Driver::inflight() const {
  uint64_t n = 0;
  for (const Stream& s : streams_) n += s.inflight;
  return n;
}

bool Driver::AllStreamsComplete() const {
  if (options_.batches_per_stream == 0) return false;
  for (const Stream& s : streams_) {
    if (s.complete_upto < options_.batches_per_stream) return false;
  }
  return true;
}

void Driver::Issue() {
  for (uint32_t g = 0; g < options_.groups; ++g) {
    const bool leader = replicator_->IsLeader(g);
    for (uint32_t p = 0; p < options_.planners; ++p) {
      Stream& s = streams_[static_cast<size_t>(g) * options_.planners + p];
      if (!leader) {
        s.active = false;
        continue;
      }
      if (!s.active) {
        if (s.inflight > 0) continue;  // resync only once every earlier batch has answered
        Result<uint64_t> next = replicator_->NextBatchId(g, p);
        if (!next.ok()) continue;  // e.g. a new leader whose first entry has not committed yet
        s.next = next.value();
        s.complete_upto = std::max(s.complete_upto, s.next);
        s.active = true;
      }
      while (issuing_ && s.inflight < options_.inflight &&
             (options_.batches_per_stream == 0 || s.next < options_.batches_per_stream)) {
        if (options_.may_issue && !options_.may_issue()) return;
        ReplicateMeta meta{g, p, s.next++};
        ++s.inflight;
        const int64_t issued_ns = NowNanos();
        replicator_->ReplicateData(meta, MakePayload(g, p, meta.batch_id, options_.payload_bytes),
                                   [this, issued_ns](const ReplicateMeta& m, Status status) {
                                     Ack a{m, std::move(status), NowNanos() - issued_ns};
                                     // Sized for every batch that can be in flight.
                                     QR_CHECK(acks_.TryPush(a), "driver ack queue overflow");
                                   });
      }
    }
  }
}

void Driver::Handle(Ack ack) {
  Stream& s = streams_[static_cast<size_t>(ack.meta.group) * options_.planners + ack.meta.planner];
  QR_CHECK_GT(s.inflight, 0u);
  --s.inflight;
  if (ack.status.ok()) {
    ++acked_;
    s.complete_upto = std::max(s.complete_upto, ack.meta.batch_id + 1);
    if (options_.acks != nullptr) {
      std::fprintf(options_.acks, "%u %u %" PRIu64 "\n", ack.meta.group, ack.meta.planner, ack.meta.batch_id);
      std::fflush(options_.acks);
    }
    if (on_ack_) on_ack_(ack.meta, ack.latency_ns);
    return;
  }
  ++failed_;
  last_failure_ = ack.status.ToString();
  if (s.active) {
    Logger("repl-member")
        ->warn("g{}/p{} batch {} not replicated ({}); resyncing from NextBatchId", ack.meta.group, ack.meta.planner,
               ack.meta.batch_id, ack.status.ToString());
  }
  s.active = false;
}

void Driver::Poll(int64_t wait_ms) {
  Issue();
  std::optional<Ack> a = acks_.PopFor(std::chrono::milliseconds(wait_ms));
  while (a) {
    Handle(std::move(*a));
    a = acks_.TryPop();
  }
  Issue();
}

}  // namespace qrstore::replication::tools
