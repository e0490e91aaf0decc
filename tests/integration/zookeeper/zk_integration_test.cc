// Integration tests of the ZooKeeper replication backend against real ZooKeeper servers on
// 127.0.0.1: a leader and followers in one process (separate sessions), exact bytes, order, no
// gaps or duplicates, chunked payloads, cleanup, session expiry, leader restart over a crashed
// leader's leftovers, and a 3-server ensemble losing its leader mid-stream.
//
// Server: $QRSTORE_ZK_HOSTS if set (scripts/test.sh exports it), else one started here with
// scripts/zk-server.sh (stopped at exit). If neither works the test FAILS.
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

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::zookeeper;

namespace {

const std::string kScript = std::string(QRSTORE_SOURCE_DIR) + "/scripts/zk-server.sh";

// Runs a shell command; returns its exit code and stdout (trailing newline stripped).
int Shell(const std::string& cmd, std::string* out = nullptr) {
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

std::string MakeTempDir(const char* tag) {
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
std::string TestHosts() {
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

std::string UniqueRoot(const std::string& name) {
  static int counter = 0;
  return "/qrstore-test/" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(NowNanos() % 1000000000) +
         "-" + std::to_string(counter++);
}

// Deterministic payload bytes for (group, planner, batch id).
std::string Payload(uint32_t g, uint32_t p, uint64_t id, size_t size) {
  Rng rng(Mix64((static_cast<uint64_t>(g) << 40) ^ (static_cast<uint64_t>(p) << 20) ^ id));
  std::string s(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    uint64_t v = rng.Next();
    std::memcpy(s.data() + i, &v, std::min<size_t>(8, size - i));
  }
  return s;
}

// 100 B mostly, some 900 KB (one full chunk), some 3 MB (4 chunks).
size_t MixedSize(uint64_t id) {
  if (id % 40 == 13) return 3 * 1024 * 1024;
  if (id % 40 == 29) return 900 * 1024;
  return 100;
}

ZkOptions Options(const std::string& hosts, const std::string& root, bool leader, uint32_t planners = 1) {
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

std::unique_ptr<Replicator> MustStart(const ZkOptions& o) {
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
void Drive(Replicator* leader, std::vector<Replicator*> followers, Recorder* lrec, std::vector<Recorder*> frecs,
           uint32_t planners, uint64_t first, const uint64_t& count, size_t window, int timeout_ms,
           const std::function<void(uint64_t acked_total)>& on_progress = nullptr) {
  std::vector<uint64_t> next_write(planners, first);
  std::vector<std::vector<uint64_t>> next_read(followers.size(), std::vector<uint64_t>(planners, first));
  const int64_t deadline = NowNanos() + static_cast<int64_t>(timeout_ms) * 1'000'000;
  while (true) {
    bool done = true;
    uint64_t acked_total = 0;
    for (uint32_t p = 0; p < planners; ++p) {
      size_t acked = lrec->AckedNow(p);
      acked_total += acked;
      while (next_write[p] < first + count && next_write[p] - first < acked + window) {
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

void CheckComplete(Recorder& rec, bool leader, uint32_t planners, uint64_t count) {
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

size_t CountMarkers(const std::vector<std::string>& children) {
  size_t n = 0;
  for (const auto& c : children) {
    auto parsed = ParseChildName(c);
    if (parsed && parsed->kind == ChildName::Kind::kMarker) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("zk: one leader, two followers: order, no gaps, no duplicates, exact bytes (100 B, 900 KB, 3 MB)",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("basic");
  RootGuard guard(hosts, root);
  const uint32_t planners = 2;
  const uint64_t count = 120;  // per stream: 3 x 3 MB, 3 x 900 KB, the rest 100 B
  ZkOptions lo = Options(hosts, root, true, planners);
  lo.retain_bytes = 0;  // keep everything: checked through a fresh session below
  ZkOptions f1 = Options(hosts, root, false, planners);
  f1.follower_id = "f1";
  ZkOptions f2 = f1;
  f2.follower_id = "f2";
  // The recorders outlive the replicators that call into them, also when a REQUIRE fails.
  Recorder lrec, r1, r2;
  // Followers first: their early requests wait on exists-watches for batches not written yet.
  auto fol1 = MustStart(f1);
  auto fol2 = MustStart(f2);
  auto leader = MustStart(lo);
  for (uint32_t p = 0; p < planners; ++p) {
    auto next = leader->NextBatchId(0, p);
    REQUIRE(next.ok());
    CHECK(next.value() == 0);
  }
  Drive(leader.get(), {fol1.get(), fol2.get()}, &lrec, {&r1, &r2}, planners, 0, count, 16, 90000);
  CheckComplete(lrec, true, planners, count);
  CheckComplete(r1, false, planners, count);
  CheckComplete(r2, false, planners, count);
  CHECK(leader->NextBatchId(0, 0).value() == count);
  CHECK(fol1->NextBatchId(0, 1).value() == count);

  // Durable: the znodes are there through a fresh session; 3 MB batches have 3 chunk znodes.
  ZkInspector zk(hosts);
  auto children = zk.Children(StreamPath(root, 0, 0));
  CHECK(CountMarkers(children) == count);  // followers = 0: no cleanup
  CHECK(zk.Exists(StreamPath(root, 0, 0) + "/" + ChunkName(13, 3)));
  CHECK_FALSE(zk.Exists(StreamPath(root, 0, 0) + "/" + ChunkName(13, 4)));
  CHECK_FALSE(zk.Exists(StreamPath(root, 0, 0) + "/" + ChunkName(29, 1)));  // 900 KB fits one znode

  // Out-of-sequence and out-of-range calls are refused with clear statuses.
  Status seq = Status::Ok(), range = Status::Ok();
  std::mutex mu;
  std::condition_variable cv;
  int got = 0;
  leader->ReplicateData(ReplicateMeta{0, 0, count + 5}, "x", [&](const ReplicateMeta&, Status s) {
    std::lock_guard<std::mutex> lock(mu);
    seq = s;
    ++got;
    cv.notify_all();
  });
  leader->ReplicateData(ReplicateMeta{3, 0, 0}, "x", [&](const ReplicateMeta&, Status s) {
    std::lock_guard<std::mutex> lock(mu);
    range = s;
    ++got;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return got == 2; }));
  }
  CHECK(seq.code() == StatusCode::kInvalidArgument);
  CHECK(range.code() == StatusCode::kInvalidArgument);

  ZkStats st;
  REQUIRE(GetZkStats(*leader, &st));
  CHECK(st.batches_acked == planners * count);
  REQUIRE(GetZkStats(*fol1, &st));
  CHECK(st.batches_delivered == planners * count);
  leader->Stop();
  fol1->Stop();
  fol2->Stop();
}

TEST_CASE("zk: a follower's pending requests are aborted by Stop", "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("abort");
  RootGuard guard(hosts, root);
  ZkOptions fo = Options(hosts, root, false);
  fo.follower_id = "f";
  auto fol = MustStart(fo);
  std::mutex mu;
  std::vector<Status> got;
  for (uint64_t id = 0; id < 3; ++id) {
    fol->ReceiveData(ReplicateMeta{0, 0, id}, [&](const ReplicateMeta&, Status s, SharedBytes) {
      std::lock_guard<std::mutex> lock(mu);
      got.push_back(s);
    });
  }
  fol->Stop();  // joins the worker: every callback has run when Stop returns
  std::lock_guard<std::mutex> lock(mu);
  REQUIRE(got.size() == 3);
  for (const auto& s : got) CHECK(s.code() == StatusCode::kAborted);
}

TEST_CASE("zk: cleanup keeps the number of batch znodes bounded while followers keep up", "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("cleanup");
  RootGuard guard(hosts, root);
  const uint64_t count = 400;
  ZkOptions lo = Options(hosts, root, true);
  lo.followers = 2;
  lo.cleanup_interval_ms = 20;
  lo.retain_bytes = 3'000'000;  // flow control: at most ~one 2 MB batch unconsumed
  ZkOptions f1 = Options(hosts, root, false);
  f1.follower_id = "a";
  ZkOptions f2 = f1;
  f2.follower_id = "b";
  Recorder lrec, r1, r2;  // outlive the replicators that call into them
  auto leader = MustStart(lo);
  auto fol1 = MustStart(f1);
  auto fol2 = MustStart(f2);
  ZkInspector zk(hosts);
  const std::string stream = StreamPath(root, 0, 0);
  lrec.size_fn_ = r1.size_fn_ = r2.size_fn_ = [](uint64_t id) { return id % 100 == 50 ? size_t{2'000'000} : 100; };
  size_t max_seen = 0;
  uint64_t next_sample = 100;
  Drive(leader.get(), {fol1.get(), fol2.get()}, &lrec, {&r1, &r2}, 1, 0, count, 8, 60000, [&](uint64_t acked) {
    if (acked >= next_sample) {  // sample the znode count mid-stream
      next_sample += 100;
      max_seen = std::max(max_seen, zk.Children(stream).size());
    }
  });
  CheckComplete(lrec, true, 1, count);
  CheckComplete(r1, false, 1, count);
  CheckComplete(r2, false, 1, count);
  // Mid-stream the stream never held more than a few hundred znodes.
  CHECK(max_seen < 250);
  // Settled: only the last consumed batch (and nothing else) remains.
  size_t left = 0;
  ZkStats st;
  for (int i = 0; i < 200; ++i) {
    left = zk.Children(stream).size();
    REQUIRE(GetZkStats(*leader, &st));  // its delete completions may trail the server's state
    if (left <= 1 && st.batches_deleted >= count - 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling ZooKeeper's state
  }
  CHECK(left <= 1);
  CHECK(st.batches_deleted >= count - 1);
  INFO("max znodes seen mid-stream " << max_seen);
  // A restarted leader still knows where the stream ends (from the kept batch).
  leader->Stop();
  auto again = MustStart(lo);
  CHECK(again->NextBatchId(0, 0).value() == count);
  again->Stop();
  fol1->Stop();
  fol2->Stop();
  // A restarted follower resumes from its progress znode.
  auto fol1b = MustStart(f1);
  CHECK(fol1b->NextBatchId(0, 0).value() == count);
  fol1b->Stop();
}

TEST_CASE("zk: forced session expiry of leader and follower neither loses nor repeats data", "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("expiry");
  RootGuard guard(hosts, root);
  // The stream runs until both expiries are done (so they hit it with requests in flight),
  // then to at least 600 batches.
  uint64_t count = UINT64_MAX / 2;
  ZkOptions lo = Options(hosts, root, true);
  lo.followers = 1;     // cleanup runs through the expiries too
  lo.retain_bytes = 0;  // but no flow control: the leader must have writes in flight when hit
  ZkOptions fo = Options(hosts, root, false);
  fo.follower_id = "f";
  Recorder lrec, frec;  // outlive the replicators that call into them, also when a REQUIRE fails
  auto leader = MustStart(lo);
  auto fol = MustStart(fo);
  lrec.size_fn_ = frec.size_fn_ = [](uint64_t id) { return id % 97 == 5 ? size_t{2'500'000} : size_t{1000}; };
  bool leader_expired = false, follower_expired = false;
  Status ls = Status::Ok(), fs = Status::Ok();  // written by the hook threads, read after join
  std::atomic<int> hooks_done{0};
  std::thread lhook, fhook;
  // The hooks run on their own threads so that this loop keeps requests in flight meanwhile.
  Drive(leader.get(), {fol.get()}, &lrec, {&frec}, 1, 0, count, 64, 90000, [&](uint64_t acked) {
    if (hooks_done.load() == 2 && count == UINT64_MAX / 2) count = std::max<uint64_t>(600, acked + 64);
    // Until then the stream has no end: keep the leader within 2,000 batches of the follower
    // (waiting here holds back the next writes), or a slow follower (under ASan it fell 17,000
    // behind) lets the leader fill ZooKeeper's heap with batches nobody has read yet.
    for (int i = 0; i < 2000 && acked > frec.DeliveredNow(0) + 2000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!leader_expired && acked >= 150) {
      leader_expired = true;
      lhook = std::thread([&] {
        // An expiry that lands while none of the leader's writes is at the server loses none
        // (it happened under ASan in CI): expire again, a bounded number of times, until one
        // hits writes in flight, which is the path this test is for.
        for (int attempt = 0; attempt < 4; ++attempt) {
          ls = ForceSessionExpiryForTest(leader.get());
          ZkStats now;
          if (!ls.ok() || (GetZkStats(*leader, &now) && now.connection_losses > 0)) break;
        }
        hooks_done.fetch_add(1);
      });
    }
    if (!follower_expired && frec.DeliveredNow(0) >= 350) {
      follower_expired = true;
      fhook = std::thread([&] {
        fs = ForceSessionExpiryForTest(fol.get());
        hooks_done.fetch_add(1);
      });
    }
  });
  if (lhook.joinable()) lhook.join();
  if (fhook.joinable()) fhook.join();
  INFO("leader hook: " << ls.ToString() << ", follower hook: " << fs.ToString() << ", batches " << count);
  REQUIRE(count < UINT64_MAX / 2);  // the stream ended on its own, not by the Drive timeout
  CHECK(ls.ok());
  CHECK(fs.ok());
  CheckComplete(lrec, true, 1, count);
  CheckComplete(frec, false, 1, count);
  ZkStats lst, fst;
  REQUIRE(GetZkStats(*leader, &lst));
  REQUIRE(GetZkStats(*fol, &fst));
  // The expiries really happened and were recovered from by new sessions.
  CHECK(lst.sessions_created >= 2);
  CHECK(fst.sessions_created >= 2);
  // ... while requests were outstanding, which were re-issued.
  CHECK(lst.connection_losses > 0);
  WARN("leader: " << lst.connection_losses << " requests lost with the connection, " << lst.exists_verified
                  << " creates found already applied; follower: " << fst.connection_losses << " requests lost");
  leader->Stop();
  fol->Stop();
}

TEST_CASE("zk: a restarted leader resumes at NextBatchId over a crashed leader's leftovers", "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("restart");
  RootGuard guard(hosts, root);
  ZkOptions lo = Options(hosts, root, true);
  lo.chunk_bytes = 1000;
  ZkOptions fo = Options(hosts, root, false);
  fo.chunk_bytes = 1000;
  fo.follower_id = "f";
  Recorder lrec, frec;
  lrec.size_fn_ = frec.size_fn_ = [](uint64_t id) { return id % 5 == 0 ? size_t{3500} : size_t{100}; };
  auto fol = MustStart(fo);
  {
    auto leader = MustStart(lo);
    Drive(leader.get(), {}, &lrec, {}, 1, 0, 50, 10, 30000);
    CheckComplete(lrec, true, 1, 50);
    leader->Stop();
  }
  // What a leader killed mid-write leaves behind: batch 51's marker without batch 50 (never
  // acknowledged: acks are in order), chunks of batch 50, all with foreign bytes.
  ZkInspector zk(hosts);
  const std::string stream = StreamPath(root, 0, 0);
  std::string junk = Payload(9, 9, 9, 100);
  CHECK(zk.Create(stream + "/" + MarkerName(51), EncodeMarker(MakeMarkerHeader(junk, 1000), junk)) == ZOK);
  CHECK(zk.Create(stream + "/" + ChunkName(50, 1), std::string(1000, 'x')) == ZOK);
  // The follower reads on meanwhile: it must not deliver the stray batch 51.
  Recorder* fr = &frec;
  for (uint64_t id = 0; id < 100; ++id) {
    fol->ReceiveData(ReplicateMeta{0, 0, id},
                     [fr](const ReplicateMeta& m, Status s, SharedBytes b) { fr->Delivered(m, s, b); });
  }
  REQUIRE(frec.WaitFor([&] { return frec.delivered(0) >= 50; }, 30000));
  Recorder lrec2;  // outlives the leader that calls into it
  auto leader = MustStart(lo);
  REQUIRE(leader->NextBatchId(0, 0).ok());
  CHECK(leader->NextBatchId(0, 0).value() == 50);
  // Leftovers are only removed once this process writes the stream.
  CHECK(zk.Exists(stream + "/" + MarkerName(51)));
  lrec2.size_fn_ = lrec.size_fn_;
  // Acks of the second leader are counted from 50.
  for (uint64_t id = 50; id < 100; ++id) {
    leader->ReplicateData(ReplicateMeta{0, 0, id}, Payload(0, 0, id, lrec.size_fn_(id)),
                          [&lrec2](const ReplicateMeta& m, Status s) {
                            if (!s.ok()) lrec2.Acked(m, s);
                            else lrec2.Acked(ReplicateMeta{m.group, m.planner, m.batch_id - 50}, s);
                          });
  }
  REQUIRE(frec.WaitFor([&] { return frec.delivered(0) >= 100; }, 30000));
  CheckComplete(lrec2, true, 1, 50);
  CheckComplete(frec, false, 1, 100);
  leader->Stop();
  fol->Stop();
}

TEST_CASE("zk: 3-server ensemble, the leader's server killed mid-stream: no loss, no repeat", "[zookeeper]") {
  ZkServers ensemble(3, "zk-ens");
  INFO(ensemble.error());
  REQUIRE(ensemble.error().empty());
  const std::string hosts = ensemble.hosts();
  const std::string root = UniqueRoot("ensemble");
  RootGuard guard(hosts, root);
  const uint64_t count = 2000;
  ZkOptions lo = Options(hosts, root, true);
  lo.followers = 1;
  ZkOptions fo = Options(hosts, root, false);
  fo.follower_id = "f";
  Recorder lrec, frec;  // outlive the replicators that call into them
  auto leader = MustStart(lo);
  auto fol = MustStart(fo);
  // Chunked batches early and late; around the kill (at 500 acked) only small ones, so that
  // many writes are in flight when the connection breaks (a chunked batch holds back the
  // markers behind it).
  lrec.size_fn_ = frec.size_fn_ = [](uint64_t id) { return id % 1000 == 100 ? size_t{1'500'000} : size_t{100}; };
  // The server our leader's session is on: killing it makes the leader's in-flight writes fail
  // with ZCONNECTIONLOSS, to be re-issued elsewhere. `status` lines are "I PORT MODE".
  const std::string server = CurrentServerForTest(*leader);
  const std::string port = server.substr(server.rfind(':') + 1);
  std::string status;
  REQUIRE(Shell(kScript + " status " + ensemble.dir(), &status) == 0);
  size_t at = status.find(" " + port + " ");
  INFO("leader's server " << server << ", ensemble status:\n" << status);
  REQUIRE((!port.empty() && at != std::string::npos));
  size_t begin = status.rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  const std::string index = status.substr(begin, at - begin);
  const std::string which = index + " (" + status.substr(at + 1, status.find('\n', at) - at - 1) + ")";
  bool killed = false;
  int kill_rc = -1;  // written by the killer thread, read after join
  std::thread killer;
  size_t acked_at_kill = 0;  // written by the killer thread, read after join
  const int64_t t0 = NowNanos();
  Drive(leader.get(), {fol.get()}, &lrec, {&frec}, 1, 0, count, 64, 60000, [&](uint64_t acked) {
    if (!killed && acked >= 500) {
      // From another thread, so that this loop keeps writes in flight meanwhile.
      killed = true;
      killer = std::thread([&] {
        kill_rc = Shell(kScript + " kill-one " + ensemble.dir() + " " + index);
        acked_at_kill = lrec.AckedNow(0);
      });
    }
  });
  if (killer.joinable()) killer.join();
  const double secs = static_cast<double>(NowNanos() - t0) / 1e9;
  INFO("killed server " << which << "; stream took " << secs << " s");
  if (lrec.AckedNow(0) != count) {
    // Say what the ensemble was doing: its logs go with the temporary directory.
    Shell(kScript + " status " + ensemble.dir() + " >&2; tail -n 30 " + ensemble.dir() + "/s*/server.log >&2");
  }
  CHECK(lrec.AckedNow(0) == count);
  CHECK(kill_rc == 0);
  CheckComplete(lrec, true, 1, count);
  CheckComplete(frec, false, 1, count);
  CHECK(secs < 30.0);
  ZkStats lst;
  REQUIRE(GetZkStats(*leader, &lst));
  // The leader's connection really broke mid-stream: writes were re-issued.
  CHECK(lst.connection_losses + lst.requests_retried > 0);
  CHECK(acked_at_kill < count);  // the kill landed mid-stream
  WARN("killed server " << which << " at " << acked_at_kill << " acked, leader lost " << lst.connection_losses
                        << " requests to the dead connection, stream took " << secs
                        << " s");
  leader->Stop();
  fol->Stop();
}

TEST_CASE("zk: retain_bytes bounds what ZooKeeper holds, and a follower asking for a deleted batch gets kNotFound",
          "[zookeeper]") {
  const std::string hosts = TestHosts();
  const std::string root = UniqueRoot("retain");
  RootGuard guard(hosts, root);
  const uint64_t count = 100;
  ZkOptions lo = Options(hosts, root, true);
  lo.retain_bytes = 50 * 1000;  // 5 batches of 10 KB
  lo.cleanup_interval_ms = 20;
  Recorder lrec;
  lrec.size_fn_ = [](uint64_t) { return size_t{10000}; };
  auto leader = MustStart(lo);
  Drive(leader.get(), {}, &lrec, {}, 1, 0, count, 10, 30000);
  CheckComplete(lrec, true, 1, count);
  ZkInspector zk(hosts);
  const std::string stream = StreamPath(root, 0, 0);
  size_t left = 0;
  for (int i = 0; i < 200; ++i) {
    left = CountMarkers(zk.Children(stream));
    if (left <= 6) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling ZooKeeper's state
  }
  CHECK(left <= 6);
  CHECK(zk.Exists(stream + "/" + MarkerName(count - 1)));
  ZkStats st;
  REQUIRE(GetZkStats(*leader, &st));
  CHECK(st.batches_evicted >= count - 6);

  ZkOptions fo = Options(hosts, root, false);
  fo.follower_id = "late";
  fo.poll_ms = 100;
  Recorder frec;  // outlives the follower that calls into it
  auto fol = MustStart(fo);
  frec.size_fn_ = lrec.size_fn_;
  std::mutex mu;
  std::condition_variable cv;
  Status first = Status::Ok();
  bool got_first = false;
  fol->ReceiveData(ReplicateMeta{0, 0, 0}, [&](const ReplicateMeta&, Status s, SharedBytes) {
    std::lock_guard<std::mutex> lock(mu);
    first = s;
    got_first = true;
    cv.notify_all();
  });
  Recorder* fr = &frec;
  fol->ReceiveData(ReplicateMeta{0, 0, count - 1},
                   [fr](const ReplicateMeta& m, Status s, SharedBytes b) { fr->Delivered(m, s, b); });
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return got_first; }));
  }
  INFO(first.ToString());
  CHECK(first.code() == StatusCode::kNotFound);
  REQUIRE(frec.WaitFor([&] { return frec.delivered(0) == 1; }, 20000));
  CHECK(frec.errors().empty());
  leader->Stop();
  fol->Stop();
}
