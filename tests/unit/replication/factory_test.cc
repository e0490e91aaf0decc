// The factory: config keys, validation errors naming keys, backend choice and the decorator.
#include <catch2/catch.hpp>

#include "replication/factory.h"

using namespace qrstore;
using namespace qrstore::replication;

namespace {

ConfigSchema Schema() {
  ConfigSchema s;
  AddConfigKeys(&s);
  return s;
}

}  // namespace

TEST_CASE("factory: defaults give a framed none backend") {
  ConfigSchema schema = Schema();
  Result<Config> c = Config::LoadString(schema, "", {"replication.none.hub=factory-test"});
  REQUIRE(c.ok());
  Result<std::unique_ptr<Replicator>> r = CreateReplicator(c.value());
  REQUIRE(r.ok());
  CHECK(r.value()->Name() == "none");
  REQUIRE(r.value()->Start().ok());
  Status got = Status::Internal("no callback");
  r.value()->ReplicateData(ReplicateMeta{0, 0, 0}, "abc", [&](const ReplicateMeta&, Status s) { got = s; });
  CHECK(got.ok());
  r.value()->Stop();
}

TEST_CASE("factory: snappy wraps the name / invalid values name their keys") {
  ConfigSchema schema = Schema();
  Result<Config> c = Config::LoadString(schema, "replication:\n  compression: snappy\n", {});
  REQUIRE(c.ok());
  CHECK(CreateReplicator(c.value()).value()->Name() == "none+snappy");

  Result<Config> bad = Config::LoadString(schema, "", {"replication.backend=paxos", "replication.groups=0"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("replication.backend") != std::string::npos);
  CHECK(bad.status().message().find("replication.groups") != std::string::npos);
}

TEST_CASE("factory: a backend missing from the build is a clear error / every built one is creatable") {
  ConfigSchema schema = Schema();
  std::vector<std::string> built = BuiltBackends();
  for (const std::string& b : {std::string("raft"), std::string("zookeeper")}) {
    if (std::find(built.begin(), built.end(), b) != built.end()) continue;
    Result<Config> c = Config::LoadString(schema, "", {"replication.backend=" + b});
    REQUIRE(c.ok());
    Result<std::unique_ptr<Replicator>> r = CreateReplicator(c.value());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("not built") != std::string::npos);
  }
  CHECK(built.front() == "none");
}
