#include <catch2/catch.hpp>

#include "common/config.h"

using namespace qrstore;

namespace {
ConfigSchema TestSchema() {
  ConfigSchema s;
  s.AddInt("batch.txns", 10000, 1, 1000000, "txns per batch");
  s.AddDouble("ycsb.theta", 0.0, 0.0, 10.0, "zipf");
  s.AddBool("engine.node_sync", false, "barrier per batch");
  s.AddString("workload.kind", "ycsb", "workload", {"ycsb", "transfer"});
  s.AddList("raft.members", "a:1,b:2", "members");
  return s;
}
}  // namespace

TEST_CASE("config: defaults, yaml and overrides") {
  ConfigSchema s = TestSchema();
  auto r = Config::LoadString(s, "batch:\n  txns: 500\nycsb:\n  theta: 0.5\n", {"ycsb.theta=0.99"});
  REQUIRE(r.ok());
  CHECK(r->GetInt("batch.txns") == 500);
  CHECK(r->GetDouble("ycsb.theta") == Approx(0.99));
  CHECK_FALSE(r->GetBool("engine.node_sync"));
  CHECK(r->GetString("workload.kind") == "ycsb");
  CHECK(r->GetList("raft.members") == std::vector<std::string>{"a:1", "b:2"});
}

TEST_CASE("config: yaml lists") {
  ConfigSchema s = TestSchema();
  auto r = Config::LoadString(s, "raft:\n  members: [x:1, y:2, z:3]\n", {});
  REQUIRE(r.ok());
  CHECK(r->GetList("raft.members").size() == 3);
}

TEST_CASE("config: every violation is reported with its key") {
  ConfigSchema s = TestSchema();
  auto r = Config::LoadString(s, "batch:\n  txnz: 5\n  txns: abc\nworkload:\n  kind: tpcc\n",
                              {"ycsb.theta=-1", "noequals"});
  REQUIRE_FALSE(r.ok());
  const std::string& m = r.status().message();
  CHECK(m.find("batch.txnz: unknown key") != std::string::npos);
  CHECK(m.find("batch.txns") != std::string::npos);  // named in the hint and the type error
  CHECK(m.find("batch.txns: expected an integer") != std::string::npos);
  CHECK(m.find("workload.kind: must be one of ycsb|transfer") != std::string::npos);
  CHECK(m.find("ycsb.theta: must be in") != std::string::npos);
  CHECK(m.find("override 'noequals'") != std::string::npos);
}

TEST_CASE("config: range, bool and syntax errors") {
  ConfigSchema s = TestSchema();
  CHECK_FALSE(Config::LoadString(s, "", {"batch.txns=0"}).ok());
  CHECK_FALSE(Config::LoadString(s, "", {"batch.txns=1.5"}).ok());
  CHECK_FALSE(Config::LoadString(s, "", {"engine.node_sync=maybe"}).ok());
  CHECK(Config::LoadString(s, "", {"engine.node_sync=yes"})->GetBool("engine.node_sync"));
  auto bad = Config::LoadString(s, "batch: [1, 2\n", {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("YAML") != std::string::npos);
  CHECK_FALSE(Config::Load(s, "/nonexistent/file.yaml", {}).ok());
}
