#include <catch2/catch.hpp>

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"

using namespace qrstore;
using namespace qrstore::cluster;

namespace {
Result<Topology> Load(const ConfigSchema& s, const std::string& nodes_yaml) {
  auto c = Config::LoadString(s, "cluster:\n  name: t\n  nodes:\n" + nodes_yaml, {});
  if (!c.ok()) return c.status();
  return Topology::FromConfig(c.value());
}
ConfigSchema Schema() {
  ConfigSchema s;
  AddClusterConfigKeys(&s);
  return s;
}
}  // namespace

TEST_CASE("topology: a leader and two followers of one partition") {
  ConfigSchema s = Schema();
  auto t = Load(s,
                "    - {name: n1, host: 127.0.0.1, client_port: 7101, peer_port: 7201, row: 1}\n"
                "    - {name: n0, host: 127.0.0.1, client_port: 7100, peer_port: 7200, row: 0}\n"
                "    - {name: n2, host: 127.0.0.1, client_port: 7102, peer_port: 7202, row: 2}\n");
  REQUIRE(t.ok());
  CHECK(t->name() == "t");
  CHECK(t->partitions() == 1);
  CHECK(t->rows() == 3);
  CHECK(t->replication_factor() == 2);
  CHECK(t->Leader(0).name == "n0");
  CHECK(t->Leader(0).client_address() == "127.0.0.1:7100");
  auto g = t->Group(0);
  REQUIRE(g.size() == 3);
  CHECK(g[1]->name == "n1");
  CHECK(g[2]->peer_address() == "127.0.0.1:7202");
  auto f = t->Find("n2");
  REQUIRE(f.ok());
  CHECK(f.value()->row == 2);
  auto missing = t->Find("n9");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "--node n9: not in cluster.nodes (nodes: n1, n0, n2)");
}

TEST_CASE("topology: every error names its key") {
  ConfigSchema s = Schema();
  auto t = Load(s,
                "    - {name: n0, host: 127.0.0.1, client_port: 7100, peer_port: 7200, row: 1}\n"
                "    - {name: n0, host: 127.0.0.1, client_port: 7101, peer_port: 7100, row: 2}\n"
                "    - {name: 'a b', host: 127.0.0.1, client_port: 7102, peer_port: 7202, row: 2}\n");
  REQUIRE_FALSE(t.ok());
  const std::string& m = t.status().message();
  CHECK(m.find("cluster.nodes[1].name: 'n0' is also cluster.nodes[0].name") != std::string::npos);
  CHECK(m.find("cluster.nodes[1].peer_port: 127.0.0.1:7100 is also used by cluster.nodes[0].client_port") !=
        std::string::npos);
  CHECK(m.find("cluster.nodes[2].name: 'a b' must be") != std::string::npos);
  CHECK(m.find("cluster.nodes[2]: partition 0 row 2 is also cluster.nodes[1]") != std::string::npos);
  CHECK(m.find("partition 0 has no leader (no node with row 0)") != std::string::npos);

  auto none = Load(s, "    []\n");
  REQUIRE_FALSE(none.ok());
  auto c = Config::LoadString(s, "", {});
  REQUIRE(c.ok());
  auto empty = Topology::FromConfig(c.value());
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message().find("cluster.nodes: no nodes") != std::string::npos);

  auto hole = Load(s,
                   "    - {name: a, host: h, client_port: 1, peer_port: 2, row: 0}\n"
                   "    - {name: b, host: h, client_port: 3, peer_port: 4, row: 2}\n");
  REQUIRE_FALSE(hole.ok());
  CHECK(hole.status().message().find("partition 0 has no node in row 1") != std::string::npos);

  auto missing_col = Load(s, "    - {name: a, host: h, client_port: 1, row: 0}\n");
  REQUIRE_FALSE(missing_col.ok());
  CHECK(missing_col.status().message().find("cluster.nodes[0].peer_port: required") != std::string::npos);
}
