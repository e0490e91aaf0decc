#include "tests/integration/replication/harness.h"

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <thread>

#include "common/clock.h"
#include "common/hash.h"
#include "replication/factory.h"
#include "replication/tools/payload.h"
#include "replication/tools/process.h"

namespace qrstore::replication::conformance {

namespace {

// Runs a shell command, returns its stdout (trimmed) or an error with its output.
Result<std::string> RunCapture(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return Status::IoError("popen failed: " + cmd);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (rc != 0) return Status::Unavailable("'" + cmd + "' failed (" + std::to_string(rc) + "): " + out);
  return out;
}

// A ZooKeeper server this test binary started itself; stopped when the binary exits.
struct OwnZkServer {
  std::string dir;
  Result<std::string> hosts = Status::Unavailable("not started");
  ~OwnZkServer() {
    if (!dir.empty()) {
      (void)RunCapture("bash " QRSTORE_SOURCE_DIR "/scripts/zk-server.sh stop " + dir + " 2>&1");
      tools::RemoveTree(dir);
    }
  }
};

uint64_t NextUnique() {
  static uint64_t n = 0;
  return ++n;
}

}  // namespace

std::string Backend() { return QRSTORE_CONFORMANCE_BACKEND; }

Result<std::string> ZkHosts() {
  const char* env = std::getenv("QRSTORE_ZK_HOSTS");
  if (env != nullptr && *env != '\0') return std::string(env);
  static OwnZkServer server;
  if (server.dir.empty()) {
    Result<std::string> dir = tools::MakeTempDir("qrstore-conformance-zk-");
    if (!dir.ok()) return dir.status();
    server.dir = dir.value();
    server.hosts = RunCapture("bash " QRSTORE_SOURCE_DIR "/scripts/zk-server.sh start " + server.dir);
    if (!server.hosts.ok()) {
      server.hosts = Status::Unavailable(
          "no ZooKeeper server: QRSTORE_ZK_HOSTS is unset and scripts/zk-server.sh could not start one: " +
          server.hosts.status().message());
    }
  }
  return server.hosts;
}

GroupSpec::GroupSpec(uint32_t members, uint32_t groups, uint32_t planners, std::string compression,
                     std::vector<std::string> extra)
    : members_(members), groups_(groups), planners_(planners) {
  AddConfigKeys(&schema_);
  const std::string backend = Backend();
  // The pid alone repeats across runs against one ZooKeeper server (CI runs three builds' tests
  // against the same one): a reused pid met an earlier run's znodes under the same root. The
  // process's start time (once per process) tells such runs apart.
  static const std::string run =
      std::to_string(::getpid()) + "-" +
      std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
  const std::string unique = run + "-" + std::to_string(NextUnique());
  common_ = {"replication.backend=" + backend, "replication.compression=" + compression,
             "replication.groups=" + std::to_string(groups), "replication.planners=" + std::to_string(planners)};
  if (backend == "none") {
    common_.push_back("replication.none.hub=conformance-" + unique);
  } else if (backend == "raft") {
    std::string members_list;
    for (uint32_t i = 0; i < members; ++i) {
      Result<uint16_t> port = tools::FreeTcpPort();
      QR_CHECK(port.ok(), "%s", port.status().ToString().c_str());
      members_list += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(port.value());
    }
    common_.push_back("replication.raft.members=" + members_list);
    common_.push_back("replication.raft.preferred_leader=0");
  } else {
    zk_hosts_from_env_ = std::none_of(extra.begin(), extra.end(), [](const std::string& e) {
      return e.rfind("replication.zookeeper.hosts=", 0) == 0;
    });
    if (zk_hosts_from_env_) {
      Result<std::string> hosts = ZkHosts();
      // An empty hosts key makes the backend fail with a clear error in Create (no skip).
      common_.push_back("replication.zookeeper.hosts=" + (hosts.ok() ? hosts.value() : std::string()));
    }
  }
  if (backend == "zookeeper") common_.push_back("replication.zookeeper.root=/conformance-" + unique);
  for (auto& e : extra) common_.push_back(std::move(e));
}

std::vector<std::string> GroupSpec::Overrides(uint32_t member) const {
  std::vector<std::string> o = common_;
  const std::string backend = Backend();
  if (backend == "raft") {
    QR_CHECK_LT(member, members_);
    o.push_back("replication.raft.node_id=" + std::to_string(member));
  } else {
    o.push_back(std::string("replication.role=") + (member == 0 ? "leader" : "follower"));
    if (backend == "zookeeper" && member > 0) o.push_back("replication.zookeeper.follower_id=f" + std::to_string(member));
  }
  return o;
}

Result<std::unique_ptr<Replicator>> GroupSpec::Create(uint32_t member) const {
  if (Backend() == "zookeeper" && zk_hosts_from_env_) {
    Result<std::string> hosts = ZkHosts();
    if (!hosts.ok()) return hosts.status();
  }
  Result<Config> c = Config::LoadString(schema_, "", Overrides(member));
  if (!c.ok()) return c.status();
  return CreateReplicator(c.value());
}

bool WaitLeader(Replicator* r, uint32_t groups, int64_t timeout_ms) {
  const int64_t deadline = NowMillis() + timeout_ms;
  for (uint32_t g = 0; g < groups; ++g) {
    while (!r->IsLeader(g)) {
      if (NowMillis() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return true;
}

std::vector<Delivery> ReadDeliveries(const std::string& path) {
  std::vector<Delivery> out;
  for (const std::string& line : tools::ReadCompleteLines(path)) {
    Delivery d;
    unsigned g = 0, p = 0;
    unsigned long long b = 0, n = 0, h = 0;
    if (std::sscanf(line.c_str(), "%u %u %llu %llu %llx", &g, &p, &b, &n, &h) != 5) {
      d.group = UINT32_MAX;  // malformed: reported by CheckDeliveries
    } else {
      d.group = g;
      d.planner = p;
      d.batch = b;
      d.bytes = n;
      d.hash = h;
    }
    out.push_back(d);
  }
  return out;
}

std::string CheckDeliveries(const std::vector<Delivery>& d, uint32_t groups, uint32_t planners,
                            const std::vector<uint64_t>& n_per_stream, size_t payload_bytes) {
  std::vector<uint64_t> next(static_cast<size_t>(groups) * planners, 0);
  for (size_t i = 0; i < d.size(); ++i) {
    const Delivery& x = d[i];
    if (x.group >= groups || x.planner >= planners) return "line " + std::to_string(i + 1) + ": malformed or unknown stream";
    uint64_t& n = next[static_cast<size_t>(x.group) * planners + x.planner];
    const std::string where = "line " + std::to_string(i + 1) + " (g" + std::to_string(x.group) + "/p" +
                              std::to_string(x.planner) + " batch " + std::to_string(x.batch) + "): ";
    if (x.batch != n) {
      return where + (x.batch < n ? "duplicate" : "gap") + ", expected batch " + std::to_string(n);
    }
    if (x.bytes != payload_bytes) return where + "size " + std::to_string(x.bytes) + ", expected " + std::to_string(payload_bytes);
    if (x.hash != BulkHash64(tools::MakePayload(x.group, x.planner, x.batch, payload_bytes))) return where + "content hash differs";
    ++n;
  }
  for (size_t s = 0; s < next.size(); ++s) {
    if (next[s] != n_per_stream[s]) {
      return "stream " + std::to_string(s) + ": " + std::to_string(next[s]) + " batches delivered, expected " +
             std::to_string(n_per_stream[s]);
    }
  }
  return "";
}

}  // namespace qrstore::replication::conformance
