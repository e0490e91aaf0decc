// Process-level conformance tests: real qrstore-repl-node processes on 127.0.0.1.
//  none:      the node's command line (help, bad input) and a leader that drives and
//             receives in one process.
//  raft:      3 members in driver mode; the leader is killed with SIGKILL mid-stream; a new
//             leader continues the stream; the survivors' deliveries are contiguous from 0 with
//             exact content and contain every batch the killed leader acknowledged.
//  zookeeper: a leader process and 2 follower processes; the leader is killed with SIGKILL
//             mid-stream and a restarted leader resumes at NextBatchId; and a 3-server
//             ensemble that loses its ZooKeeper leader mid-stream (in-process members).
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "common/clock.h"
#include "replication/tools/member.h"
#include "replication/tools/payload.h"
#include "replication/tools/process.h"
#include "tests/integration/replication/harness.h"

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::conformance;
using qrstore::replication::tools::ReadCompleteLines;
using qrstore::replication::tools::Subprocess;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    Result<std::string> d = tools::MakeTempDir("qrstore-conformance-proc-");
    REQUIRE(d.ok());
    path = d.value();
  }
  ~TempDir() { tools::RemoveTree(path); }
};

// Runs the node to completion (for quick CLI checks); returns exit code, output in *out.
[[maybe_unused]] int RunNode(const std::vector<std::string>& args, const std::string& log, std::string* out) {
  std::vector<std::string> argv{QRSTORE_REPL_NODE};
  argv.insert(argv.end(), args.begin(), args.end());
  Result<Subprocess> p = Subprocess::Spawn(argv, log);
  REQUIRE(p.ok());
  Result<int> code = p.value().Wait(30000);
  REQUIRE(code.ok());
  std::string all;
  for (const auto& l : ReadCompleteLines(log)) all += l + "\n";
  *out = all;
  return code.value();
}

struct Member {
  std::string name, deliveries, acks, summary, log;
  Subprocess process;
};

Member StartMember(const std::string& dir, const std::string& name, const std::vector<std::string>& overrides,
                   std::vector<std::string> flags) {
  Member m;
  m.name = name;
  m.deliveries = dir + "/" + name + ".deliveries";
  m.acks = dir + "/" + name + ".acks";
  m.summary = dir + "/" + name + ".summary";
  m.log = dir + "/" + name + ".log";
  std::vector<std::string> argv{QRSTORE_REPL_NODE, "--name", name, "--summary", m.summary, "--max-runtime-s", "150"};
  for (auto& f : flags) {
    if (f == "{deliveries}") f = m.deliveries;
    if (f == "{acks}") f = m.acks;
    argv.push_back(f);
  }
  for (const auto& o : overrides) argv.push_back("--" + o);
  Result<Subprocess> p = Subprocess::Spawn(argv, m.log);
  REQUIRE(p.ok());
  m.process = std::move(p).value();
  return m;
}

std::vector<uint64_t> AckedBatches(const std::string& path) {
  std::vector<uint64_t> out;
  for (const auto& line : ReadCompleteLines(path)) {
    unsigned g = 0, p = 0;
    unsigned long long b = 0;
    if (std::sscanf(line.c_str(), "%u %u %llu", &g, &p, &b) == 3) out.push_back(b);
  }
  return out;
}

// Batches [0, n) a member holds in order: delivered through replication, then (if it became
// leader) its own acknowledged batches continuing from there. Raft does not hand a leader its
// own proposals back through ReceiveData (it already has them), so a new leader's deliveries
// stop where its own batches begin.
[[maybe_unused]] uint64_t Covered(const Member& m) {
  uint64_t n = ReadDeliveries(m.deliveries).size();
  std::vector<uint64_t> acks = AckedBatches(m.acks);
  std::sort(acks.begin(), acks.end());
  for (uint64_t a : acks) {
    if (a == n) ++n;
  }
  return n;
}

std::string Logs(const std::vector<const Member*>& ms) {
  std::string s;
  for (const Member* m : ms) s += m->name + " log tail:\n" + tools::TailFile(m->log, 12);
  return s;
}

}  // namespace

