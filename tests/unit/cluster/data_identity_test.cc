#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "cluster/recovery/data_identity.h"
#include "common/file.h"

using namespace qrstore;
using namespace qrstore::cluster;

namespace {
const char* kNodes =
    "cluster:\n  name: idt\n  nodes:\n"
    "    - {name: n0, host: 127.0.0.1, client_port: 7100, peer_port: 7200, row: 0}\n"
    "    - {name: n1, host: 127.0.0.1, client_port: 7101, peer_port: 7201, row: 1}\n";

Config Load(const ConfigSchema& s, const std::string& extra, std::vector<std::string> overrides = {}) {
  auto c = Config::LoadString(s, std::string(kNodes) + extra, overrides);
  REQUIRE(c.ok());
  return std::move(c).value();
}

std::string TempDir() {
  char tmpl[] = "/tmp/qrstore-identity-test.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("data identity: the file round-trips, and a damaged one is not taken for one") {
  ConfigSchema s;
  AddClusterConfigKeys(&s);
  const Config c = Load(s, "ycsb:\n  records: 5000\n");
  auto topo = Topology::FromConfig(c);
  REQUIRE(topo.ok());
  const DataIdentity id = NodeDataIdentity(c, topo.value(), *topo->Find("n1").value());
  auto back = DecodeDataIdentity(EncodeDataIdentity(id));
  REQUIRE(back.ok());
  CHECK(back.value() == id);
  // The table's shape, the node's place, the streams and the backend are in it; keys of
  // another workload kind are not.
  auto value = [&](const std::string& k) {
    for (const auto& [key, v] : id) {
      if (key == k) return v;
    }
    return std::string("<none>");
  };
  CHECK(value("ycsb.records") == "5000");
  CHECK(value("node.row") == "1");
  CHECK(value("cluster.nodes") == "n0:p0r0,n1:p0r1");
  CHECK(value("threads.planners") == "1");
  CHECK(value("replication.backend") == "none");  // the schema's default
  CHECK(value("replication.point") == "plan");
  CHECK(value("transfer.accounts") == "<none>");
  CHECK(!DecodeDataIdentity("").ok());
  CHECK(!DecodeDataIdentity("something else\nk=v\n").ok());
  CHECK(!DecodeDataIdentity(EncodeDataIdentity(id) + "no equals sign\n").ok());
  CHECK(!DecodeDataIdentity(EncodeDataIdentity(id) + "k=v").ok());  // the last line cut
}

TEST_CASE("data identity: recorded where missing, then every differing key refused with both values") {
  ConfigSchema s;
  AddClusterConfigKeys(&s);
  const std::string dir = TempDir();
  const std::string folder = dir + "/ck/n0";
  const Config made = Load(s, "ycsb:\n  records: 5000\n");
  auto topo = Topology::FromConfig(made);
  REQUIRE(topo.ok());
  const NodeInfo& n0 = *topo->Find("n0").value();
  std::vector<std::string> without;
  // A check that does not record leaves the folder alone.
  REQUIRE(CheckDataIdentity({folder}, NodeDataIdentity(made, topo.value(), n0), made, "n0", false, &without).ok());
  CHECK(without == std::vector<std::string>{folder});
  CHECK(file::ReadFile(folder + "/IDENTITY", 1 << 20).status().code() == StatusCode::kNotFound);
  without.clear();
  REQUIRE(CheckDataIdentity({folder}, NodeDataIdentity(made, topo.value(), n0), made, "n0", true, &without).ok());
  CHECK(file::ReadFile(folder + "/IDENTITY", 1 << 20).ok());
  without.clear();
  // The same config again: nothing to record, nothing refused.
  REQUIRE(CheckDataIdentity({folder}, NodeDataIdentity(made, topo.value(), n0), made, "n0", true, &without).ok());
  CHECK(without.empty());

  // Another table: refused, naming each key with the data's value and the config's, and the ways on.
  const Config other = Load(s, "ycsb:\n  records: 9000\n", {"threads.planners=2"});
  const Status st = CheckDataIdentity({folder}, NodeDataIdentity(other, topo.value(), n0), other, "n0", true, &without);
  REQUIRE(st.code() == StatusCode::kInvalidArgument);
  CHECK(Has(st.message(), "ycsb.records: 5000 in the data, 9000 in the config"));
  CHECK(Has(st.message(), "threads.planners: 1 in the data, 2 in the config"));
  CHECK(Has(st.message(), "--ycsb.records=5000 --threads.planners=1"));
  CHECK(!Has(st.message(), "--engine.key_space="));  // derived from the records, not set
  CHECK(Has(st.message(), "--fresh"));

  // Another node's place (a row swapped) is refused too; no --key suggests it.
  auto topo2 = Topology::FromConfig(made);
  NodeInfo moved = n0;
  moved.row = 1;
  const Status st2 = CheckDataIdentity({folder}, NodeDataIdentity(made, topo2.value(), moved), made, "n0", true, &without);
  REQUIRE(st2.code() == StatusCode::kInvalidArgument);
  CHECK(Has(st2.message(), "node.row: 0 in the data, 1 in the config"));
  CHECK(!Has(st2.message(), "--node.row"));

  // Another replication point: a log of inputs is not a log of planned slices.
  const Config input = Load(s, "ycsb:\n  records: 5000\n", {"replication.point=input"});
  const Status st4 = CheckDataIdentity({folder}, NodeDataIdentity(input, topo.value(), n0), input, "n0", true, &without);
  REQUIRE(st4.code() == StatusCode::kInvalidArgument);
  CHECK(Has(st4.message(), "replication.point: plan in the data, input in the config"));
  CHECK(Has(st4.message(), "--replication.point=plan"));
  // Data recorded before the key existed: it replicated planned slices, so plan is accepted
  // and input refused.
  std::string old_text = EncodeDataIdentity(NodeDataIdentity(made, topo.value(), n0));
  old_text.erase(old_text.find("replication.point=plan\n"), std::string("replication.point=plan\n").size());
  REQUIRE(file::WriteFileAtomic(folder + "/IDENTITY", old_text).ok());
  CHECK(CheckDataIdentity({folder}, NodeDataIdentity(made, topo.value(), n0), made, "n0", true, &without).ok());
  const Status st5 = CheckDataIdentity({folder}, NodeDataIdentity(input, topo.value(), n0), input, "n0", true, &without);
  CHECK(Has(st5.message(), "replication.point: not recorded in the data, input in the config"));

  // A damaged identity file is refused, not overwritten.
  REQUIRE(file::WriteFileAtomic(folder + "/IDENTITY", "garbage\n").ok());
  const Status st3 = CheckDataIdentity({folder}, NodeDataIdentity(made, topo.value(), n0), made, "n0", true, &without);
  CHECK(st3.code() == StatusCode::kInvalidArgument);
  CHECK(Has(st3.message(), "not a data identity file"));
  CHECK(file::ReadFile(folder + "/IDENTITY", 1 << 20).value() == "garbage\n");
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}
