// Config handling of the ZooKeeper backend: defaults, validation errors naming their keys,
// the QRSTORE_ZK_HOSTS fallback. No server needed (nothing connects before Start).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "replication/zookeeper/zk_replicator.h"

using namespace qrstore;
using namespace qrstore::replication;
using namespace qrstore::replication::zookeeper;

namespace {
// The common replication keys belong to replication/factory; this test declares its own.
ConfigSchema Schema() {
  ConfigSchema s;
  s.AddString("replication.role", "leader", "role", {"leader", "follower"});
  s.AddInt("replication.groups", 1, 1, 1000000, "groups");
  s.AddInt("replication.planners", 1, 1, 1000000, "planners");
  AddConfigKeys(&s);
  return s;
}

// Restores QRSTORE_ZK_HOSTS when the test ends.
class EnvGuard {
 public:
  EnvGuard() {
    const char* v = std::getenv("QRSTORE_ZK_HOSTS");
    had_ = v != nullptr;
    if (had_) old_ = v;
  }
  ~EnvGuard() {
    if (had_) {
      setenv("QRSTORE_ZK_HOSTS", old_.c_str(), 1);
    } else {
      unsetenv("QRSTORE_ZK_HOSTS");
    }
  }

 private:
  bool had_ = false;
  std::string old_;
};
}  // namespace

TEST_CASE("zk config: defaults and explicit values") {
  ConfigSchema schema = Schema();
  auto c = Config::LoadString(schema, "", {"replication.zookeeper.hosts=127.0.0.1:1234", "replication.role=follower",
                                           "replication.zookeeper.follower_id=f1", "replication.groups=2"});
  REQUIRE(c.ok());
  auto o = OptionsFromConfig(c.value());
  REQUIRE(o.ok());
  CHECK(o->hosts == "127.0.0.1:1234");
  CHECK(o->root == "/qrstore");
  CHECK_FALSE(o->leader);
  CHECK(o->groups == 2);
  CHECK(o->planners == 1);
  CHECK(o->chunk_bytes == 900 * 1024);
  CHECK(o->follower_id == "f1");
  CHECK(o->followers == 0);
  CHECK(o->election);  // on by default (it takes effect only with followers > 0)
  CHECK(o->max_inflight_bytes == 8u << 20);
  CHECK(o->retain_bytes == 256u << 20);
  CHECK(o->progress_interval_ms == 200);
}

TEST_CASE("zk config: hosts falls back to QRSTORE_ZK_HOSTS, and is required") {
  EnvGuard guard;
  ConfigSchema schema = Schema();
  auto c = Config::LoadString(schema, "", {});
  REQUIRE(c.ok());
  setenv("QRSTORE_ZK_HOSTS", "127.0.0.1:5555", 1);
  auto o = OptionsFromConfig(c.value());
  REQUIRE(o.ok());
  CHECK(o->hosts == "127.0.0.1:5555");
  unsetenv("QRSTORE_ZK_HOSTS");
  auto bad = OptionsFromConfig(c.value());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("replication.zookeeper.hosts") != std::string::npos);
  CHECK(bad.status().message().find("QRSTORE_ZK_HOSTS") != std::string::npos);
  auto r = CreateZkReplicator(c.value());
  CHECK_FALSE(r.ok());
}

TEST_CASE("zk config: every violation is reported with its key") {
  EnvGuard guard;
  unsetenv("QRSTORE_ZK_HOSTS");
  ConfigSchema schema = Schema();
  auto c = Config::LoadString(schema, "",
                              {"replication.zookeeper.root=relative/path", "replication.zookeeper.follower_id=a/b"});
  REQUIRE(c.ok());
  auto o = OptionsFromConfig(c.value());
  REQUIRE_FALSE(o.ok());
  const std::string& msg = o.status().message();
  CHECK(msg.find("replication.zookeeper.hosts") != std::string::npos);
  CHECK(msg.find("replication.zookeeper.root") != std::string::npos);
  CHECK(msg.find("replication.zookeeper.follower_id") != std::string::npos);

  // Range checks are the schema's: out-of-range chunk sizes never reach the backend.
  auto big = Config::LoadString(schema, "", {"replication.zookeeper.chunk_bytes=2000000"});
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message().find("replication.zookeeper.chunk_bytes") != std::string::npos);
  auto zero = Config::LoadString(schema, "", {"replication.zookeeper.max_inflight=0"});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().message().find("replication.zookeeper.max_inflight") != std::string::npos);
  auto unknown = Config::LoadString(schema, "", {"replication.zookeeper.hostz=x:1"});
  CHECK_FALSE(unknown.ok());
}

TEST_CASE("zk config: hosts must look like host:port") {
  ConfigSchema schema = Schema();
  auto c = Config::LoadString(schema, "", {"replication.zookeeper.hosts=localhost"});
  REQUIRE(c.ok());
  auto o = OptionsFromConfig(c.value());
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().message().find("host:port") != std::string::npos);
}

TEST_CASE("zk config: a stopped or never-started replicator aborts calls cleanly") {
  ZkOptions o;
  o.hosts = "127.0.0.1:1";  // never contacted: Start is not called
  auto r = CreateZkReplicator(o);
  REQUIRE(r.ok());
  Status got = Status::Ok();
  r.value()->ReplicateData(ReplicateMeta{0, 0, 0}, "x", [&](const ReplicateMeta&, Status s) { got = s; });
  CHECK(got.code() == StatusCode::kAborted);
  CHECK(r.value()->Name() == "zookeeper");
  CHECK(r.value()->IsLeader(0));
  CHECK_FALSE(r.value()->IsLeader(1));
  r.value()->Stop();
  r.value()->Stop();  // idempotent
}

TEST_CASE("zk config: Start fails with kUnavailable when no server answers") {
  ZkOptions o;
  o.hosts = "127.0.0.1:1";  // port 1: nothing listens
  o.connect_timeout_ms = 300;
  auto r = CreateZkReplicator(o);
  REQUIRE(r.ok());
  Status s = r.value()->Start();
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK(s.message().find("127.0.0.1:1") != std::string::npos);
  r.value()->Stop();
}

TEST_CASE("zk config: replication.zookeeper.election") {
  ConfigSchema schema = Schema();
  auto c = Config::LoadString(schema, "", {"replication.zookeeper.hosts=127.0.0.1:1234",
                                           "replication.zookeeper.election=false", "replication.zookeeper.followers=2"});
  REQUIRE(c.ok());
  auto o = OptionsFromConfig(c.value());
  REQUIRE(o.ok());
  CHECK_FALSE(o->election);
  CHECK(o->followers == 2);
  CHECK_FALSE(Config::LoadString(schema, "", {"replication.zookeeper.election=maybe"}).ok());
}
