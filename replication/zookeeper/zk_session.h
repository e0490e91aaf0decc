// ZkSession: one ZooKeeper session (a zhandle_t of the multi-threaded C client) whose every
// asynchronous result and watch notification is copied into an Inbox, so that all backend
// state stays on its owner thread. Internal to the ZooKeeper backend.
//
// Ownership and threads: owned by one ZkReplicator and called from its thread only (Start runs
// before that thread exists), except ClientId, which the test hook may call from any thread.
// The C client's I/O and completion threads run the static callbacks in zk_session.cc; they
// only copy and push (Inbox::Push never blocks). Every asynchronous call produces at most one
// completion event, and exactly one while the session stays open: the C client calls
// outstanding completions with ZCLOSING when the handle closes (it may drop one while closing a
// broken connection: the owner writes off everything in flight when it closes a session anyway),
// and a call it refuses up front is turned into a synthetic completion here.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <zookeeper/zookeeper.h>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace qrstore::replication::zookeeper {

// What an asynchronous request was for; handed back unchanged in its completion event.
struct OpTag {
  enum class Type : uint8_t {
    kCreateChunk,
    kCreateMarker,
    kVerifyChunk,    // get after ZNODEEXISTS on a chunk create
    kVerifyMarker,   // get after ZNODEEXISTS on a marker create
    kSetChunk,       // overwrite a chunk left by an earlier writer (marker not yet written)
    kDeleteBatch,    // cleanup
    kGetMarker,
    kExistsMarker,   // with a watch
    kGetChunk,
    kWriteProgress,  // set, or create when missing
    kListConsumers,
    kListLive,       // leader: which followers hold their ephemeral live znode
    kGetConsumer,
    kListStream,     // follower: is an awaited batch below the oldest kept one (deleted)?
    kDeleteFence,    // leader: a crashed writer's leftover (name = its path)
    kCreateLive,     // follower: its ephemeral live znode, again after a session expiry
    kCheckLive,      // follower: exists, after ZNODEEXISTS on kCreateLive (whose is it?)
    kDeleteLive,     // follower: an earlier session's live znode of the same follower id
  };
  Type type = Type::kCreateChunk;
  uint32_t group = 0;
  uint32_t planner = 0;
  uint64_t batch_id = 0;
  uint32_t chunk = 0;
  uint64_t attempt = 0;  // follower fetch attempt / cleanup round: stale results are dropped
  std::string name;      // kGetConsumer: follower id; kDeleteFence: path
  uint64_t generation = 0;  // set by ZkSession: the session the request was issued on
  uint64_t cost = 0;        // bytes charged against max_inflight_bytes until completion

  static OpTag Make(Type type, uint32_t group = 0, uint32_t planner = 0, uint64_t batch_id = 0, uint32_t chunk = 0) {
    OpTag t;
    t.type = type;
    t.group = group;
    t.planner = planner;
    t.batch_id = batch_id;
    t.chunk = chunk;
    return t;
  }
};

struct ZkEvent {
  enum class Kind : uint8_t { kCompletion, kWatch, kSession };
  Kind kind = Kind::kCompletion;
  uint64_t generation = 0;  // the session (handle) that produced a kWatch / kSession event
  OpTag op;                 // kCompletion
  int rc = 0;               // kCompletion: ZOK, ZNONODE, ZCONNECTIONLOSS...
  std::string data;         // kCompletion of a get
  std::vector<std::string> children;
  int64_t czxid = 0;        // kCompletion of a get / exists: the znode's creation zxid
  int64_t ephemeral_owner = 0;  // kCompletion of a get / set / exists: owning session, 0 = persistent
  int type = 0;             // kWatch / kSession: ZOO_*_EVENT
  int state = 0;            // kWatch / kSession: ZOO_*_STATE
  std::string path;         // kWatch
  bool fenced = false;      // kCompletion of a fenced write: the epoch check failed (rc says how)
};

// The owner thread's mailbox for ZooKeeper events. Push never blocks (it runs on the C
// client's threads); it is bounded by construction: one event per asynchronous request (at
// most max_inflight outstanding), one per registered watch (at most one per awaited marker),
// and a few per session state change. Thread-safe.
class Inbox {
 public:
  void Push(ZkEvent event) EXCLUDES(mu_);
  // Wakes the owner without an event (a user request was queued, or Stop).
  void Wake() EXCLUDES(mu_);
  // Waits until an event or a wake arrives or `deadline_nanos` (NowNanos clock) passes, then
  // moves every queued event to the back of *out.
  void WaitAndTake(std::deque<ZkEvent>* out, int64_t deadline_nanos) EXCLUDES(mu_);
  size_t high_water() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<ZkEvent> events_ GUARDED_BY(mu_);
  bool woken_ GUARDED_BY(mu_) = false;
  size_t high_water_ GUARDED_BY(mu_) = 0;
};