#ifdef QRSTORE_CONFORMANCE_none

TEST_CASE("node: --help / bad flags and bad config are clear errors") {
  TempDir dir;
  std::string out;
  CHECK(RunNode({"--help"}, dir.path + "/help.log", &out) == 0);
  CHECK(out.find("usage: qrstore-repl-node") != std::string::npos);
  CHECK(out.find("replication.backend") != std::string::npos);
  CHECK(RunNode({"--bogus"}, dir.path + "/bogus.log", &out) == 2);  // bad input: common/exit_codes.h
  CHECK(out.find("unknown flag --bogus") != std::string::npos);
  CHECK(RunNode({"--replication.backend=paxos"}, dir.path + "/paxos.log", &out) == 2);
  CHECK(out.find("replication.backend") != std::string::npos);
  CHECK(RunNode({"--drive", "-3"}, dir.path + "/drive.log", &out) == 2);
  CHECK(RunNode({"--config", dir.path + "/missing.yaml"}, dir.path + "/missing.log", &out) == 2);
}

TEST_CASE("node: a none leader drives and receives in one process / exits 0 on SIGTERM") {
  TempDir dir;
  Member m = StartMember(dir.path, "solo", {"replication.backend=none", "replication.planners=2"},
                         {"--drive", "200", "--payload-bytes", "3000", "--inflight", "7", "--deliveries", "{deliveries}",
                          "--acks", "{acks}"});
  const int64_t deadline = NowMillis() + 30000;
  while (ReadDeliveries(m.deliveries).size() < 400 && NowMillis() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  m.process.Signal(SIGTERM);
  Result<int> code = m.process.Wait(20000);
  REQUIRE(code.ok());
  INFO(Logs({&m}));
  CHECK(code.value() == 0);
  CHECK(CheckDeliveries(ReadDeliveries(m.deliveries), 1, 2, {200, 200}, 3000) == "");
  CHECK(AckedBatches(m.acks).size() == 400);
  std::vector<std::string> summary = ReadCompleteLines(m.summary);
  REQUIRE(summary.size() == 1);
  CHECK(summary[0] == "delivered=400 errors=0 acked=400 failed=0");
}

#endif  // QRSTORE_CONFORMANCE_none

#ifdef QRSTORE_CONFORMANCE_raft

TEST_CASE("raft processes: kill -9 the leader mid-stream / a new leader continues / survivors hold every acked batch") {
  constexpr uint64_t kBatches = 300;
  constexpr size_t kBytes = 10000;
  TempDir dir;
  GroupSpec spec(3, 1, 1, "snappy", {"replication.raft.tick_ms=10", "replication.raft.election_ticks=30"});
  std::vector<Member> members;
  for (uint32_t i = 0; i < 3; ++i) {
    members.push_back(StartMember(dir.path, "member-" + std::to_string(i), spec.Overrides(i),
                                  {"--drive", std::to_string(kBatches), "--payload-bytes", std::to_string(kBytes),
                                   "--inflight", "10", "--deliveries", "{deliveries}", "--acks", "{acks}"}));
  }
  // The leader is the member whose acks file grows; kill it once it acknowledged 40 batches.
  int leader = -1;
  const int64_t lead_deadline = NowMillis() + 60000;
  while (leader < 0 && NowMillis() < lead_deadline) {
    for (int i = 0; i < 3; ++i) {
      if (AckedBatches(members[i].acks).size() >= 40) leader = i;
    }
    if (leader < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  INFO(Logs({&members[0], &members[1], &members[2]}));
  REQUIRE(leader >= 0);
  members[leader].process.Signal(SIGKILL);
  REQUIRE(members[leader].process.Wait(10000).ok());
  const std::vector<uint64_t> killed_acks = AckedBatches(members[leader].acks);
  INFO("killed member-" << leader << " after it acknowledged " << killed_acks.size() << " batches");
  REQUIRE(killed_acks.size() >= 40);
  REQUIRE(killed_acks.size() < kBatches);

  std::vector<Member*> survivors;
  for (int i = 0; i < 3; ++i) {
    if (i != leader) survivors.push_back(&members[i]);
  }
  const int64_t deadline = NowMillis() + 60000;
  while (NowMillis() < deadline &&
         !(Covered(*survivors[0]) >= kBatches && Covered(*survivors[1]) >= kBatches)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (Member* s : survivors) s->process.Signal(SIGTERM);
  bool someone_continued = false;
  for (Member* s : survivors) {
    INFO(s->name << "\n" << Logs({s}));
    Result<int> code = s->process.Wait(20000);
    REQUIRE(code.ok());
    CHECK(code.value() == 0);  // the node exits 3 on any gap, duplicate or content mismatch
    std::vector<Delivery> d = ReadDeliveries(s->deliveries);
    // Contiguous from 0, exact sizes and content hashes.
    CHECK(CheckDeliveries(d, 1, 1, {d.size()}, kBytes) == "");
    CHECK(Covered(*s) == kBatches);
    // Every batch the killed leader acknowledged was delivered to this survivor.
    for (uint64_t a : killed_acks) CHECK(a < d.size());
    if (!AckedBatches(s->acks).empty()) someone_continued = true;
  }
  CHECK(someone_continued);
}

#endif  // QRSTORE_CONFORMANCE_raft

#ifdef QRSTORE_CONFORMANCE_zookeeper

TEST_CASE("zookeeper processes: leader killed with SIGKILL mid-stream / a restarted leader resumes at NextBatchId") {
  constexpr uint64_t kBatches = 300;
  constexpr size_t kBytes = 10000;
  TempDir dir;
  GroupSpec spec(3, 1, 1, "snappy");
  const std::vector<std::string> drive{"--drive", std::to_string(kBatches), "--payload-bytes", std::to_string(kBytes),
                                       "--inflight", "10", "--acks", "{acks}"};
  Member f1 = StartMember(dir.path, "follower-1", spec.Overrides(1), {"--deliveries", "{deliveries}"});
  Member f2 = StartMember(dir.path, "follower-2", spec.Overrides(2), {"--deliveries", "{deliveries}"});
  Member l1 = StartMember(dir.path, "leader-1", spec.Overrides(0), drive);
  const int64_t ack_deadline = NowMillis() + 60000;
  while (AckedBatches(l1.acks).size() < 40 && NowMillis() < ack_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  INFO(Logs({&l1, &f1, &f2}));
  l1.process.Signal(SIGKILL);
  REQUIRE(l1.process.Wait(10000).ok());
  const std::vector<uint64_t> killed_acks = AckedBatches(l1.acks);
  REQUIRE(killed_acks.size() >= 40);
  REQUIRE(killed_acks.size() < kBatches);
  Member l2 = StartMember(dir.path, "leader-2", spec.Overrides(0), drive);
  const int64_t deadline = NowMillis() + 60000;
  while (NowMillis() < deadline &&
         !(ReadDeliveries(f1.deliveries).size() >= kBatches && ReadDeliveries(f2.deliveries).size() >= kBatches)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  INFO(Logs({&l2}));
  for (Member* m : {&f1, &f2, &l2}) m->process.Signal(SIGTERM);
  for (Member* m : {&f1, &f2, &l2}) {
    Result<int> code = m->process.Wait(20000);
    REQUIRE(code.ok());
    CHECK(code.value() == 0);
  }
  for (Member* f : {&f1, &f2}) {
    std::vector<Delivery> d = ReadDeliveries(f->deliveries);
    CHECK(CheckDeliveries(d, 1, 1, {kBatches}, kBytes) == "");
  }
  // The restarted leader resumed at NextBatchId (>= everything acknowledged before the kill).
  std::vector<uint64_t> resumed = AckedBatches(l2.acks);
  REQUIRE_FALSE(resumed.empty());
  CHECK(resumed.front() >= *std::max_element(killed_acks.begin(), killed_acks.end()) + 1);
  CHECK(resumed.back() == kBatches - 1);
}

TEST_CASE("zookeeper ensemble of 3: the ZooKeeper leader is killed mid-stream / the stream completes") {
  constexpr uint64_t kBatches = 200;
  constexpr size_t kBytes = 10000;
  TempDir dir;
  const std::string script = std::string("bash ") + QRSTORE_SOURCE_DIR + "/scripts/zk-server.sh ";
  struct Ensemble {
    std::string script, dir;
    ~Ensemble() { (void)!std::system((script + "stop " + dir + " >/dev/null 2>&1").c_str()); }
  } ensemble{script, dir.path + "/zk"};
  FILE* p = ::popen((script + "start " + ensemble.dir + " --servers 3").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[1024] = {0};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  const int rc = ::pclose(p);
  std::string hosts = got ? std::string(buf) : std::string();
  while (!hosts.empty() && (hosts.back() == '\n' || hosts.back() == ' ')) hosts.pop_back();
  INFO("zk-server.sh start --servers 3 exit " << rc << ", connect string '" << hosts << "'");
  REQUIRE(rc == 0);
  REQUIRE_FALSE(hosts.empty());

  // A long session: a loaded machine (the sanitizer builds, three JVMs on two cores) once took
  // 38 s to elect the ensemble's next leader, and the default 10 s session had expired by then
  // (zk-server.sh allows sessions up to 60 s).
  GroupSpec spec(3, 1, 1, "none", {"replication.zookeeper.hosts=" + hosts, "replication.zookeeper.session_timeout_ms=45000"});
  std::unique_ptr<Replicator> leader = spec.Create(0).value();
  REQUIRE(leader->Start().ok());
  std::vector<std::unique_ptr<Replicator>> followers;
  std::vector<std::unique_ptr<tools::StreamReceiver>> receivers;
  for (uint32_t i = 1; i <= 2; ++i) {
    followers.push_back(spec.Create(i).value());
    REQUIRE(followers.back()->Start().ok());
    receivers.push_back(std::make_unique<tools::StreamReceiver>(followers.back().get(), 1, 1, "f" + std::to_string(i), nullptr));
    receivers.back()->Start();
  }
  tools::DriverOptions d;
  d.payload_bytes = kBytes;
  d.inflight = 10;
  d.batches_per_stream = kBatches;
  tools::Driver driver(leader.get(), d, nullptr);
  bool killed = false;
  const int64_t deadline = NowMillis() + 90000;
  while (!(driver.AllStreamsComplete() && driver.inflight() == 0) && NowMillis() < deadline) {
    driver.Poll(20);
    if (!killed && driver.acked() >= 60) {
      FILE* q = ::popen((script + "leader " + ensemble.dir).c_str(), "r");
      REQUIRE(q != nullptr);
      char idx[64] = {0};
      const bool have = std::fgets(idx, sizeof idx, q) != nullptr;
      ::pclose(q);
      REQUIRE(have);
      const std::string which = std::string(idx).substr(0, std::string(idx).find_first_of("\n "));
      REQUIRE(std::system((script + "kill-one " + ensemble.dir + " " + which + " >/dev/null 2>&1").c_str()) == 0);
      killed = true;
    }
  }
  INFO("acked " << driver.acked() << " failed " << driver.failed() << " (" << driver.last_failure() << ")");
  CHECK(killed);
  if (!driver.AllStreamsComplete()) {
    // Say what the ensemble was doing: its logs go with the temporary directory.
    (void)!std::system((script + "status " + ensemble.dir + " >&2; tail -n 30 " + ensemble.dir + "/s*/server.log >&2").c_str());
  }
  REQUIRE(driver.AllStreamsComplete());
  for (auto& r : receivers) CHECK(r->WaitDelivered(kBatches, 60000));
  for (auto& f : followers) f->Stop();
  for (auto& r : receivers) {
    r->Stop();
    INFO(r->first_error());
    CHECK(r->errors() == 0);
    CHECK(r->PerStream() == std::vector<uint64_t>{kBatches});
  }
  leader->Stop();
}

#endif  // QRSTORE_CONFORMANCE_zookeeper
