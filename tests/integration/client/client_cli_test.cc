// qrstore-client as a user runs it, against in-process FakeServers on 127.0.0.1 (ports chosen
// free at run time): the program is spawned with a config naming the fakes, its exit status,
// stdout, stderr and --json line are checked, and the fakes tell what the client did to them
// (how many txns it kept in flight, the state it left). Each run takes well under a second
// except the ones that wait for a timeout on purpose (a few hundred ms).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "cluster/config/cluster_config.h"
#include "common/clock.h"
#include "common/thread.h"
#include "storage/table.h"
#include "tests/integration/client/fake_server.h"
#include "tests/integration/raft/raft_test_util.h"
#include "workloads/reference_executor.h"

extern char** environ;

using namespace qrstore;
using replication::raft::testing::FreePorts;
using testing::FakeServer;
using testing::FakeServerOptions;
using testing::FollowerState;

namespace {

std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }

// One scratch folder per test process, removed when the process exits.
std::string TempDir() {
  struct Dir {
    std::string path;
    Dir() {
      char tmpl[] = "/tmp/qrstore-client-test.XXXXXX";
      REQUIRE(mkdtemp(tmpl) != nullptr);
      path = tmpl;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  REQUIRE(out.good());
}

struct Output {
  int code = -1;
  std::string out, err;
  bool Has(const std::string& s) const { return out.find(s) != std::string::npos || err.find(s) != std::string::npos; }
  std::string Show() const { return "exit " + std::to_string(code) + "\n--- stdout\n" + out + "--- stderr\n" + err; }
};

// Runs `argv` with stdout/stderr (and stdin from `stdin_path` if given) redirected to files;
// kills it after timeout_s.
Output Run(const std::vector<std::string>& argv, int timeout_s = 60, const std::string& stdin_path = "") {
  static int runs = 0;
  const std::string base = TempDir() + "/run" + std::to_string(runs++);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, (base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!stdin_path.empty()) posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  REQUIRE(posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  // A waiter thread blocks in waitpid; the test thread waits for it with a deadline.
  std::mutex mu;
  std::condition_variable cv;
  bool exited = false;
  int status = 0;
  NamedThread waiter("test-wait", [&] {
    int st = 0;
    waitpid(pid, &st, 0);
    std::lock_guard<std::mutex> lk(mu);
    exited = true;
    status = st;
    cv.notify_all();
  });
  bool killed = false;
  {
    std::unique_lock<std::mutex> lk(mu);
    if (!cv.wait_for(lk, std::chrono::seconds(timeout_s), [&] { return exited; })) {
      kill(pid, SIGKILL);
      killed = true;
    }
  }
  waiter.Join();
  Output o;
  o.code = killed ? -9 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  o.out = ReadFile(base + ".out");
  o.err = ReadFile(base + ".err");
  return o;
}

// A cluster config for the fakes: nodes (name, client port, row), a small YCSB table with
// aborts and dependent writes, short client timeouts.
std::string WriteConfig(const std::string& name, const std::vector<std::tuple<std::string, int, int>>& nodes,
                        const std::string& extra = "") {
  std::ostringstream y;
  y << "cluster:\n  name: " << name << "\n  nodes:\n";
  int peer = 1;
  for (const auto& [n, port, row] : nodes) {
    y << "    - {name: " << n << ", host: 127.0.0.1, client_port: " << port << ", peer_port: " << peer++
      << ", partition: 0, row: " << row << "}\n";
  }
  y << "ycsb:\n  records: 3000\n  fields: 3\n  field_bytes: 16\n  ops_per_txn: 8\n  write_ratio: 0.4\n"
       "  abort_ratio: 0.2\n  dep_ratio: 0.2\n  theta: 0.8\n"
       "client:\n  connect_timeout_ms: 2000\n  settle_timeout_ms: 400\n  progress_interval_ms: 200\n"
    << extra;
  const std::string path = TempDir() + "/" + name + ".yaml";
  WriteFile(path, y.str());
  return path;
}

// The workload the servers (fakes) load from that config.
workloads::WorkloadOptions WorkloadOf(const std::string& config_path) {
  ConfigSchema schema;
  cluster::AddClusterConfigKeys(&schema);
  auto c = Config::Load(schema, config_path, {});
  REQUIRE(c.ok());
  auto o = workloads::OptionsFromConfig(c.value());
  REQUIRE(o.ok());
  return o.value();
}

std::vector<std::string> Client(const std::string& config, std::vector<std::string> args) {
  std::vector<std::string> v = {QRSTORE_CLIENT_BIN, "--config", config, "--log-level", "warn"};
  v.insert(v.end(), args.begin(), args.end());
  return v;
}

// Runs python3 `check` over the JSON object on the last stdout line (bound to `o`); "" if it
// passes, else what python printed.
std::string CheckJson(const Output& run, const std::string& check) {
  const std::string path = TempDir() + "/json-input";
  std::string last;
  std::istringstream in(run.out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) last = line;
  }
  WriteFile(path, last + "\n");
  Output py = Run({"python3", "-c", "import json, sys\no = json.loads(sys.stdin.read())\n" + check}, 30, path);
  return py.code == 0 ? "" : py.Show();
}

// A leader fake (n0) and a follower fake (n1) that redirects to it.
struct TwoNodes {
  std::vector<int> ports = FreePorts(2);
  std::string config;
  std::unique_ptr<FakeServer> leader, follower;
  explicit TwoNodes(const std::string& name, testing::Faults faults = {}, int reply_delay_us = 0,
                    FollowerState follower_state = FollowerState::kAgrees, const std::string& extra = "") {
    config = WriteConfig(name, {{"n0", ports[0], 0}, {"n1", ports[1], 1}}, extra);
    FakeServerOptions lo;
    lo.node = "n0";
    lo.address = Addr(ports[0]);
    lo.workload = WorkloadOf(config);
    lo.followers = {{"n1", follower_state}};
    lo.reply_delay_us = reply_delay_us;
    lo.faults = faults;
    leader = std::make_unique<FakeServer>(lo);
    REQUIRE(leader->Start().ok());
    FakeServerOptions fo;
    fo.node = "n1";
    fo.address = Addr(ports[1]);
    fo.workload = lo.workload;
    fo.follower = true;
    fo.leader_node = "n0";
    fo.leader_address = lo.address;
    follower = std::make_unique<FakeServer>(fo);
    REQUIRE(follower->Start().ok());
  }
};

// Runs the client on `c`'s config with `args` (killed after 30 s); checks the exit status and
// that stdout or stderr says `says`.
Output Expect(int code, const TwoNodes& c, const std::vector<std::string>& args, const std::string& says) {
  const int64_t t0 = NowNanos();
  Output o = Run(Client(c.config, args), 30);
  INFO(o.Show());
  CHECK(o.code == code);
  CHECK(o.Has(says));
  CHECK(NowNanos() - t0 < 10'000'000'000);  // failures are prompt too
  return o;
}

}  // namespace

TEST_CASE("qrstore-client: bad input exits 2 naming the problem, before connecting") {
  const std::string cfg = WriteConfig("badinput", {{"n0", FreePorts(1)[0], 0}});
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::string props_scan = TempDir() + "/scan.properties";
  WriteFile(props_scan, "scanproportion=0.5\n");
  const std::string props_records = TempDir() + "/records.properties";
  WriteFile(props_records, "recordcount=9999\noperationcount=10\n");
  const std::string props_latest = TempDir() + "/latest.properties";
  WriteFile(props_latest, "requestdistribution=latest\n");
  const std::vector<Case> cases = {
      {{"--txns", "10", "--bogus"}, "--bogus"},
      {{"--txns", "ten"}, "--txns"},
      {{}, "missing --txns N or --duration-s S"},
      {{"--txns", "5", "--duration-s", "1"}, "not both"},
      {{"--txns", "0"}, "flag --txns: must be >= 1"},
      {{"--txns", "5", "--warmup-s", "1"}, "--warmup-s goes with --duration-s"},
      {{"--duration-s", "1", "--connections", "0"}, "flag --connections"},
      {{"--duration-s", "1", "--target-tps", "0"}, "flag --target-tps: must be in [1, 1000000000]"},
      {{"--duration-s", "1", "--target-tps", "fast"}, "--target-tps"},
      {{"--txns", "5", "--ycsb.nosuchkey=1"}, "ycsb.nosuchkey"},
      {{"--txns", "5", "--node", "n7"}, "n7"},
      {{"--txns", "5", "stray"}, "stray"},
      {{"--txns", "50", "--verify", "--client.verify_max_txns=10"}, "client.verify_max_txns"},
      {{"--txns", "5", "--client.txns_per_request=100000", "--server.max_message_bytes=100000"},
       "server.max_message_bytes"},
      {{"--workload-file", props_scan}, "scanproportion: not supported"},
      {{"--workload-file", props_latest}, "'latest' is not generated by qrstore"},
      {{"--workload-file", TempDir() + "/missing.properties"}, "missing.properties"},
      {{"--workload-file", props_records, "--workload.kind=transfer"}, "workload.kind=transfer"},
  };
  for (const Case& c : cases) {
    INFO("args: " << [&] {
      std::string s;
      for (const auto& a : c.args) s += a + " ";
      return s;
    }());
    Output o = Run(Client(cfg, c.args), 30);
    INFO(o.Show());
    CHECK(o.code == 2);
    CHECK(o.err.find(c.says) != std::string::npos);
  }
  Output nocfg = Run({QRSTORE_CLIENT_BIN, "--txns", "5"});
  CHECK(nocfg.code == 2);
  CHECK(nocfg.Has("missing --config FILE"));
  Output help = Run({QRSTORE_CLIENT_BIN, "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("usage: qrstore-client") != std::string::npos);
  CHECK(help.out.find("client.stall_timeout_ms") != std::string::npos);  // the config keys are listed
  CHECK(help.out.find("qrstore.opspertxn") != std::string::npos);
}

TEST_CASE("qrstore-client: a --txns run over 3 connections passes --verify, --json has every documented field") {
  TwoNodes c("verify3", {}, /*reply_delay_us=*/300);
  Output o = Run(Client(c.config, {"--txns", "3000", "--connections", "3", "--outstanding", "200", "--seed", "5",
                                   "--verify", "--json"}));
  INFO(o.Show());
  REQUIRE(o.code == 0);
  CHECK(o.out.find("verify         ok: 3000 txns in planned order") != std::string::npos);
  CHECK(CheckJson(o, R"(
need = ["committed", "aborted", "rejected", "failed", "throughput_tps", "ops_per_s", "p50_ms", "p95_ms", "p99_ms",
        "p999_ms", "replicas_agree", "digest_mismatches", "follower_lag_batches", "server_cpu_s", "cpu_us_per_txn",
        "phases", "inputs", "config", "client_cpu_s", "verify"]
missing = [k for k in need if k not in o]
assert not missing, missing
assert o["committed"] + o["aborted"] == 3000, o
assert o["aborted"] > 0 and o["rejected"] == 0 and o["failed"] == 0
assert o["replicas_agree"] is True and o["digest_mismatches"] == 0 and o["follower_lag_batches"] == 0
assert set(o["server_cpu_s"]) == {"n0", "n1"} and set(o["cpu_us_per_txn"]) == {"n0", "n1"}
assert o["phases"]["n0"]["exec_ms"] == 2 and o["phases"]["n0"]["windowed"] is True, o["phases"]
# The fake server's time totals: 2 syncs of 0.75 ms a batch, 0.25 ms from a reply complete to
# written, 4 ms a request spends in it.
ph = o["phases"]["n0"]
assert ph["log_syncs_per_batch"] == 2 and abs(ph["log_sync_ms"] - 1.5) < 1e-9, ph
assert abs(ph["reply_ms"] - 0.25) < 1e-9 and abs(ph["request_ms"] - 4) < 1e-9 and ph["replies"] > 0, ph
assert abs(o["in_server_ms"] - 4) < 1e-9 and o["mean_ms"] > 0, o
assert o["throughput_tps"] > 0 and 0 < o["p50_ms"] <= o["p95_ms"] <= o["p99_ms"] <= o["p999_ms"]
assert o["inputs"]["txns"] == 3000 and o["inputs"]["seed"] == 5 and o["inputs"]["connections"] == 3
assert o["config"]["ycsb.records"] == "3000", o["config"]
assert o["verify"].startswith("ok:")
)") == "");
  CHECK(c.leader->txns_applied() == 3000);
  // The closed loop: each connection kept at most K = 200 txns in flight, and did fill it.
  CHECK(c.leader->max_inflight_txns() <= 200);
  CHECK(c.leader->max_inflight_txns() >= 100);
}

TEST_CASE("qrstore-client: K below client.txns_per_request still bounds the txns in flight") {
  TwoNodes c("smallk", {}, /*reply_delay_us=*/500);
  Output o = Run(Client(c.config, {"--txns", "600", "--connections", "1", "--outstanding", "30", "--verify"}));
  INFO(o.Show());
  REQUIRE(o.code == 0);
  CHECK(c.leader->max_inflight_txns() == 30);
  CHECK(o.out.find("30 txns per request") != std::string::npos);
}

TEST_CASE("qrstore-client: one connection ends in the state qrstore-bench --seed S ends in") {
  TwoNodes c("samestate");
  Output o = Run(Client(c.config, {"--txns", "2500", "--connections", "1", "--seed", "11", "--json"}));
  INFO(o.Show());
  REQUIRE(o.code == 0);
  Output b = Run({QRSTORE_BENCH_BIN, "--txns", "2500", "--seed", "11", "--json", "--log-level", "warn",
                  "--ycsb.records=3000", "--ycsb.fields=3", "--ycsb.field_bytes=16", "--ycsb.ops_per_txn=8",
                  "--ycsb.write_ratio=0.4", "--ycsb.abort_ratio=0.2", "--ycsb.dep_ratio=0.2", "--ycsb.theta=0.8",
                  "--engine.key_space=3000", "--batch.txns=500"});
  INFO(b.Show());
  REQUIRE(b.code == 0);
  const std::string bench_digest = b.out.substr(b.out.find("\"digest\":\"") + 10, 16);
  char expect[24];
  std::snprintf(expect, sizeof expect, "%016llx", static_cast<unsigned long long>(c.leader->digest()));
  CHECK(bench_digest == expect);
  CHECK(o.out.find(std::string("\"leader_digest\":\"") + expect) != std::string::npos);
}

TEST_CASE("qrstore-client: --verify fails naming the txn whose read value, fate or position is wrong") {
  // Where the fakes' faults land, from the serial run of the seed (one connection: its order).
  const std::string probe_cfg = WriteConfig("probe", {{"n0", 1, 0}});
  const workloads::WorkloadOptions w = WorkloadOf(probe_cfg);
  auto gen = workloads::MakeGenerator(w, 3);
  REQUIRE(gen.ok());
  workloads::ReferenceExecutor ref(w.Layout(), w.RecordCount());
  REQUIRE(workloads::LoadTable(w, ref.mutable_table()).ok());
  int64_t sixth_reader = -1;
  bool commits_17 = false;
  for (int64_t seq = 0, readers = 0; sixth_reader < 0 || seq <= 17; ++seq) {
    std::string reads;
    auto r = ref.Apply(gen.value()->Next(), true, &reads);
    REQUIRE(r.ok());
    if (r.value() && !reads.empty() && readers++ == 5) sixth_reader = seq;
    if (seq == 17) commits_17 = r.value();
  }
  // One connection (with two, a txn reported at another's position may replay before it and fail
  // on its read values first: a correct failure too, but another message); requests of 100 txns,
  // one fake batch each.
  const std::vector<std::string> args = {"--txns", "1000", "--connections", "1", "--seed", "3", "--verify"};
  testing::Faults corrupt, fate, dup;
  corrupt.corrupt_read_of_txn = 5;
  fate.flip_fate_of_txn = 17;
  dup.duplicate_position_of_txn = 40;
  SECTION("a corrupted read value") {
    Expect(1, TwoNodes("corrupt", corrupt), args,
           "verify failed: connection 0 txn #" + std::to_string(sixth_reader) + " (batch " +
               std::to_string(sixth_reader / 100) + ", planner 0, index " + std::to_string(sixth_reader % 100) +
               "): the values it read differ from the serial run's");
  }
  SECTION("a flipped fate") {
    Expect(1, TwoNodes("fate", fate), args,
           std::string("verify failed: connection 0 txn #17 (batch 0, planner 0, index 17) ") +
               (commits_17 ? "aborted but commits" : "committed but aborts") +
               " when the txns run serially in planned order");
  }
  SECTION("a duplicated position") {
    Expect(1, TwoNodes("dup", dup), args,
           "verify failed: connection 0 txn #40 (batch 0, planner 0, index 39) shares its planned position with "
           "connection 0 txn #39 (batch 0, planner 0, index 39)");
  }
  SECTION("a cluster that ran other txns first") {
    TwoNodes c("used");
    Expect(0, c, {"--txns", "300", "--seed", "9"}, "verify         skipped");
    Expect(1, c, {"--txns", "300", "--seed", "3", "--verify"}, "verify failed");
  }
}

TEST_CASE("qrstore-client: --node on a follower is redirected once to the leader") {
  TwoNodes c("redirect");
  Output o = Run(Client(c.config, {"--txns", "500", "--node", "n1", "--verify", "--log-level", "info"}));
  INFO(o.Show());
  REQUIRE(o.code == 0);
  CHECK(o.err.find("127.0.0.1:" + std::to_string(c.ports[1]) + " is not the leader: redirected to 127.0.0.1:" +
                   std::to_string(c.ports[0])) != std::string::npos);
  CHECK(c.leader->txns_applied() == 500);
  CHECK(c.follower->txns_applied() == 0);

  // Two followers naming each other: no leader after one redirect.
  const auto ports = FreePorts(2);
  const std::string cfg = WriteConfig("loop", {{"n0", ports[0], 0}, {"n1", ports[1], 1}});
  std::vector<std::unique_ptr<FakeServer>> fakes;
  for (int i = 0; i < 2; ++i) {
    FakeServerOptions fo;
    fo.node = "n" + std::to_string(i);
    fo.address = Addr(ports[i]);
    fo.workload = WorkloadOf(cfg);
    fo.follower = true;
    fo.leader_node = i == 0 ? "n1" : "";
    fo.leader_address = i == 0 ? Addr(ports[1]) : "";
    fakes.push_back(std::make_unique<FakeServer>(fo));
    REQUIRE(fakes.back()->Start().ok());
  }
  // (a short failover time-out: the client gives up looking for a leader after it)
  Output loop = Run(Client(cfg, {"--txns", "10", "--client.failover_timeout_ms=2000"}));
  INFO(loop.Show());
  CHECK(loop.code == 1);
  CHECK(loop.Has("is not the leader and does not know who is"));
}

TEST_CASE("qrstore-client: error replies, not-leader mid-run, a hung server and rejected txns fail the run, never hang") {
  SECTION("an Unavailable error reply: the client looks for the leader again and sends the request again in its session") {
    testing::Faults f;
    f.error_on_request = 2;
    TwoNodes c("error", f);
    // One request in flight (K = 100): the node refused request 3 (a leader stopping or deposed
    // does that); the statuses say n0 still leads, so the connection moves back to it and sends
    // request 3 again (same seqs): every txn is answered once, none in doubt.
    Output o = Expect(0, c, {"--txns", "1000", "--connections", "1", "--outstanding", "100", "--json"},
                      "failover: n0 leads now");
    CHECK(o.Has("error reply to request 3: Unavailable: fake: injected error"));
    CHECK(c.leader->txn_requests() == 11);
    CHECK(CheckJson(o, "assert o['failed'] == 0 and o['in_doubt'] == 0 and o['errors'] == 0, o\n"
                       "assert o['committed'] + o['aborted'] == 1000 and o['submitted'] == 1000, o\n"
                       "assert o['failovers'] == 1 and o['retried'] == 100, o")
          == "");
  }
  SECTION("not-leader mid-run: the client moves to the node that says it leads and sends the request there") {
    testing::Faults f;
    f.not_leader_on_request = 3;
    Output o = Expect(0, TwoNodes("notleader", f), {"--txns", "1000", "--connections", "2", "--json"},
                      "failover: n0 leads now");
    CHECK(o.Has("not the leader (any more): it names n9 at 127.0.0.1:9"));
    CHECK(CheckJson(o, "assert o['failovers'] == 1 and o['in_doubt'] == 0 and o['retried'] > 0, o\n"
                       "assert o['committed'] + o['aborted'] == 1000, o")
          == "");
  }
  // The rest only have to fail, promptly, saying why.
  struct Case {
    const char* section;
    testing::Faults faults;
    std::vector<std::string> args;
    std::string says;
    int reply_delay_us = 0;
  };
  testing::Faults unmatched, hung, hung_drain;
  unmatched.unmatched_error_on_request = 1;
  hung.swallow_from_request = 4;
  hung_drain.swallow_from_request = 30;
  const std::vector<Case> cases = {
      {"an error reply no request matches ends the connection", unmatched, {"--txns", "1000", "--connections", "1"},
       "fake: unreadable (matches no request in flight)"},
      {"a server that stops answering: the run fails after client.stall_timeout_ms", hung,
       {"--txns", "1000", "--connections", "1", "--client.stall_timeout_ms=400"},
       "txns in flight (client.stall_timeout_ms)"},
      {"a duration run whose server stops answering during the drain", hung_drain,
       {"--duration-s", "0.3", "--connections", "1", "--client.stall_timeout_ms=500"}, "no reply for", 20000},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.section) { Expect(1, TwoNodes("fault", k.faults, k.reply_delay_us), k.args, k.says); }
  }
  SECTION("a workload file or a flag that asks for another table than the servers say they hold: exit 2") {
    TwoNodes c("loaded");
    const std::string props = TempDir() + "/records-loaded.properties";
    WriteFile(props, "recordcount=9999\noperationcount=10\n");
    // The fakes say what they hold, as a server does: the config's table (3000 records).
    c.leader->SetLoaded({{"workload.kind", "ycsb"}, {"ycsb.records", "3000"}});
    Expect(2, c, {"--workload-file", props},
           "ycsb.records=9999 but the servers hold ycsb.records=3000 (n0's status): start them with it");
    Expect(2, c, {"--txns", "10", "--ycsb.records=2999"}, "command line: ycsb.records=2999 but the servers hold");
    // What the config file says differently is taken from the servers.
    c.leader->SetLoaded({{"workload.kind", "ycsb"}, {"ycsb.records", "2500"}});
    Output o = Run(Client(c.config, {"--txns", "200", "--log-level", "info", "--json"}), 30);
    INFO(o.Show());
    CHECK(o.code == 0);
    CHECK(o.Has("the servers hold ycsb.records=2500 (the config file says 3000)"));
  }
  SECTION("txns the servers' table cannot take are rejected") {
    // The client believes in a bigger table than the servers loaded.
    Output o = Expect(1, TwoNodes("rejected"), {"--txns", "200", "--ycsb.records=30000", "--json"},
                      "rejected: fake: key out of range");
    CHECK(CheckJson(o, "assert o['rejected'] > 0 and o['errors'] == 0, o") == "");
  }
}

TEST_CASE("qrstore-client: replicas that lag or disagree make replicas_agree false") {
  SECTION("a follower behind the leader until the settle timeout") {
    Output o = Expect(1, TwoNodes("lag", {}, 0, FollowerState::kLags), {"--txns", "500", "--json"},
                      "the replicas do not agree with the leader: n1: applied");
    CHECK(CheckJson(o, "assert o['replicas_agree'] is False and o['follower_lag_batches'] > 0, o") == "");
  }
  SECTION("a digest mismatch") {
    Output o = Expect(1, TwoNodes("mismatch", {}, 0, FollowerState::kMismatch), {"--txns", "500", "--json"},
                      "n1: 1 of its");
    CHECK(CheckJson(o, "assert o['replicas_agree'] is False and o['digest_mismatches'] == 1, o") == "");
  }
}

TEST_CASE("qrstore-client: --duration-s with warm-up reports the measured window") {
  TwoNodes c("duration", {}, /*reply_delay_us=*/100);
  Output o = Run(Client(c.config, {"--duration-s", "0.6", "--warmup-s", "0.3", "--json", "--log-level", "info"}), 30);
  INFO(o.Show());
  REQUIRE(o.code == 0);
  CHECK(o.err.find("warm-up done: measuring for 0.6 s") != std::string::npos);
  CHECK(o.err.find("committed=") != std::string::npos);  // progress lines (every 200 ms here)
  CHECK(CheckJson(o, R"(
assert 0.55 < o["elapsed_s"] < 1.5, o["elapsed_s"]
assert 0 < o["committed"] < o["committed_total"], o
assert o["phases"]["n0"]["windowed"] is True and o["batches"]["n0"] > 0
assert o["server_cpu_s"]["n0"] > 0 and o["inputs"]["warmup_s"] == 0.3
)") == "");
}

TEST_CASE("qrstore-client: --target-tps paces the senders") {
  TwoNodes c("paced", {}, /*reply_delay_us=*/100);
  // 2 connections x 10 requests of 100 txns at 4,000 txn/s: each connection sends a request
  // every 50 ms, its last one 450 ms after its first. Unpaced, the fake answers 2,000 txns in
  // a few ms.
  Output o = Run(Client(c.config, {"--txns", "2000", "--connections", "2", "--target-tps", "4000",
                                   "--client.txns_per_request=100", "--json"}),
                 30);
  INFO(o.Show());
  REQUIRE(o.code == 0);
  CHECK(o.Has("paced at 4000 txn/s"));
  CHECK(CheckJson(o, R"(
assert o["committed"] + o["aborted"] == 2000, o
assert 0.44 <= o["elapsed_s"] < 5, o["elapsed_s"]
assert o["inputs"]["target_tps"] == 4000, o["inputs"]
)") == "");
}

TEST_CASE("qrstore-client: a --duration-s --verify run stops submitting at client.verify_max_txns") {
  TwoNodes c("cap");
  Output o = Run(Client(c.config, {"--duration-s", "60", "--connections", "3", "--verify", "--json",
                                   "--client.verify_max_txns=2000"}),
                 30);
  INFO(o.Show());
  REQUIRE(o.code == 0);
  CHECK(o.Has("stopped submitting at client.verify_max_txns = 2000"));
  CHECK(CheckJson(o, "assert o['submitted'] == 2000 and o['stopped_at_verify_cap'] is True and o['verify'].startswith('ok'), o")
        == "");
}

TEST_CASE("qrstore-client: --workload-file runs its operationcount and names what it ignores") {
  TwoNodes c("props");
  const std::string props = TempDir() + "/a.properties";
  WriteFile(props, "recordcount=3000\noperationcount=777\nreadproportion=0.5\nupdateproportion=0.5\n"
                   "requestdistribution=zipfian\nthreadcount=8\nfrobnicate=1\nqrstore.opspertxn=5\n");
  Output o = Run(Client(c.config, {"--workload-file", props, "--json", "--verify"}), 30);
  INFO(o.Show());
  REQUIRE(o.code == 0);
  CHECK(o.err.find("threadcount does not apply to qrstore") != std::string::npos);
  CHECK(o.err.find("frobnicate: unknown property") != std::string::npos);
  CHECK(CheckJson(o, R"(
assert o["committed"] + o["aborted"] == 777, o
assert o["config"]["ycsb.write_ratio"] == "0.5" and o["config"]["ycsb.ops_per_txn"] == "5", o["config"]
assert abs(float(o["config"]["ycsb.theta"]) - 0.99) < 1e-9, o["config"]["ycsb.theta"]
)") == "");
}

TEST_CASE("qrstore-client --status: one line per node, exit 1 naming the node that does not answer") {
  TwoNodes c("status");
  Output ok = Run(Client(c.config, {"--status"}), 30);
  INFO(ok.Show());
  CHECK(ok.code == 0);
  CHECK(ok.out.find("node ") == 0);
  CHECK(ok.out.find("\nn0           leader    serving") != std::string::npos);
  CHECK(ok.out.find("\nn1           follower  serving") != std::string::npos);
  CHECK(ok.out.find("agrees") != std::string::npos);  // n1 as n0 sees it

  const int down = FreePorts(1)[0];
  const std::string cfg3 = WriteConfig("status3", {{"n0", c.ports[0], 0}, {"n1", c.ports[1], 1}, {"n2", down, 2}});
  Output bad = Run(Client(cfg3, {"--status"}), 30);
  INFO(bad.Show());
  CHECK(bad.code == 1);
  CHECK(bad.out.find("\nn2           -         down") != std::string::npos);
  CHECK(bad.err.find("no answer: n2 (127.0.0.1:" + std::to_string(down) + "): cannot connect") != std::string::npos);
}
