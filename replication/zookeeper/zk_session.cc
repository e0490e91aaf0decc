#include "replication/zookeeper/zk_session.h"

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"

namespace qrstore::replication::zookeeper {

// Heap-allocated per asynchronous request; its completion (called once, with ZCLOSING at the
// latest when the handle closes) pushes the event and frees it. ZkSession::Close frees the
// ones libzookeeper never completes (see ZkPendingSet).
struct ZkPending {
  Inbox* inbox;
  ZkPendingSet* set;
  OpTag tag;
  // Fenced writes only: the multi-op's results, which the C client fills in before it calls the
  // completion (its ops are serialized by zoo_amulti itself).
  zoo_op_result_t results[2] = {};
  struct Stat stat = {};
};

namespace {

void Deliver(const void* data, int rc, ZkEvent ev) {
  auto* p = static_cast<ZkPending*>(const_cast<void*>(data));
  {
    MutexLock lock(p->set->mu);
    p->set->items.erase(p);
  }
  ev.kind = ZkEvent::Kind::kCompletion;
  ev.rc = rc;
  ev.op = std::move(p->tag);
  Inbox* inbox = p->inbox;
  delete p;
  inbox->Push(std::move(ev));
}

void StringCompletion(int rc, const char* /*value*/, const void* data) { Deliver(data, rc, ZkEvent{}); }

void StatCompletion(int rc, const struct Stat* stat, const void* data) {
  ZkEvent ev;
  if (rc == ZOK && stat != nullptr) {
    ev.czxid = stat->czxid;
    ev.ephemeral_owner = stat->ephemeralOwner;
  }
  Deliver(data, rc, std::move(ev));
}

void DataCompletion(int rc, const char* value, int value_len, const struct Stat* stat, const void* data) {
  ZkEvent ev;
  if (rc == ZOK) {
    if (value != nullptr && value_len > 0) ev.data.assign(value, static_cast<size_t>(value_len));
    if (stat != nullptr) {
      ev.czxid = stat->czxid;
      ev.ephemeral_owner = stat->ephemeralOwner;
    }
  }
  Deliver(data, rc, std::move(ev));
}

void VoidCompletion(int rc, const void* data) { Deliver(data, rc, ZkEvent{}); }

void MultiCompletion(int rc, const void* data) {
  const auto* p = static_cast<const ZkPending*>(data);
  ZkEvent ev;
  // Only API errors (a failed op) come with per-op results; connection errors leave them unset.
  if (rc != ZOK && rc <= ZAPIERROR) {
    if (p->results[0].err != ZOK) {
      rc = p->results[0].err;
      ev.fenced = true;
    } else {
      rc = p->results[1].err;
    }
  }
  Deliver(data, rc, std::move(ev));
}

void StringsCompletion(int rc, const struct String_vector* strings, const void* data) {
  ZkEvent ev;
  if (rc == ZOK && strings != nullptr) {
    ev.children.reserve(static_cast<size_t>(strings->count));
    for (int32_t i = 0; i < strings->count; ++i) ev.children.emplace_back(strings->data[i]);
  }
  Deliver(data, rc, std::move(ev));
}

// The C client reports every refused connection attempt as an error; the backend logs the
// disconnects that matter itself, so the client's own lines are debug output.
void ClientLog(const char* message) { Logger("zk-client")->debug("{}", message); }

}  // namespace

void Inbox::Push(ZkEvent event) {
  {
    MutexLock lock(mu_);
    events_.push_back(std::move(event));
    if (events_.size() > high_water_) high_water_ = events_.size();
  }
  cv_.notify_one();
}

void Inbox::Wake() {
  {
    MutexLock lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

void Inbox::WaitAndTake(std::deque<ZkEvent>* out, int64_t deadline_nanos) {
  MutexUniqueLock lock(mu_);
  while (events_.empty() && !woken_) {
    int64_t left = deadline_nanos - NowNanos();
    if (left <= 0) break;
    cv_.wait_for(lock.native(), std::chrono::nanoseconds(left));
  }
  woken_ = false;
  while (!events_.empty()) {
    out->push_back(std::move(events_.front()));
    events_.pop_front();
  }
}

size_t Inbox::high_water() const {
  MutexLock lock(mu_);
  return high_water_;
}

struct ZkWatchCtx {
  Inbox* inbox;
  uint64_t generation;
};

namespace {
// Global and node watcher: runs on the C client's completion thread; copies and pushes.
void SessionWatcher(zhandle_t* /*zh*/, int type, int state, const char* path, void* ctx) {
  auto* w = static_cast<ZkWatchCtx*>(ctx);
  if (w == nullptr) return;
  ZkEvent ev;
  ev.kind = type == ZOO_SESSION_EVENT ? ZkEvent::Kind::kSession : ZkEvent::Kind::kWatch;
  ev.generation = w->generation;
  ev.type = type;
  ev.state = state;
  if (path != nullptr) ev.path = path;
  w->inbox->Push(std::move(ev));
}
}  // namespace

Status ZkSession::Open(const std::string& hosts, int session_timeout_ms) {
  QR_CHECK(zh_ == nullptr, "ZkSession::Open on an open session");
  static std::once_flag log_level_once;
  // The C client's log level is process-global; warnings and errors are enough (connection
  // losses are counted and logged by the backend itself).
  std::call_once(log_level_once, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_WARN); });
  ++generation_;
  auto* ctx = new ZkWatchCtx{inbox_, generation_};
  zhandle_t* zh = zookeeper_init2(hosts.c_str(), SessionWatcher, session_timeout_ms, nullptr, ctx, 0, ClientLog);
  if (zh == nullptr) {
    int err = errno;
    delete ctx;
    return Status::InvalidArgument("zookeeper_init('" + hosts + "') failed: " + std::string(strerror(err)) +
                                   " (is replication.zookeeper.hosts a host:port[,host:port] list?)");
  }
  MutexLock lock(mu_);
  zh_ = zh;
  watch_ctx_ = ctx;
  return Status::Ok();
}

void ZkSession::Close() {
  zhandle_t* zh;
  {
    MutexLock lock(mu_);
    zh = zh_;
    zh_ = nullptr;
  }
  if (zh == nullptr) return;
  // Joins the C client's threads; outstanding completions run (ZCLOSING) before return, so the
  // watch context and any request context the library dropped can be freed afterwards.
  zookeeper_close(zh);
  delete watch_ctx_;
  watch_ctx_ = nullptr;
  std::set<void*> dropped;
  {
    MutexLock lock(pending_.mu);
    dropped.swap(pending_.items);
  }
  for (void* p : dropped) delete static_cast<ZkPending*>(p);
}

bool ZkSession::ClientId(clientid_t* out) const {
  MutexLock lock(mu_);
  if (zh_ == nullptr || zoo_state(zh_) != ZOO_CONNECTED_STATE) return false;
  const clientid_t* id = zoo_client_id(zh_);
  if (id == nullptr) return false;
  *out = *id;
  return true;
}

int64_t ZkSession::SessionId() const {
  MutexLock lock(mu_);
  if (zh_ == nullptr) return 0;
  const clientid_t* id = zoo_client_id(zh_);
  return id == nullptr ? 0 : id->client_id;
}

std::string ZkSession::CurrentServer() const {
  MutexLock lock(mu_);
  if (zh_ == nullptr) return "";
  const char* s = zoo_get_current_server(zh_);
  return s == nullptr ? "" : std::string(s);
}

ZkPending* ZkSession::NewPending(OpTag tag) {
  auto* p = new ZkPending{inbox_, &pending_, std::move(tag)};
  MutexLock lock(pending_.mu);
  pending_.items.insert(p);
  return p;
}

void ZkSession::Refused(int rc, ZkPending* p) {
  OpTag t = std::move(p->tag);
  {
    MutexLock lock(pending_.mu);
    pending_.items.erase(p);
  }
  delete p;
  Refused(rc, std::move(t));
}

void ZkSession::Refused(int rc, OpTag tag) {
  ZkEvent ev;
  ev.kind = ZkEvent::Kind::kCompletion;
  ev.rc = rc;
  ev.op = std::move(tag);
  inbox_->Push(std::move(ev));
}

void ZkSession::Create(const std::string& path, std::string_view data, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  auto* p = NewPending(std::move(tag));
  int rc = zoo_acreate(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, 0,
                       StringCompletion, p);
  if (rc != ZOK) Refused(rc, p);
}

void ZkSession::CreateEphemeral(const std::string& path, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  auto* p = NewPending(std::move(tag));
  int rc = zoo_acreate(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, StringCompletion, p);
  if (rc != ZOK) Refused(rc, p);
}

void ZkSession::Set(const std::string& path, std::string_view data, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  auto* p = NewPending(std::move(tag));
  int rc = zoo_aset(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), -1, StatCompletion, p);
  if (rc != ZOK) Refused(rc, p);
}

