// Helpers of the ZooKeeper backend's integration tests (zk_integration_test.cc: streams,
// cleanup, expiry, restarts, the ensemble; zk_retention_test.cc: who the leader waits for and
// who loses past retain_bytes): the tests' ZooKeeper server ($QRSTORE_ZK_HOSTS, or one started
// with scripts/zk-server.sh), deterministic payloads, a recorder of callbacks, a raw inspector of
// the znodes. Test-thread helpers; the recorder's callbacks may run on the backend's threads.
#pragma once

#include <catch2/catch.hpp>

#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/hash.h"
#include "common/rng.h"
#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator.h"

namespace qrstore::replication::zookeeper::testing {

inline const std::string kScript = std::string(QRSTORE_SOURCE_DIR) + "/scripts/zk-server.sh";

// Runs a shell command; returns its exit code and stdout (trailing newline stripped).
inline int Shell(const std::string& cmd, std::string* out = nullptr) {
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return -1;
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  int rc = pclose(f);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (out != nullptr) *out = s;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline std::string MakeTempDir(const char* tag) {
  std::string tmpl = std::string("/tmp/qrstore-") + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const char* d = mkdtemp(buf.data());
  return d == nullptr ? std::string() : std::string(d);
}

// ZooKeeper servers started with scripts/zk-server.sh; stopped (and their dir removed) on
// destruction.
class ZkServers {
 public:
  ZkServers(int servers, const char* tag) {
    dir_ = MakeTempDir(tag);
    if (dir_.empty()) {
      error_ = "mkdtemp failed";
      return;
    }
    std::string out;
    int rc = Shell(kScript + " start " + dir_ + " --servers " + std::to_string(servers), &out);
    if (rc != 0 || out.empty()) {
      error_ = "scripts/zk-server.sh start failed (exit " + std::to_string(rc) + "); see its stderr above";
      return;
    }
    hosts_ = out;
  }
  ~ZkServers() {
    if (!dir_.empty()) {
      Shell(kScript + " stop " + dir_);
      Shell("rm -rf " + dir_);
    }
  }
  const std::string& hosts() const { return hosts_; }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, hosts_, error_;
};

// The shared single server for this process: $QRSTORE_ZK_HOSTS or one started on demand.
inline std::string TestHosts() {
  static std::unique_ptr<ZkServers> own;
  static std::string hosts;
  if (!hosts.empty()) return hosts;
  const char* env = std::getenv("QRSTORE_ZK_HOSTS");
  if (env != nullptr && *env != '\0') {
    hosts = env;
    return hosts;
  }
  own = std::make_unique<ZkServers>(1, "zk-test");
  INFO("no QRSTORE_ZK_HOSTS and starting a server failed: " << own->error());
  REQUIRE(own->error().empty());
  hosts = own->hosts();
  return hosts;
}

inline std::string UniqueRoot(const std::string& name) {
  static int counter = 0;
  return "/qrstore-test/" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(NowNanos() % 1000000000) +
         "-" + std::to_string(counter++);
}

// Deterministic payload bytes for (group, planner, batch id).
inline std::string Payload(uint32_t g, uint32_t p, uint64_t id, size_t size) {
  Rng rng(Mix64((static_cast<uint64_t>(g) << 40) ^ (static_cast<uint64_t>(p) << 20) ^ id));
  std::string s(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    uint64_t v = rng.Next();
    std::memcpy(s.data() + i, &v, std::min<size_t>(8, size - i));
  }
  return s;
}

// 100 B mostly, some 900 KB (one full chunk), some 3 MB (4 chunks).
inline size_t MixedSize(uint64_t id) {
  if (id % 40 == 13) return 3 * 1024 * 1024;
  if (id % 40 == 29) return 900 * 1024;
  return 100;
}

inline ZkOptions Options(const std::string& hosts, const std::string& root, bool leader, uint32_t planners = 1) {
  ZkOptions o;
  o.hosts = hosts;
  o.root = root;
  o.leader = leader;
  o.groups = 1;
  o.planners = planners;
  o.session_timeout_ms = 6000;
  o.connect_timeout_ms = 20000;
  o.op_deadline_ms = 60000;
  return o;
}

inline std::unique_ptr<Replicator> MustStart(const ZkOptions& o) {
  auto r = CreateZkReplicator(o);
  REQUIRE(r.ok());
  std::unique_ptr<Replicator> rep = std::move(r).value();
  Status s = rep->Start();
  INFO(s.ToString());
  REQUIRE(s.ok());
  return rep;
}

// Collects callbacks from library threads; the test thread waits on it (bounded) and asserts.
class Recorder {
 public:
  void Acked(const ReplicateMeta& m, const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) errors_.push_back("ack " + std::to_string(m.batch_id) + ": " + s.ToString());
    auto& v = acks_[m.planner];
    if (!v.empty() && v.back() + 1 != m.batch_id) {
      errors_.push_back("ack out of order: " + std::to_string(m.batch_id) + " after " + std::to_string(v.back()));
    }
    v.push_back(m.batch_id);
    cv_.notify_all();
  }
  void Delivered(const ReplicateMeta& m, const Status& s, std::string_view bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok()) {
      errors_.push_back("delivery " + std::to_string(m.batch_id) + ": " + s.ToString());
    } else {
      auto& v = deliveries_[m.planner];
      if (!v.empty() && v.back() + 1 != m.batch_id) {
        errors_.push_back("delivery out of order / gap / duplicate: " + std::to_string(m.batch_id) + " after " +
                          std::to_string(v.back()));
      }
      if (bytes != Payload(m.group, m.planner, m.batch_id, size_fn_(m.batch_id))) {
        errors_.push_back("wrong bytes for batch " + std::to_string(m.batch_id) + " (" +
                          std::to_string(bytes.size()) + " bytes)");
      }
      v.push_back(m.batch_id);
    }
    cv_.notify_all();
  }
  // Waits until pred() holds (checked under the lock) or timeout; returns pred().
  bool WaitFor(const std::function<bool()>& pred, int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return pred() || !errors_.empty(); }) &&
           pred();
  }
  size_t acked(uint32_t p) { return acks_[p].size(); }            // call under WaitFor or after
  size_t delivered(uint32_t p) { return deliveries_[p].size(); }  // the run settled
  std::vector<std::string> errors() {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }
  size_t AckedNow(uint32_t p) {
    std::lock_guard<std::mutex> lock(mu_);
    return acks_[p].size();
  }
  size_t DeliveredNow(uint32_t p) {
    std::lock_guard<std::mutex> lock(mu_);
    return deliveries_[p].size();
  }
  std::function<size_t(uint64_t)> size_fn_ = MixedSize;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint32_t, std::vector<uint64_t>> acks_;        // guarded by mu_
  std::map<uint32_t, std::vector<uint64_t>> deliveries_;  // guarded by mu_
  std::vector<std::string> errors_;                       // guarded by mu_
};

