// Raft driver with an in-process fake transport: three drivers elect the preferred leader,
// commit proposals on every member in order, and never send a message that promises state
// their storage has not synced (the Ready contract) nor hand over a committed entry before its
// storage synced it, under each fsync policy. Also checks the
// fsync policy plumbing (how often Sync is called) and bounded proposal back-pressure.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <catch2/catch.hpp>

#include "replication/raft/driver.h"

namespace qrstore::replication::raft {
namespace {

// Memory storage that remembers what was synced, so sends can be checked against it.
// Used only on its driver's raft thread.
class CheckingStorage : public LogStorage {
 public:
  PersistentState Recovered() const override { return inner_.Recovered(); }
  Status Append(const std::vector<Entry>& entries) override {
    ++appends;
    // Entries from this index replace the stored ones: what was synced there is gone.
    if (!entries.empty()) synced_last = std::min(synced_last, entries.front().index - 1);
    return inner_.Append(entries);
  }
  Status SaveHardState(const HardState& hard) override {
    ++hard_states;
    written_hard_ = hard;
    return inner_.SaveHardState(hard);
  }
  Status Sync() override {
    ++syncs_;
    synced_last = inner_.last_index();
    synced_hard = written_hard_;
    return Status::Ok();
  }
  Status Compact(Index upto) override { return inner_.Compact(upto); }
  Status ResetTo(Index index, Term term) override { return inner_.ResetTo(index, term); }
  Index first_index() const override { return inner_.first_index(); }
  Index last_index() const override { return inner_.last_index(); }
  uint64_t syncs() const override { return syncs_; }

  Index synced_last = 0;
  HardState synced_hard;
  uint64_t appends = 0;
  uint64_t hard_states = 0;

 private:
  MemoryLogStorage inner_{/*retain_entries=*/true};
  HardState written_hard_;
  uint64_t syncs_ = 0;
};

struct FakeNetwork;

class FakeTransport : public Transport {
 public:
  FakeTransport(FakeNetwork* net, NodeId self, CheckingStorage* storage, bool check)
      : net_(net), self_(self), storage_(storage), check_(check) {}
  Status Start(Handler handler) override;
  void Send(Message m) override;
  void Stop() override;

  Handler handler;
  std::mutex mu;  // guards handler against Stop

 private:
  FakeNetwork* net_;
  NodeId self_;
  CheckingStorage* storage_;
  bool check_;
};

struct FakeNetwork {
  FakeTransport* nodes[3] = {nullptr, nullptr, nullptr};
  std::atomic<uint64_t> violations{0};
  std::atomic<uint64_t> delivered{0};
  std::atomic<int> cut{-1};  // every message to or from this member is dropped
  std::atomic<uint64_t> appends_before_sync{0};  // appends whose entries their sender had not synced
};

Status FakeTransport::Start(Handler h) {
  std::lock_guard<std::mutex> lock(mu);
  handler = std::move(h);
  return Status::Ok();
}

void FakeTransport::Stop() {
  std::lock_guard<std::mutex> lock(mu);
  handler = nullptr;
}

void FakeTransport::Send(Message m) {
  // Runs on the sender's raft thread, right where the storage is owned: check the promise.
  if (check_) {
    if (m.type == MessageType::kAppendResponse && !m.reject && m.hint > storage_->synced_last) {
      net_->violations.fetch_add(1);
    }
    if (m.type == MessageType::kVoteResponse && !m.reject &&
        (storage_->synced_hard.term != m.term || storage_->synced_hard.voted_for != m.to)) {
      net_->violations.fetch_add(1);
    }
    if (m.type == MessageType::kVoteRequest &&
        (storage_->synced_hard.term != m.term || storage_->synced_hard.voted_for != self_)) {
      net_->violations.fetch_add(1);
    }
    // A leader's appends may leave before its own log is synced (fsync=batch: written in
    // parallel with replicating it), but never before the term they carry is durable.
    if (m.type == MessageType::kAppendRequest && storage_->synced_hard.term != m.term) {
      net_->violations.fetch_add(1);
    }
    if (m.type == MessageType::kAppendRequest && !m.entries.empty() &&
        m.entries.back().index > storage_->synced_last) {
      net_->appends_before_sync.fetch_add(1);
    }
  }
  FakeTransport* to = m.to < 3 ? net_->nodes[m.to] : nullptr;
  if (to == nullptr) return;
  const int cut = net_->cut.load();
  if (cut == static_cast<int>(m.to) || cut == static_cast<int>(self_)) return;
  std::lock_guard<std::mutex> lock(to->mu);
  if (to->handler) {
    net_->delivered.fetch_add(1);
    to->handler(std::move(m));
  }
}

// Records committed non-empty entries; the test thread waits on it. With `storage` set it
// counts every committed entry handed over before its storage synced it (a violation: the
// driver hands over early only what is durable here already).
class RecordingListener : public DriverListener {
 public:
  void OnPersisted(uint32_t, const std::vector<Entry>&) override {}
  void OnCommitted(uint32_t, std::vector<Entry>& committed) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : committed) {
      if (storage != nullptr && e.index > storage->synced_last) not_durable.fetch_add(1);
      if (!e.data.empty()) data_.push_back(std::string(e.data.view()));
    }
    cv_.notify_all();
  }
  void OnRoleChanged(uint32_t, Role role, Term, NodeId) override {
    if (role == Role::kLeader) became_leader.store(true);
  }
  bool WaitCount(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return data_.size() >= n; });
  }
  std::vector<std::string> data() {
    std::lock_guard<std::mutex> lock(mu_);
    return data_;
  }
  std::atomic<bool> became_leader{false};
  CheckingStorage* storage = nullptr;  // set before the driver starts
  std::atomic<uint64_t> not_durable{0};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> data_;
};

