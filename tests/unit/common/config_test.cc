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

namespace {
ConfigSchema TableSchema() {
  ConfigSchema s;
  s.AddString("cluster.name", "c", "name");
  s.AddTable("cluster.nodes", "the nodes",
             {StringColumn("name", "", "node name", true), IntColumn("port", 0, 1, 65535, "port", true),
              IntColumn("row", 0, 0, 64, "row")});
  return s;
}
}  // namespace

TEST_CASE("config: a list of maps becomes validated rows with defaults") {
  ConfigSchema s = TableSchema();
  auto r = Config::LoadString(s, "cluster:\n  nodes:\n    - {name: a, port: 7000}\n    - {name: b, port: 7001, row: 1}\n", {});
  REQUIRE(r.ok());
  const auto& rows = r->GetTable("cluster.nodes");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].GetString("name") == "a");
  CHECK(rows[0].GetInt("port") == 7000);
  CHECK(rows[0].GetInt("row") == 0);
  CHECK_FALSE(rows[0].IsSet("row"));
  CHECK(rows[1].GetInt("row") == 1);
  CHECK(rows[1].IsSet("row"));
  CHECK(r->IsSet("cluster.nodes"));
  CHECK_FALSE(r->IsSet("cluster.name"));
  CHECK(r->Dump().find("cluster.nodes[1]: name=b port=7001 row=1") != std::string::npos);
  CHECK(r->DumpJson().find("\"cluster.nodes\":[{\"name\":\"a\"") != std::string::npos);
  // Absent: an empty table.
  auto e = Config::LoadString(s, "", {});
  REQUIRE(e.ok());
  CHECK(e->GetTable("cluster.nodes").empty());
}

TEST_CASE("config: table errors name the row and column") {
  ConfigSchema s = TableSchema();
  auto r = Config::LoadString(s,
                              "cluster:\n  nodes:\n    - {name: a, prot: 7000}\n    - {name: b, port: 0}\n"
                              "    - {name: c, port: [1, 2]}\n    - 5\n",
                              {"cluster.nodes=x"});
  REQUIRE_FALSE(r.ok());
  const std::string& m = r.status().message();
  CHECK(m.find("cluster.nodes[0].prot: unknown column (columns: name, port, row)") != std::string::npos);
  CHECK(m.find("cluster.nodes[0].port: required") != std::string::npos);
  CHECK(m.find("cluster.nodes[1].port: must be in [1, 65535]") != std::string::npos);
  CHECK(m.find("cluster.nodes[2].port: must be a plain value") != std::string::npos);
  CHECK(m.find("cluster.nodes[3]: every item of a list of maps must be a map") != std::string::npos);
  CHECK(m.find("cluster.nodes: a list of maps is set in the YAML file only") != std::string::npos);
  // A scalar key given a list of maps.
  auto w = Config::LoadString(s, "cluster:\n  name:\n    - {a: 1}\n", {});
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message().find("cluster.name: expected string, got a list of maps") != std::string::npos);
}

TEST_CASE("config: WithOverrides re-validates on top of what was given") {
  ConfigSchema s = TestSchema();
  auto r = Config::LoadString(s, "batch:\n  txns: 500\n", {"ycsb.theta=0.5"});
  REQUIRE(r.ok());
  auto w = r->WithOverrides({"raft.members=p:1,q:2,r:3", "ycsb.theta=0.7"});
  REQUIRE(w.ok());
  CHECK(w->GetInt("batch.txns") == 500);
  CHECK(w->GetDouble("ycsb.theta") == Approx(0.7));
  CHECK(w->GetList("raft.members").size() == 3);
  CHECK(w->IsSet("raft.members"));
  CHECK_FALSE(r->IsSet("raft.members"));
  auto bad = r->WithOverrides({"batch.txns=0"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("batch.txns: must be in") != std::string::npos);
}