void ZkSession::Get(const std::string& path, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  auto* p = NewPending(std::move(tag));
  int rc = zoo_aget(zh_, path.c_str(), 0, DataCompletion, p);
  if (rc != ZOK) Refused(rc, p);
}

void ZkSession::ExistsWatch(const std::string& path, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  auto* p = NewPending(std::move(tag));
  int rc = zoo_awexists(zh_, path.c_str(), SessionWatcher, watch_ctx_, StatCompletion, p);
  if (rc != ZOK) Refused(rc, p);
}

void ZkSession::Delete(const std::string& path, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  auto* p = NewPending(std::move(tag));
  int rc = zoo_adelete(zh_, path.c_str(), -1, VoidCompletion, p);
  if (rc != ZOK) Refused(rc, p);
}

void ZkSession::Children(const std::string& path, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  auto* p = NewPending(std::move(tag));
  int rc = zoo_aget_children(zh_, path.c_str(), 0, StringsCompletion, p);
  if (rc != ZOK) Refused(rc, p);
}

void ZkSession::Fenced(FencedKind kind, const std::string& check_path, int version, const std::string& path,
                       std::string_view data, OpTag tag) {
  tag.generation = generation_;
  if (zh_ == nullptr) return Refused(ZCLOSING, std::move(tag));
  // zoo_amulti builds one request per sub-op; when one cannot be built (the handle is
  // unrecoverable: its session expired or authentication failed), the later sub-ops hand an
  // uninitialized path to free(), in practice the previous sub-op's path. So a multi is never
  // submitted on a handle known to be unrecoverable, and, since the client's IO thread can make
  // it so between that check and the call, the check op's path is a malloc'd copy that a failed
  // call may have freed: it is freed here only after a ZOK, and otherwise given away.
  if (check_state_before_multi_ && Unrecoverable(zh_)) return Refused(ZINVALIDSTATE, std::move(tag));
  char* check_copy = strdup(check_path.c_str());
  if (check_copy == nullptr) return Refused(ZSYSTEMERROR, std::move(tag));
  auto* p = NewPending(std::move(tag));
  zoo_op_t ops[2];
  zoo_check_op_init(&ops[0], check_copy, version);
  switch (kind) {
    case FencedKind::kCreate:
      zoo_create_op_init(&ops[1], path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, 0,
                         nullptr, 0);
      break;
    case FencedKind::kSet:
      zoo_set_op_init(&ops[1], path.c_str(), data.data(), static_cast<int>(data.size()), -1, &p->stat);
      break;
    case FencedKind::kDelete:
      zoo_delete_op_init(&ops[1], path.c_str(), -1);
      break;
  }
  int rc = zoo_amulti(zh_, 2, ops, p->results, MultiCompletion, p);
  if (rc == ZOK) {
    std::free(check_copy);  // every sub-op was built: the library freed none of the paths
  } else {
    GiveAway(check_copy);
    Refused(rc, p);
  }
}