// Drives one stream: keeps `window` ReplicateData (leader) or ReceiveData (follower) calls
// outstanding until `count` batches, issuing the next from the test thread as callbacks
// complete. Callbacks only record; this loop (test thread) issues. `count` is re-read every
// round, so on_progress may change it (a stream that runs until something has happened).
// `max_lead`: the leader writes no batch more than that many past what the slowest follower
// received (followers that keep up, whatever the machine's speed).
inline void Drive(Replicator* leader, std::vector<Replicator*> followers, Recorder* lrec, std::vector<Recorder*> frecs,
           uint32_t planners, uint64_t first, const uint64_t& count, size_t window, int timeout_ms,
           const std::function<void(uint64_t acked_total)>& on_progress = nullptr, uint64_t max_lead = UINT64_MAX) {
  std::vector<uint64_t> next_write(planners, first);
  std::vector<std::vector<uint64_t>> next_read(followers.size(), std::vector<uint64_t>(planners, first));
  const int64_t deadline = NowNanos() + static_cast<int64_t>(timeout_ms) * 1'000'000;
  while (true) {
    bool done = true;
    uint64_t acked_total = 0;
    for (uint32_t p = 0; p < planners; ++p) {
      size_t acked = lrec->AckedNow(p);
      acked_total += acked;
      uint64_t slowest = UINT64_MAX;
      for (auto* r : frecs) slowest = std::min<uint64_t>(slowest, r->DeliveredNow(p));
      const uint64_t lead_limit = slowest == UINT64_MAX || max_lead == UINT64_MAX ? UINT64_MAX : slowest + max_lead;
      while (next_write[p] < first + count && next_write[p] - first < acked + window &&
             next_write[p] - first < lead_limit) {
        uint64_t id = next_write[p]++;
        leader->ReplicateData(ReplicateMeta{0, p, id}, Payload(0, p, id, lrec->size_fn_(id)),
                              [lrec](const ReplicateMeta& m, Status s) { lrec->Acked(m, s); });
      }
      if (acked < count) done = false;
      for (size_t f = 0; f < followers.size(); ++f) {
        size_t got = frecs[f]->DeliveredNow(p);
        while (next_read[f][p] < first + count && next_read[f][p] - first < got + window) {
          uint64_t id = next_read[f][p]++;
          Recorder* rec = frecs[f];
          followers[f]->ReceiveData(ReplicateMeta{0, p, id}, [rec](const ReplicateMeta& m, Status s, SharedBytes b) {
            rec->Delivered(m, s, b);
          });
        }
        if (got < count) done = false;
      }
    }
    if (on_progress) on_progress(acked_total);
    bool any_error = !lrec->errors().empty();
    for (auto* r : frecs) any_error = any_error || !r->errors().empty();
    if (done || any_error || NowNanos() > deadline) return;
    // Wake on the next callback of any recorder (bounded wait; progress is re-checked).
    lrec->WaitFor([] { return false; }, 5);
  }
}

inline void CheckComplete(Recorder& rec, bool leader, uint32_t planners, uint64_t count) {
  auto errors = rec.errors();
  for (const auto& e : errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());
  for (uint32_t p = 0; p < planners; ++p) {
    INFO("planner " << p);
    if (leader) {
      CHECK(rec.AckedNow(p) == count);
    } else {
      CHECK(rec.DeliveredNow(p) == count);
    }
  }
}