struct Cluster {
  FakeNetwork net;
  CheckingStorage* storages[3];
  RecordingListener listeners[3];
  std::unique_ptr<Driver> drivers[3];

  explicit Cluster(FsyncPolicy policy, size_t max_uncommitted = 64 << 20) {
    for (NodeId i = 0; i < 3; ++i) {
      auto storage = std::make_unique<CheckingStorage>();
      storages[i] = storage.get();
      auto transport = std::make_unique<FakeTransport>(&net, i, storage.get(), policy != FsyncPolicy::kNever);
      net.nodes[i] = transport.get();
      if (policy != FsyncPolicy::kNever) listeners[i].storage = storage.get();
      DriverOptions o;
      o.node_id = i;
      o.members = {0, 1, 2};
      o.groups = 1;
      o.tick_ms = 10;
      o.election_ticks = 30;
      o.preferred_leader = 0;
      o.fsync = policy;
      o.max_uncommitted_bytes = max_uncommitted;
      o.stats_interval_ms = 0;
      o.identity = "t" + std::to_string(i);
      std::vector<std::unique_ptr<LogStorage>> s;
      s.push_back(std::move(storage));
      drivers[i] = std::make_unique<Driver>(o, std::move(s), std::move(transport), &listeners[i]);
    }
    for (auto& d : drivers) REQUIRE(d->Start().ok());
  }
  ~Cluster() {
    for (auto& d : drivers) d->Stop();
  }
  // Proposes on member 0's raft thread; the task retries ("not now") while the core is full.
  void Propose(std::string data, std::atomic<int>* failures) {
    drivers[0]->Submit(Driver::Lane::kProposal, [this, data, failures](Status st) mutable -> bool {
      if (!st.ok()) {
        failures->fetch_add(1);
        return true;
      }
      Result<Index> r = drivers[0]->core(0).Propose(data);
      if (r.status().code() == StatusCode::kResourceExhausted) return false;
      if (!r.ok()) failures->fetch_add(1);
      return true;
    });
  }
};