struct ZkWatchCtx;  // the watcher context: inbox + generation (zk_session.cc)
struct ZkPending;   // one outstanding request's context (zk_session.cc)

// The contexts of outstanding asynchronous requests. The C client calls every completion exactly
// once in normal operation, but libzookeeper 3.8 can drop one while closing a broken connection
// (seen under LeakSanitizer), so what is left after zookeeper_close is freed by the session.
struct ZkPendingSet {
  Mutex mu;
  std::set<void*> items GUARDED_BY(mu);  // only ever freed, never iterated for decisions
};

class ZkSession {
 public:
  explicit ZkSession(Inbox* inbox) : inbox_(inbox) {}
  ~ZkSession() { Close(); }
  ZkSession(const ZkSession&) = delete;
  ZkSession& operator=(const ZkSession&) = delete;

  // Creates a new handle (a new generation); connection happens in the background and is
  // reported as a kSession event with state ZOO_CONNECTED_STATE.
  Status Open(const std::string& hosts, int session_timeout_ms);
  // Closes the handle; outstanding requests complete with ZCLOSING before this returns.
  void Close();
  bool is_open() const { return zh_ != nullptr; }
  uint64_t generation() const { return generation_; }
  zhandle_t* handle() { return zh_; }
  // The session id and password (for the expiry test hook). Thread-safe.
  bool ClientId(clientid_t* out) const;
  // The session id the server gave this handle (an ephemeral znode's owner); 0 before the first
  // connection or when closed. Thread-safe.
  int64_t SessionId() const;
  // "host:port" of the server the client is connected (or connecting) to; "" if closed.
  // Thread-safe. For tests: the C client formats it into a static buffer.
  std::string CurrentServer() const;

  void Create(const std::string& path, std::string_view data, OpTag tag);
  // An empty EPHEMERAL znode: ZooKeeper deletes it when this session ends (closed or expired).
  void CreateEphemeral(const std::string& path, OpTag tag);
  void Set(const std::string& path, std::string_view data, OpTag tag);
  void Get(const std::string& path, OpTag tag);
  void ExistsWatch(const std::string& path, OpTag tag);  // watch: a kWatch event on create
  void Delete(const std::string& path, OpTag tag);
  void Children(const std::string& path, OpTag tag);
  // A write fenced by an epoch: one multi-op [check(check_path, version), the write], applied by
  // ZooKeeper only if check_path still has that version. Its completion carries the write's own
  // result (ZOK, ZNODEEXISTS...), or, when the check failed, the check's (ZBADVERSION, or ZNONODE
  // if check_path is gone) with ZkEvent::fenced set.
  enum class FencedKind : uint8_t { kCreate, kSet, kDelete };
  void Fenced(FencedKind kind, const std::string& check_path, int version, const std::string& path,
              std::string_view data, OpTag tag);
  // Synchronous calls (the owner thread blocks for one round trip) that leave a watch: its
  // notification arrives in the inbox as a kWatch event of this session's generation.
  int SyncExistsWatch(const std::string& path, struct Stat* stat);
  int SyncGetWatch(const std::string& path, std::string* data, struct Stat* stat);

  // Fenced writes whose multi the library refused after it may have freed their check path
  // (see Fenced), in this process. Thread-safe.
  static uint64_t given_away() { return given_away_.load(std::memory_order_relaxed); }
  // Tests only: false submits a fenced write's multi even on a handle already known to be
  // unrecoverable, which exercises the path the check alone cannot close.
  void set_check_state_before_multi(bool on) { check_state_before_multi_ = on; }

 private:
  static constexpr size_t kMaxGivenAway = 4096;
  static bool Unrecoverable(zhandle_t* zh);
  static void GiveAway(char* path);
  void Refused(int rc, OpTag tag);
  void Refused(int rc, ZkPending* p);
  ZkPending* NewPending(OpTag tag);

  Inbox* inbox_;
  mutable Mutex mu_;  // guards zh_ against ClientId, SessionId and CurrentServer from other threads
  // Written by the owner under mu_; the owner reads it without (it is the only writer), which
  // GUARDED_BY cannot express, so it is not annotated.
  zhandle_t* zh_ = nullptr;
  ZkWatchCtx* watch_ctx_ = nullptr;  // owned; freed after zookeeper_close
  ZkPendingSet pending_;
  uint64_t generation_ = 0;
  bool check_state_before_multi_ = true;
  static inline std::atomic<uint64_t> given_away_{0};
};

// "ZCONNECTIONLOSS (-4)".
std::string ZkErrorName(int rc);
// Results after which a request should simply be re-issued once connected again.
bool IsRetryable(int rc);

}  // namespace qrstore::replication::zookeeper