// A plain synchronous ZooKeeper session for inspecting and tampering with znodes.
class ZkInspector {
 public:
  explicit ZkInspector(const std::string& hosts) {
    zh_ = zookeeper_init(hosts.c_str(), &ZkInspector::Watch, 10000, nullptr, this, 0);
    REQUIRE(zh_ != nullptr);
    std::unique_lock<std::mutex> lock(mu_);
    REQUIRE(cv_.wait_for(lock, std::chrono::seconds(20), [&] { return connected_; }));
  }
  ~ZkInspector() { zookeeper_close(zh_); }
  // Children of path; empty on ZNONODE.
  std::vector<std::string> Children(const std::string& path) {
    struct String_vector sv = {0, nullptr};
    int rc = zoo_get_children(zh_, path.c_str(), 0, &sv);
    std::vector<std::string> out;
    if (rc == ZOK) {
      for (int i = 0; i < sv.count; ++i) out.emplace_back(sv.data[i]);
      deallocate_String_vector(&sv);
    }
    return out;
  }
  int Create(const std::string& path, const std::string& data) {
    return zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, 0,
                      nullptr, 0);
  }
  bool Exists(const std::string& path) {
    struct Stat st;
    return zoo_exists(zh_, path.c_str(), 0, &st) == ZOK;
  }
  // The session owning the ephemeral znode `path`: 0 if persistent, -1 if there is none.
  int64_t EphemeralOwner(const std::string& path) {
    struct Stat st;
    return zoo_exists(zh_, path.c_str(), 0, &st) == ZOK ? st.ephemeralOwner : -1;
  }
  // What ZooKeeper holds under `path` now: the data bytes of its children.
  uint64_t ChildrenBytes(const std::string& path) {
    uint64_t bytes = 0;
    for (const auto& c : Children(path)) {
      struct Stat st;
      if (zoo_exists(zh_, (path + "/" + c).c_str(), 0, &st) == ZOK) bytes += static_cast<uint64_t>(st.dataLength);
    }
    return bytes;
  }
  // The data of `path`; false on any error (ZNONODE included).
  bool Get(const std::string& path, std::string* data) {
    std::string buf(1 << 20, '\0');
    int len = static_cast<int>(buf.size());
    struct Stat st;
    if (zoo_get(zh_, path.c_str(), 0, buf.data(), &len, &st) != ZOK) return false;
    buf.resize(static_cast<size_t>(std::max(len, 0)));
    *data = std::move(buf);
    return true;
  }
  int Delete(const std::string& path) { return zoo_delete(zh_, path.c_str(), -1); }
  int Set(const std::string& path, const std::string& data) {
    return zoo_set(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), -1);
  }
  // An EPHEMERAL znode of this inspector's session.
  int CreateEphemeral(const std::string& path) {
    return zoo_create(zh_, path.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, nullptr, 0);
  }
  int64_t SessionId() { return zoo_client_id(zh_)->client_id; }
  // Deletes path and everything below it (best effort).
  void DeleteTree(const std::string& path) {
    for (const auto& c : Children(path)) DeleteTree(path + "/" + c);
    zoo_delete(zh_, path.c_str(), -1);
  }

 private:
  static void Watch(zhandle_t*, int type, int state, const char*, void* ctx) {
    auto* self = static_cast<ZkInspector*>(ctx);
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE) {
      std::lock_guard<std::mutex> lock(self->mu_);
      self->connected_ = true;
      self->cv_.notify_all();
    }
  }
  zhandle_t* zh_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool connected_ = false;
};

// Removes a test's root at the end (also when a REQUIRE fails), so a shared server does not
// fill its heap with old tests' data.
class RootGuard {
 public:
  RootGuard(std::string hosts, std::string root) : hosts_(std::move(hosts)), root_(std::move(root)) {}
  ~RootGuard() { ZkInspector(hosts_).DeleteTree(root_); }

 private:
  std::string hosts_, root_;
};

// Polls `pred` (state without a notification: Health(), what ZooKeeper holds) every 10 ms
// until it holds or `timeout_ms` passes; returns pred().
inline bool PollUntil(const std::function<bool()>& pred, int timeout_ms) {
  const int64_t deadline = NowNanos() + static_cast<int64_t>(timeout_ms) * 1'000'000;
  while (!pred()) {
    if (NowNanos() > deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// One ReceiveData's outcome, waited for by the test thread.
class OneReceive {
 public:
  ReceiveCallback Callback() {
    return [this](const ReplicateMeta&, Status s, SharedBytes) {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = s;
      done_ = true;
      cv_.notify_all();
    };
  }
  bool Wait(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done_; });
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;       // guarded by mu_
  Status status_ = Status::Ok();  // guarded by mu_
};

inline size_t CountMarkers(const std::vector<std::string>& children) {
  size_t n = 0;
  for (const auto& c : children) {
    auto parsed = ParseChildName(c);
    if (parsed && parsed->kind == ChildName::Kind::kMarker) ++n;
  }
  return n;
}

}  // namespace qrstore::replication::zookeeper::testing