void WaitLeader(Cluster& c) {
  for (int i = 0; i < 2000 && !c.listeners[0].became_leader.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(c.listeners[0].became_leader.load());
}

void RunPolicy(FsyncPolicy policy) {
  Cluster c(policy);
  WaitLeader(c);
  std::atomic<int> failures{0};
  std::vector<std::string> expected;
  for (int i = 0; i < 200; ++i) {
    expected.push_back("entry-" + std::to_string(i) + std::string(i % 50, 'x'));
    c.Propose(expected.back(), &failures);
  }
  for (auto& l : c.listeners) {
    REQUIRE(l.WaitCount(expected.size()));
    REQUIRE(l.data() == expected);
  }
  REQUIRE(failures.load() == 0);
  for (auto& d : c.drivers) d->Stop();
  REQUIRE(c.net.violations.load() == 0);
  for (auto& l : c.listeners) REQUIRE(l.not_durable.load() == 0);
  // The leader counts its own copy only once synced, so each of its commits covers entries
  // durable before the iteration that hands them over: none waits for that iteration's sync.
  const DriverCounters& leader = c.drivers[0]->counters();
  CHECK(leader.committed_after_sync.load() == 0);
  CHECK(leader.committed_early.load() >= expected.size());
  for (CheckingStorage* s : c.storages) {
    switch (policy) {
      case FsyncPolicy::kAlways:
        REQUIRE(s->syncs() == s->appends + s->hard_states);  // one sync after every write
        REQUIRE(c.net.appends_before_sync.load() == 0);       // everything is sent after its sync
        break;
      case FsyncPolicy::kBatch:
        REQUIRE(s->syncs() > 0);
        REQUIRE(s->syncs() <= s->appends + s->hard_states);  // at most one per iteration
        // The leader's new entries go to the followers before its own sync (most of them: a
        // ready that also brings a new term or vote waits for its sync).
        REQUIRE(c.net.appends_before_sync.load() > 0);
        REQUIRE(c.drivers[0]->counters().appends_before_sync.load() > 0);
        break;
      case FsyncPolicy::kNever:
        REQUIRE(s->syncs() == 0);
        break;
    }
  }
}

TEST_CASE("raft driver: commits in order on every member, fsync=always", "[raft_driver][driver]") {
  RunPolicy(FsyncPolicy::kAlways);
}
TEST_CASE("raft driver: commits in order on every member, fsync=batch", "[raft_driver][driver]") {
  RunPolicy(FsyncPolicy::kBatch);
}
TEST_CASE("raft driver: commits in order on every member, fsync=never", "[raft_driver][driver]") {
  RunPolicy(FsyncPolicy::kNever);
}

TEST_CASE("raft driver: proposals beyond the core's uncommitted budget wait instead of failing", "[raft_driver][driver]") {
  Cluster c(FsyncPolicy::kBatch, /*max_uncommitted=*/4096);
  WaitLeader(c);
  std::atomic<int> failures{0};
  for (int i = 0; i < 100; ++i) c.Propose(std::string(1000, static_cast<char>('a' + i % 26)), &failures);
  REQUIRE(c.listeners[1].WaitCount(100));
  REQUIRE(failures.load() == 0);
  REQUIRE(c.drivers[0]->counters().proposals_deferred.load() > 0);
}

TEST_CASE("raft driver: a follower catching up is handed entries committed elsewhere only once it synced them",
          "[raft_driver][driver]") {
  // Cut off, member 2 misses 100 entries that the leader commits with member 1; back, it
  // receives them with a commit that covers them already: those commits must wait for the
  // iteration's own write and sync (the others are handed over before it).
  Cluster c(FsyncPolicy::kBatch);
  WaitLeader(c);
  std::atomic<int> failures{0};
  c.Propose("before the cut", &failures);
  REQUIRE(c.listeners[2].WaitCount(1));
  c.net.cut.store(2);
  for (int i = 0; i < 100; ++i) c.Propose("entry-" + std::to_string(i), &failures);
  REQUIRE(c.listeners[1].WaitCount(101));
  c.net.cut.store(-1);
  REQUIRE(c.listeners[2].WaitCount(101));
  REQUIRE(c.listeners[2].data() == c.listeners[0].data());
  for (auto& d : c.drivers) d->Stop();
  REQUIRE(failures.load() == 0);
  for (auto& l : c.listeners) REQUIRE(l.not_durable.load() == 0);
  REQUIRE(c.drivers[2]->counters().committed_after_sync.load() > 0);
}

TEST_CASE("raft driver: tasks submitted after Stop are aborted, not lost", "[raft_driver][driver]") {
  Cluster c(FsyncPolicy::kNever);
  c.drivers[0]->Stop();
  std::atomic<int> aborted{0};
  c.drivers[0]->Submit(Driver::Lane::kControl, [&](Status st) {
    if (st.code() == StatusCode::kAborted) aborted.fetch_add(1);
    return true;
  });
  REQUIRE(aborted.load() == 1);
}

}  // namespace
}  // namespace qrstore::replication::raft