bool ZkSession::Unrecoverable(zhandle_t* zh) {
  const int state = zoo_state(zh);
  return state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE;
}

void ZkSession::GiveAway(char* path) {
  // Kept reachable (a leak checker does not report it) but never freed: the library may have
  // freed it already. Only a multi failed on an unrecoverable handle gets here, at most once
  // per write in flight when a session ends; past the bound the copies are simply dropped.
  static Mutex mu;
  static std::vector<char*>* kept = new std::vector<char*>();
  MutexLock lock(mu);
  if (kept->size() < kMaxGivenAway) kept->push_back(path);
  given_away_.fetch_add(1, std::memory_order_relaxed);
}

int ZkSession::SyncExistsWatch(const std::string& path, struct Stat* stat) {
  if (zh_ == nullptr) return ZCLOSING;
  return zoo_wexists(zh_, path.c_str(), SessionWatcher, watch_ctx_, stat);
}

int ZkSession::SyncGetWatch(const std::string& path, std::string* data, struct Stat* stat) {
  if (zh_ == nullptr) return ZCLOSING;
  std::string buf(1024, '\0');
  int len = static_cast<int>(buf.size());
  int rc = zoo_wget(zh_, path.c_str(), SessionWatcher, watch_ctx_, buf.data(), &len, stat);
  if (rc == ZOK) {
    buf.resize(static_cast<size_t>(std::max(len, 0)));
    *data = std::move(buf);
  }
  return rc;
}

std::string ZkErrorName(int rc) {
  const char* s = zerror(rc);
  return std::string(s != nullptr ? s : "unknown") + " (" + std::to_string(rc) + ")";
}

bool IsRetryable(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING || rc == ZSESSIONEXPIRED ||
         rc == ZINVALIDSTATE || rc == ZSESSIONMOVED;
}

}  // namespace qrstore::replication::zookeeper
