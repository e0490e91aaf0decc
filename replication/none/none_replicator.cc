#include "replication/none/none_replicator.h"

namespace qrstore::replication::none {

namespace {

std::string StreamName(const ReplicateMeta& meta) {
  return "stream g" + std::to_string(meta.group) + "/p" + std::to_string(meta.planner);
}

}  // namespace

std::shared_ptr<NoneHub> NoneHub::Get(const std::string& name, uint64_t retain_batches) {
  // Process-wide registry of hubs by name: how independently configured replicators of one
  // process find each other (the in-process stand-in for a network). Weak references, so it
  // holds no payloads itself.
  static Mutex registry_mu;
  static std::map<std::string, std::weak_ptr<NoneHub>> registry GUARDED_BY(registry_mu);
  MutexLock lock(registry_mu);
  std::shared_ptr<NoneHub> hub = registry[name].lock();
  if (!hub) {
    hub = std::make_shared<NoneHub>(retain_batches);
    registry[name] = hub;
  }
  return hub;
}

uint64_t NoneHub::NewOwnerId() {
  MutexLock lock(mu_);
  return next_owner_++;
}

Status NoneHub::Append(const ReplicateMeta& meta, std::string bytes) {
  std::vector<ReceiveCallback> ready;
  SharedBytes payload;
  {
    MutexLock lock(mu_);
    Stream& s = streams_[{meta.group, meta.planner}];
    if (meta.batch_id != s.next_id) {
      return Status::InvalidArgument(StreamName(meta) + ": batch id " + std::to_string(meta.batch_id) +
                                     " out of sequence, expected " + std::to_string(s.next_id));
    }
    ++s.next_id;
    payload = SharedBytes(std::move(bytes));
    if (retain_batches_ > 0) {
      s.retained.push_back(payload);
      while (s.retained.size() > retain_batches_) {
        s.retained.pop_front();
        ++s.first_retained;
      }
    } else {
      s.first_retained = s.next_id;
    }
    auto [lo, hi] = s.waiters.equal_range(meta.batch_id);
    for (auto it = lo; it != hi; ++it) ready.push_back(std::move(it->second.cb));
    s.waiters.erase(lo, hi);
  }
  // Parked receives fire outside the lock, in the order they were parked.
  for (auto& cb : ready) cb(meta, Status::Ok(), payload);
  return Status::Ok();
}

void NoneHub::Receive(uint64_t owner, const ReplicateMeta& meta, ReceiveCallback cb) {
  SharedBytes payload;
  MutexUniqueLock lock(mu_);
  Stream& s = streams_[{meta.group, meta.planner}];
  if (meta.batch_id >= s.next_id) {
    s.waiters.emplace(meta.batch_id, Waiter{owner, std::move(cb)});
    return;
  }
  if (meta.batch_id < s.first_retained) {
    lock.Unlock();  // callbacks never run under the hub's lock
    cb(meta,
       Status::ResourceExhausted(StreamName(meta) + ": batch " + std::to_string(meta.batch_id) +
                                 " was evicted (the none backend keeps the last " + std::to_string(retain_batches_) +
                                 " batches per stream: raise replication.none.retain_batches)"),
       {});
    return;
  }
  payload = s.retained[meta.batch_id - s.first_retained];
  lock.Unlock();
  cb(meta, Status::Ok(), payload);
}

void NoneHub::CancelOwner(uint64_t owner, int64_t group) {
  std::vector<std::pair<ReplicateMeta, ReceiveCallback>> cancelled;
  {
    MutexLock lock(mu_);
    for (auto& [key, s] : streams_) {
      if (group >= 0 && key.first != static_cast<uint64_t>(group)) continue;
      for (auto it = s.waiters.begin(); it != s.waiters.end();) {
        if (it->second.owner == owner) {
          cancelled.emplace_back(ReplicateMeta{key.first, key.second, it->first}, std::move(it->second.cb));
          it = s.waiters.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  const char* why = group >= 0 ? "receive cancelled (CancelReceives)" : "replicator stopped";
  for (auto& [meta, cb] : cancelled) cb(meta, Status::Aborted(why), {});
}

uint64_t NoneHub::NextBatchId(uint32_t group, uint32_t planner) const {
  MutexLock lock(mu_);
  auto it = streams_.find({group, planner});
  return it == streams_.end() ? 0 : it->second.next_id;
}

NoneReplicator::NoneReplicator(NoneOptions options)
    : options_(std::move(options)), hub_(NoneHub::Get(options_.hub, options_.retain_batches)), owner_id_(hub_->NewOwnerId()) {}

NoneReplicator::~NoneReplicator() { Stop(); }

Status NoneReplicator::Start() {
  MutexLock lock(state_mu_);
  if (stopped_) return Status::Aborted("none replicator: Start after Stop");
  running_ = true;
  return Status::Ok();
}

void NoneReplicator::Stop() {
  {
    MutexLock lock(state_mu_);
    if (stopped_) return;
    stopped_ = true;
    running_ = false;
  }
  hub_->CancelOwner(owner_id_);
}

Status NoneReplicator::CheckStream(const ReplicateMeta& meta) const {
  if (meta.group >= options_.groups || meta.planner >= options_.planners) {
    return Status::InvalidArgument(StreamName(meta) + " outside replication.groups=" + std::to_string(options_.groups) +
                                   " x replication.planners=" + std::to_string(options_.planners));
  }
  return Status::Ok();
}

void NoneReplicator::ReplicateData(const ReplicateMeta& meta, std::string bytes, ReplicateCallback cb) {
  bool running;
  {
    MutexLock lock(state_mu_);
    running = running_;
  }
  if (!running) return cb(meta, Status::Aborted("none replicator is not running"));
  if (!options_.leader) return cb(meta, Status::Unavailable("none replicator: this member is a follower"));
  Status s = CheckStream(meta);
  if (s.ok()) s = hub_->Append(meta, std::move(bytes));
  cb(meta, std::move(s));
}

void NoneReplicator::ReceiveData(const ReplicateMeta& meta, ReceiveCallback cb) {
  bool running;
  {
    MutexLock lock(state_mu_);
    running = running_;
  }
  if (!running) return cb(meta, Status::Aborted("none replicator is not running"), {});
  Status s = CheckStream(meta);
  if (!s.ok()) return cb(meta, std::move(s), {});
  hub_->Receive(owner_id_, meta, std::move(cb));
  // A Stop racing with this call may have cancelled before the waiter was parked; cancel
  // again so no receive of a stopped replicator stays parked forever.
  bool stopped;
  {
    MutexLock lock(state_mu_);
    stopped = stopped_;
  }
  if (stopped) hub_->CancelOwner(owner_id_);
}

Result<uint64_t> NoneReplicator::NextBatchId(uint32_t group, uint32_t planner) const {
  Status s = CheckStream(ReplicateMeta{group, planner, 0});
  if (!s.ok()) return s;
  return hub_->NextBatchId(group, planner);
}

bool NoneReplicator::IsLeader(uint32_t group) const { return options_.leader && group < options_.groups; }

LeaderView NoneReplicator::Leader(uint32_t group) const {
  LeaderView v;
  v.known = v.self = IsLeader(group);
  return v;
}


Result<std::unique_ptr<Replicator>> CreateNoneReplicator(const Config& config) {
  NoneOptions o;
  o.leader = config.GetString("replication.role") == "leader";
  o.groups = static_cast<uint32_t>(config.GetInt("replication.groups"));
  o.planners = static_cast<uint32_t>(config.GetInt("replication.planners"));
  o.hub = config.GetString("replication.none.hub");
  o.retain_batches = static_cast<uint64_t>(config.GetInt("replication.none.retain_batches"));
  return std::unique_ptr<Replicator>(std::make_unique<NoneReplicator>(std::move(o)));
}

}  // namespace qrstore::replication::none
