// qrstore-client: the closed-loop YCSB-T / transfer driver of a qrstore cluster (and its status
// tool). See Usage below and README.md.
//
// Load: C connections to the partition's leader (or --node), each keeping at most K txns in
// flight in requests of client.txns_per_request txns. Connection c draws from its own
// deterministic generator (connection 0: MakeGenerator(options, seed), exactly qrstore-bench's
// sequence; c > 0: a seed derived from (seed, c)), so a one-connection run is reproducible and
// ends in the same state as `qrstore-bench --seed S` on the same workload.
//
// Output: progress on stderr each second; the summary on stdout; with --json the last stdout
// line is one JSON object. Exit status: 0 ok, 1 the run failed (failed or rejected txns, error
// replies, a broken connection, replicas that disagree, --verify), 2 bad input.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/report.h"
#include "cluster/client.h"
#include "cluster/cluster_config.h"
#include "cluster/protocol.h"
#include "cluster/topology.h"
#include "common/cli.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/hash.h"
#include "common/logging.h"
#include "storage/table.h"
#include "workloads/latency_histogram.h"
#include "workloads/reference_executor.h"
#include "workloads/workload.h"
#include "workloads/ycsb_properties.h"

namespace qrstore::bench {
namespace {

namespace proto = cluster::proto;
using proto::ResultCode;

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-client: %s\n", msg.c_str());
  return code;
}
double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// Connection c's generator seed: connection 0 runs exactly the seed's sequence.
uint64_t ConnSeed(uint64_t seed, uint32_t c) { return c == 0 ? seed : Mix64(seed ^ (0x9e3779b97f4a7c15ULL * c)); }

// What --verify keeps of one txn (40 bytes).
struct VerifyRecord {
  uint64_t seq = 0;
  uint64_t batch = 0;
  uint64_t reads_hash = 0;
  uint32_t planner = 0;
  uint32_t index = 0;
  uint16_t conn = 0;
  uint8_t code = 0;
};

uint64_t ReadsHash(std::string_view values) { return values.empty() ? 0 : Hash64(values, 0x72656164); }

// Totals over the whole run and over the measured window (shared by every connection).
struct Totals {
  std::mutex mu;
  // Set on the first failed txn or error reply: the drivers stop sending (the run has failed;
  // hammering a node that refuses work only multiplies the errors).
  std::atomic<bool> stop_sending{false};
  uint64_t committed = 0, aborted = 0, rejected = 0, failed = 0, errors = 0, results = 0;
  uint64_t accounted = 0;  // txns answered: results, plus the txns of requests answered by an error
  uint64_t max_acked_batch = 0;  // the highest batch of a committed or aborted result (+1; 0: none)
  uint64_t w_committed = 0, w_aborted = 0, w_results = 0;  // received inside the window
  uint64_t last_committed_report = 0;
  workloads::LatencyHistogram latency_ns;  // committed txns received inside the window
  std::vector<std::string> first_errors;
  std::vector<VerifyRecord> records;
  bool keep_records = false;
  uint64_t verify_cap = 0;
  bool verify_overflow = false;
  void Note(const std::string& e) {
    if (first_errors.size() < 5) first_errors.push_back(e);
  }
};

struct Window {
  std::atomic<int64_t> start_ns{INT64_MAX};
  std::atomic<int64_t> end_ns{INT64_MAX};
  bool In(int64_t t) const { return t >= start_ns.load(std::memory_order_relaxed) && t < end_ns.load(std::memory_order_relaxed); }
};

// One connection and its closed loop.
class Driver {
 public:
  Driver(uint32_t index, std::unique_ptr<workloads::Generator> gen, uint64_t quota, uint64_t outstanding,
         uint32_t per_request, Totals* totals, Window* window)
      : index_(index), gen_(std::move(gen)), quota_(quota), outstanding_(outstanding), per_request_(per_request),
        totals_(totals), window_(window) {}

  Status Connect(const std::string& address, int timeout_ms) {
    auto c = cluster::ClientConnection::Connect(address, timeout_ms, std::to_string(index_),
                                                [this](uint8_t type, std::string_view body) { OnFrame(type, body); });
    if (!c.ok()) return c.status();
    conn_ = std::move(c).value();
    return Status::Ok();
  }

  // Sends an empty request: the answer says whether this node takes transactions. Returns the
  // leader's address on kNotLeader, "" when it does.
  Result<std::string> Probe(int timeout_ms) {
    proto::TxnRequestWriter w;
    w.Begin(0);
    {
      std::lock_guard<std::mutex> lk(mu_);
      pending_[0] = Req{NowNanos(), 0, 0};
    }
    QR_RETURN_IF_ERROR(conn_->Send(proto::Frame(proto::MsgType::kTxnRequest, w.Finish())));
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return pending_.empty() || !conn_->open(); })) {
      return Status::Timeout("no answer from " + conn_->address() + " within " + std::to_string(timeout_ms) + " ms");
    }
    if (!redirect_.empty()) return redirect_;
    if (!pending_.empty()) return conn_->status().ok() ? Status::Unavailable("connection closed") : conn_->status();
    return std::string();
  }

  void Start() {
    thread_ = NamedThread("cli-send-" + std::to_string(index_), [this] { Loop(); });
  }
  void StopSending() {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  // Waits (bounded) until every request sent has its answer.
  bool Drain(int64_t deadline_ns) {
    thread_.Join();
    std::unique_lock<std::mutex> lk(mu_);
    while (!pending_.empty() && conn_->open()) {
      const int64_t left = deadline_ns - NowNanos();
      if (left <= 0) return false;
      cv_.wait_for(lk, std::chrono::nanoseconds(std::min<int64_t>(left, 100'000'000)));
    }
    return pending_.empty();
  }
  void Close() {
    if (conn_) conn_->Close();
  }
  uint64_t sent() const { return sent_.load(); }
  uint64_t inflight() {
    std::lock_guard<std::mutex> lk(mu_);
    return inflight_;
  }
  Status conn_status() const { return conn_ ? conn_->status() : Status::Ok(); }
  bool broken() const { return conn_ && !conn_->open(); }

 private:
  struct Req {
    int64_t send_ns = 0;
    uint64_t first_seq = 0;
    uint32_t count = 0;
  };

  void Loop() {
    proto::TxnRequestWriter w;
    uint64_t request_id = 1;
    while (true) {
      uint32_t n = 0;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] {
          return stop_ || totals_->stop_sending.load() || !conn_->open() || inflight_ + per_request_ <= outstanding_ ||
                 inflight_ == 0;
        });
        if (stop_ || totals_->stop_sending.load() || !conn_->open()) return;
        const uint64_t left = quota_ - sent_.load();
        n = static_cast<uint32_t>(std::min<uint64_t>(per_request_, left));
        if (n == 0) return;
        inflight_ += n;
      }
      const uint64_t first = sent_.load();
      w.Begin(request_id);
      for (uint32_t i = 0; i < n; ++i) w.Add(gen_->Next());
      const std::string frame = proto::Frame(proto::MsgType::kTxnRequest, w.Finish());
      {
        std::lock_guard<std::mutex> lk(mu_);
        pending_[request_id] = Req{NowNanos(), first, n};
      }
      sent_.fetch_add(n);
      ++request_id;
      if (!conn_->Send(frame).ok()) return;  // the reader notes why; Drain sees it
    }
  }

  void OnFrame(uint8_t type, std::string_view body) {
    const int64_t now = NowNanos();
    switch (static_cast<proto::MsgType>(type)) {
      case proto::MsgType::kTxnReply: {
        if (Status st = proto::DecodeTxnReply(body, &reply_); !st.ok()) return Broken("a malformed reply: " + st.message());
        Req req;
        {
          std::lock_guard<std::mutex> lk(mu_);
          auto it = pending_.find(reply_.request_id);
          if (it == pending_.end()) return Broken("a reply to request " + std::to_string(reply_.request_id) + " never sent");
          req = it->second;
          pending_.erase(it);
        }
        if (req.count != reply_.results.size()) {
          return Broken("request " + std::to_string(reply_.request_id) + ": " + std::to_string(reply_.results.size()) +
                        " results for " + std::to_string(req.count) + " txns");
        }
        Account(req, now);
        break;
      }
      case proto::MsgType::kError: {
        proto::ErrorReply e;
        if (!proto::DecodeError(body, &e).ok()) return Broken("a malformed error reply");
        Req req;
        bool found = false;
        {
          std::lock_guard<std::mutex> lk(mu_);
          auto it = pending_.find(e.request_id);
          if (it != pending_.end()) {
            req = it->second;
            pending_.erase(it);
            found = true;
          }
        }
        std::lock_guard<std::mutex> lk(totals_->mu);
        ++totals_->errors;
        totals_->stop_sending = true;
        totals_->Note(std::string("error reply: ") + StatusCodeName(e.code) + ": " + e.message);
        if (found) totals_->failed += req.count;
        if (found) totals_->accounted += req.count;
        if (found) {
          std::lock_guard<std::mutex> lk2(mu_);
          inflight_ -= req.count;
        }
        break;
      }
      case proto::MsgType::kNotLeader: {
        proto::NotLeaderReply nl;
        if (!proto::DecodeNotLeader(body, &nl).ok()) return Broken("a malformed not-leader reply");
        std::lock_guard<std::mutex> lk(mu_);
        redirect_ = nl.leader_address.empty() ? "?" : nl.leader_address;
        pending_.erase(nl.request_id);
        break;
      }
      default:
        return Broken("an unexpected message type " + std::to_string(type));
    }
    cv_.notify_all();
  }

  void Account(const Req& req, int64_t now) {
    uint64_t committed = 0, aborted = 0, rejected = 0, failed = 0;
    const bool in_window = window_->In(now);
    std::lock_guard<std::mutex> lk(totals_->mu);
    for (size_t i = 0; i < reply_.results.size(); ++i) {
      const proto::TxnResult& r = reply_.results[i];
      switch (r.code) {
        case ResultCode::kCommitted:
          ++committed;
          if (in_window) totals_->latency_ns.Record(now - req.send_ns);
          break;
        case ResultCode::kAbortedLogic:
        case ResultCode::kAbortedCascade:
          ++aborted;
          break;
        case ResultCode::kRejected:
          ++rejected;
          totals_->Note("rejected: " + std::string(r.detail));
          break;
        case ResultCode::kFailed:
          ++failed;
          totals_->stop_sending = true;
          totals_->Note("failed: " + std::string(r.detail));
          break;
      }
      if (totals_->keep_records) {
        if (totals_->records.size() < totals_->verify_cap) {
          totals_->records.push_back(VerifyRecord{req.first_seq + i, r.batch, ReadsHash(r.values), r.planner, r.index,
                                                  static_cast<uint16_t>(index_), static_cast<uint8_t>(r.code)});
        } else {
          totals_->verify_overflow = true;
        }
      }
    }
    for (const proto::TxnResult& r : reply_.results) {
      if (r.code == ResultCode::kCommitted || r.code == ResultCode::kAbortedLogic) {
        totals_->max_acked_batch = std::max(totals_->max_acked_batch, r.batch + 1);
      }
    }
    totals_->committed += committed;
    totals_->aborted += aborted;
    totals_->rejected += rejected;
    totals_->failed += failed;
    totals_->results += reply_.results.size();
    totals_->accounted += reply_.results.size();
    if (in_window) {
      totals_->w_committed += committed;
      totals_->w_aborted += aborted;
      totals_->w_results += reply_.results.size();
    }
    std::lock_guard<std::mutex> lk2(mu_);
    inflight_ -= req.count;
  }

  void Broken(const std::string& why) {
    {
      std::lock_guard<std::mutex> lk(totals_->mu);
      ++totals_->errors;
      totals_->Note("connection " + std::to_string(index_) + ": " + why);
    }
    conn_->Shutdown(Status::Corruption(why));  // the reader thread: no join here
    cv_.notify_all();
  }

  const uint32_t index_;
  std::unique_ptr<workloads::Generator> gen_;
  const uint64_t quota_;
  const uint64_t outstanding_;
  const uint32_t per_request_;
  Totals* const totals_;
  Window* const window_;
  std::unique_ptr<cluster::ClientConnection> conn_;
  proto::TxnReply reply_;  // reader thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Req> pending_;  // guarded by mu_
  uint64_t inflight_ = 0;            // guarded by mu_
  bool stop_ = false;                // guarded by mu_
  std::string redirect_;             // guarded by mu_
  std::atomic<uint64_t> sent_{0};
  NamedThread thread_;
};


// Status of every node (nodes that do not answer are missing from the map).
std::map<std::string, proto::NodeStatus> AllStatus(const cluster::Topology& topo, int timeout_ms,
                                                  std::vector<std::string>* errors = nullptr) {
  std::map<std::string, proto::NodeStatus> out;
  for (const cluster::NodeInfo& n : topo.nodes()) {
    auto s = cluster::QueryStatus(n.client_address(), timeout_ms);
    if (s.ok()) {
      out[n.name] = std::move(s).value();
    } else if (errors != nullptr) {
      errors->push_back(n.name + " (" + n.client_address() + "): " + s.status().message());
    }
  }
  return out;
}

int StatusMain(const cluster::Topology& topo, int timeout_ms) {
  std::vector<std::string> errors;
  auto all = AllStatus(topo, timeout_ms, &errors);
  std::map<std::string, proto::FollowerView> views;
  for (const auto& [name, s] : all) {
    for (const auto& f : s.followers) views[f.node] = f;
  }
  std::printf("%-12s %-8s %-9s %10s %12s %8s %-10s %s\n", "node", "role", "state", "batches", "committed", "lag",
              "digest", "error");
  for (const cluster::NodeInfo& n : topo.nodes()) {
    auto it = all.find(n.name);
    if (it == all.end()) {
      std::printf("%-12s %-8s %-9s %10s %12s %8s %-10s %s\n", n.name.c_str(), n.row == 0 ? "leader" : "follower",
                  "down", "-", "-", "-", "-", "no answer");
      continue;
    }
    const proto::NodeStatus& s = it->second;
    std::string lag = "-", digest = "-";
    if (auto v = views.find(n.name); v != views.end()) {
      lag = std::to_string(v->second.lag_batches);
      digest = v->second.mismatches > 0 ? "MISMATCH" : (v->second.agrees_at_last ? "agrees" : "behind");
    } else if (s.role == "leader") {
      digest = s.digest_mismatches > 0 ? "mismatch" : "reference";
    }
    std::printf("%-12s %-8s %-9s %10" PRIu64 " %12" PRIu64 " %8s %-10s %s\n", n.name.c_str(), s.role.c_str(),
                s.state.c_str(), s.committed_batches, s.committed_txns, lag.c_str(), digest.c_str(), s.error.c_str());
  }
  for (const auto& e : errors) std::fprintf(stderr, "qrstore-client: %s\n", e.c_str());
  return errors.empty() ? kExitOk : kExitFailed;
}

int Main(int argc, char** argv) {
  CommandLine cli("qrstore-client",
                  "--config FILE [--key=value ...] (--txns N | --duration-s S) [--warmup-s W] [--connections C] "
                  "[--outstanding K] [--seed S] [--workload-file F] [--node NAME] [--verify] [--json] | --status",
                  "Drives a qrstore cluster with a closed-loop YCSB-T or transfer load (workload.kind, ycsb.*,\n"
                  "transfer.* of the config, or a YCSB property file) over C connections to the partition's\n"
                  "leader, each keeping at most K txns in flight, and prints throughput, latency percentiles\n"
                  "(request sent -> answer received, per txn), every node's per-batch phase times and CPU,\n"
                  "follower lag and whether every follower's state digest agrees with the leader's.\n"
                  "Connection 0 runs exactly the --seed sequence (the same as qrstore-bench --seed S).\n"
                  "--verify (a fresh cluster, this client alone): replays the planned order on the serial\n"
                  "reference executor and checks every fate and every value read.\n"
                  "--status: one line per node (role, state, batches, lag, digest agreement) and exit.\n"
                  "Progress goes to stderr once per second; --json makes the last stdout line a JSON object.\n"
                  "Exit status: 0 ok, 1 failed (failed/rejected txns, errors, disagreeing replicas, verify), 2 bad input.");
  cli.AddValue("config", "FILE", "the cluster config the servers run (e.g. configs/cluster-raft.yaml)");
  cli.AddValue("txns", "N", "run exactly N transactions (over all connections)");
  cli.AddValue("duration-s", "S", "measure for S seconds (after the warm-up), then let the in-flight ones finish");
  cli.AddValue("warmup-s", "W", "with --duration-s: run W seconds before measuring (default 0)");
  cli.AddValue("connections", "C", "connections (default client.connections)");
  cli.AddValue("outstanding", "K", "txns in flight per connection (default client.outstanding)");
  cli.AddValue("seed", "S", "workload seed (default 1)");
  cli.AddValue("workload-file", "F", "a YCSB core workload property file (recordcount, operationcount, readproportion, ...)");
  cli.AddValue("node", "NAME", "send to this node instead of the leader (a follower answers with the leader's address)");
  cli.AddSwitch("verify", "check every fate and read value against the serial reference executor (fresh cluster only)");
  cli.AddSwitch("status", "print every node's status and exit");
  cli.AddSwitch("json", "print one JSON object with the results as the last line of stdout");
  cli.AddValue("log-level", "LEVEL", "trace|debug|info|warn|error|off (default info)");

  ConfigSchema schema;
  cluster::AddClusterConfigKeys(&schema);
  if (auto code = cli.ParseStandard(argc, argv, &schema)) return *code;
  if (!cli.Has("config")) return Fail(kExitBadInput, "missing --config FILE (see qrstore-client --help)");
  auto loaded = Config::Load(schema, cli.Get("config"), cli.overrides());
  if (!loaded.ok()) return Fail(kExitBadInput, loaded.status().message());
  Config config = std::move(loaded).value();
  auto log = Logger("client");

  std::optional<uint64_t> file_txns;
  if (cli.Has("workload-file")) {
    auto props = workloads::LoadYcsbProperties(cli.Get("workload-file"));
    if (!props.ok()) return Fail(kExitBadInput, props.status().message());
    for (const auto& w : props->warnings) log->warn("{}", w);
    for (const auto& o : props->overrides) {
      const std::string key = o.substr(0, o.find('='));
      const std::string value = o.substr(o.find('=') + 1);
      if ((key == "ycsb.records" || key == "ycsb.fields" || key == "ycsb.field_bytes") &&
          std::to_string(config.GetInt(key)) != value) {
        return Fail(kExitBadInput, cli.Get("workload-file") + ": " + key + "=" + value + " but the servers loaded " + key +
                                       "=" + std::to_string(config.GetInt(key)) +
                                       " from the cluster config: put it in the cluster config (or --" + key +
                                       " to cluster.sh up) so they load that table");
      }
    }
    auto with = config.WithOverrides(props->overrides);
    if (!with.ok()) return Fail(kExitBadInput, cli.Get("workload-file") + ": " + with.status().message());
    config = std::move(with).value();
    file_txns = props->operationcount;
  }
  auto topo = cluster::Topology::FromConfig(config);
  if (!topo.ok()) return Fail(kExitBadInput, cli.Get("config") + ": " + topo.status().message());
  const int connect_ms = static_cast<int>(config.GetInt("client.connect_timeout_ms"));
  if (cli.Has("status")) return StatusMain(topo.value(), connect_ms);

  auto options_or = workloads::OptionsFromConfig(config);
  if (!options_or.ok()) return Fail(kExitBadInput, options_or.status().message());
  const workloads::WorkloadOptions& options = options_or.value();
  const bool has_txns = cli.Has("txns") || (!cli.Has("duration-s") && file_txns.has_value());
  if (cli.Has("txns") && cli.Has("duration-s")) return Fail(kExitBadInput, "give either --txns or --duration-s, not both");
  if (!has_txns && !cli.Has("duration-s")) {
    return Fail(kExitBadInput, "missing --txns N or --duration-s S (see qrstore-client --help)");
  }
  auto txns_flag = cli.GetInt("txns", file_txns.value_or(0));
  auto duration_flag = cli.GetDouble("duration-s", 0);
  auto warmup_flag = cli.GetDouble("warmup-s", 0);
  auto conns_flag = cli.GetInt("connections", config.GetInt("client.connections"));
  auto outstanding_flag = cli.GetInt("outstanding", config.GetInt("client.outstanding"));
  auto seed_flag = cli.GetInt("seed", 1);
  for (const Status* st : {&txns_flag.status(), &duration_flag.status(), &warmup_flag.status(), &conns_flag.status(),
                           &outstanding_flag.status(), &seed_flag.status()}) {
    if (!st->ok()) return Fail(kExitBadInput, st->message());
  }
  if (has_txns && txns_flag.value() < 1) return Fail(kExitBadInput, "flag --txns: must be >= 1");
  if (!has_txns && !(duration_flag.value() > 0 && duration_flag.value() <= 86400)) {
    return Fail(kExitBadInput, "flag --duration-s: must be in (0, 86400]");
  }
  if (!(warmup_flag.value() >= 0 && warmup_flag.value() <= 3600)) return Fail(kExitBadInput, "flag --warmup-s: must be in [0, 3600]");
  if (has_txns && cli.Has("warmup-s")) return Fail(kExitBadInput, "--warmup-s goes with --duration-s");
  if (conns_flag.value() < 1 || conns_flag.value() > 1024) return Fail(kExitBadInput, "flag --connections: must be in [1, 1024]");
  if (outstanding_flag.value() < 1) return Fail(kExitBadInput, "flag --outstanding: must be >= 1");
  if (seed_flag.value() < 0) return Fail(kExitBadInput, "flag --seed: must be >= 0");
  const uint64_t total_txns = has_txns ? static_cast<uint64_t>(txns_flag.value()) : 0;
  const uint32_t conns = static_cast<uint32_t>(conns_flag.value());
  const uint64_t outstanding = static_cast<uint64_t>(outstanding_flag.value());
  const uint64_t seed = static_cast<uint64_t>(seed_flag.value());
  const bool verify = cli.Has("verify"), json = cli.Has("json");
  const uint32_t per_request = static_cast<uint32_t>(config.GetInt("client.txns_per_request"));
  const uint64_t verify_cap = static_cast<uint64_t>(config.GetInt("client.verify_max_txns"));
  if (verify && has_txns && total_txns > verify_cap) {
    return Fail(kExitBadInput, "--verify with --txns " + std::to_string(total_txns) + " exceeds client.verify_max_txns (" +
                                   std::to_string(verify_cap) + ")");
  }
  std::string target = topo->Leader(0).client_address();
  if (cli.Has("node")) {
    auto n = topo->Find(cli.Get("node"));
    if (!n.ok()) return Fail(kExitBadInput, n.status().message());
    target = n.value()->client_address();
  }
  const std::string kind = options.kind == workloads::WorkloadKind::kTransfer ? "transfer" : "ycsb";
  const uint64_t ops_per_txn = options.kind == workloads::WorkloadKind::kTransfer ? 2 : options.ycsb.ops_per_txn;

  // Connections (a follower named by --node redirects us to its leader).
  Totals totals;
  totals.keep_records = verify;
  totals.verify_cap = verify_cap;
  Window window;
  std::vector<std::unique_ptr<Driver>> drivers;
  for (uint32_t c = 0; c < conns; ++c) {
    auto gen = workloads::MakeGenerator(options, ConnSeed(seed, c));
    if (!gen.ok()) return Fail(kExitBadInput, gen.status().message());
    const uint64_t quota = has_txns ? total_txns / conns + (c < total_txns % conns ? 1 : 0) : UINT64_MAX;
    drivers.push_back(std::make_unique<Driver>(c, std::move(gen).value(), quota, outstanding, per_request, &totals, &window));
  }
  if (Status st = drivers[0]->Connect(target, connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
  auto probe = drivers[0]->Probe(connect_ms);
  if (!probe.ok()) return Fail(kExitFailed, target + ": " + probe.status().message());
  if (!probe.value().empty()) {
    log->info("{} is not the leader: redirected to {}", target, probe.value());
    target = probe.value();
    drivers[0]->Close();
    auto gen = workloads::MakeGenerator(options, ConnSeed(seed, 0));
    const uint64_t quota = has_txns ? total_txns / conns + (0 < total_txns % conns ? 1 : 0) : UINT64_MAX;
    drivers[0] = std::make_unique<Driver>(0, std::move(gen).value(), quota, outstanding, per_request, &totals, &window);
    if (Status st = drivers[0]->Connect(target, connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
    auto again = drivers[0]->Probe(connect_ms);
    if (!again.ok() || !again.value().empty()) return Fail(kExitFailed, target + ": does not take transactions either");
  }
  for (uint32_t c = 1; c < conns; ++c) {
    if (Status st = drivers[c]->Connect(target, connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
  }
  log->info("{} {} against {} ({} connection(s), {} in flight each, {} txns per request, seed {})", kind,
            has_txns ? std::to_string(total_txns) + " txns" : Num(duration_flag.value()) + " s", target, conns,
            outstanding, per_request, seed);

  // Run.
  const int64_t start = NowNanos();
  const int64_t warmup_ns = static_cast<int64_t>(warmup_flag.value() * 1e9);
  const int64_t duration_ns = static_cast<int64_t>(duration_flag.value() * 1e9);
  std::map<std::string, proto::NodeStatus> status0;
  if (has_txns || warmup_ns == 0) {
    status0 = AllStatus(topo.value(), connect_ms);
    window.start_ns = NowNanos();
  }
  for (auto& d : drivers) d->Start();
  const int64_t interval = config.GetInt("client.progress_interval_ms") * 1'000'000;
  int64_t next_report = start + (interval > 0 ? interval : INT64_MAX / 2);
  uint64_t last_committed = 0;
  int64_t last_report = start;
  bool broken = false;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const int64_t now = NowNanos();
    if (!has_txns && window.start_ns == INT64_MAX && now >= start + warmup_ns) {
      status0 = AllStatus(topo.value(), connect_ms);
      window.start_ns = NowNanos();
      log->info("warm-up done: measuring for {} s", Num(duration_flag.value()));
    }
    for (auto& d : drivers) broken |= d->broken();
    uint64_t accounted = 0, committed = 0, aborted = 0, failed = 0;
    {
      std::lock_guard<std::mutex> lk(totals.mu);
      accounted = totals.accounted;
      committed = totals.committed;
      aborted = totals.aborted;
      failed = totals.failed;
    }
    if (now >= next_report) {
      uint64_t inflight = 0;
      for (auto& d : drivers) inflight += d->inflight();
      const double dt = static_cast<double>(now - last_report) / 1e9;
      log->info("t={:.0f}s committed={} ({:.0f} txn/s) aborted={} failed={} outstanding={}",
                static_cast<double>(now - start) / 1e9, committed, static_cast<double>(committed - last_committed) / dt,
                aborted, failed, inflight);
      last_committed = committed;
      last_report = now;
      while (next_report <= now) next_report += interval;
    }
    if (broken || totals.stop_sending.load()) break;
    if (has_txns) {
      if (accounted >= total_txns) break;
    } else if (window.start_ns != INT64_MAX && now >= window.start_ns + duration_ns) {
      break;
    }
  }
  const int64_t window_end = NowNanos();
  window.end_ns = window_end;
  // CPU over the measured window: a duration run reads it now (the txns still in flight are
  // not counted, nor is their work); a --txns run after the last answer.
  std::map<std::string, proto::NodeStatus> status1;
  if (!has_txns) status1 = AllStatus(topo.value(), connect_ms);
  for (auto& d : drivers) d->StopSending();
  const int64_t drain_deadline = NowNanos() + 60'000'000'000;
  bool drained = true;
  for (auto& d : drivers) drained &= d->Drain(drain_deadline);
  const int64_t end = NowNanos();
  for (auto& d : drivers) {
    if (!d->conn_status().ok()) {
      std::lock_guard<std::mutex> lk(totals.mu);
      totals.Note(d->conn_status().message());
      broken = true;
    }
    d->Close();
  }
  if (has_txns) status1 = AllStatus(topo.value(), connect_ms);

  // Replicas: every follower reports the leader's last committed batch with the same digest.
  const std::string leader_name = topo->Leader(0).name;
  const int64_t settle_deadline = NowNanos() + config.GetInt("client.settle_timeout_ms") * 1'000'000;
  proto::NodeStatus leader_status;
  bool replicas_agree = false;
  bool leader_answered = false;
  for (;;) {
    auto s = cluster::QueryStatus(topo->Leader(0).client_address(), connect_ms);
    if (s.ok()) {
      leader_answered = true;
      leader_status = s.value();
      bool all = leader_status.digest_mismatches == 0;
      for (const auto& f : leader_status.followers) all &= f.agrees_at_last;
      if (all) {
        replicas_agree = true;
        break;
      }
    }
    if (NowNanos() >= settle_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  uint64_t max_lag = 0;
  for (const auto& f : leader_status.followers) max_lag = std::max(max_lag, f.lag_batches);

  // Verify.
  std::string verify_text = "skipped";
  bool verify_failed = false;
  if (verify) {
    std::vector<VerifyRecord> records;
    {
      std::lock_guard<std::mutex> lk(totals.mu);
      records = std::move(totals.records);
    }
    auto fail_verify = [&](const std::string& why) {
      verify_text = "failed: " + why;
      verify_failed = true;
    };
    uint64_t sent = 0;
    for (auto& d : drivers) sent += d->sent();
    if (totals.verify_overflow) {
      fail_verify("more than client.verify_max_txns results (raise it or run fewer txns)");
    } else if (records.size() != sent) {
      fail_verify(std::to_string(sent) + " txns sent but " + std::to_string(records.size()) + " results kept");
    } else {
      std::sort(records.begin(), records.end(), [](const VerifyRecord& a, const VerifyRecord& b) {
        if (a.batch != b.batch) return a.batch < b.batch;
        if (a.planner != b.planner) return a.planner < b.planner;
        return a.index < b.index;
      });
      std::vector<std::unique_ptr<workloads::Generator>> gens;
      std::vector<uint64_t> next(conns, 0);
      for (uint32_t c = 0; c < conns; ++c) gens.push_back(std::move(workloads::MakeGenerator(options, ConnSeed(seed, c))).value());
      workloads::ReferenceExecutor ref(options.Layout(), options.RecordCount());
      if (Status st = workloads::LoadTable(options, ref.mutable_table()); !st.ok()) return Fail(kExitFailed, st.message());
      std::string reads;
      uint64_t reads_checked = 0;
      for (size_t i = 0; i < records.size() && !verify_failed; ++i) {
        const VerifyRecord& r = records[i];
        const std::string where = "connection " + std::to_string(r.conn) + " txn #" + std::to_string(r.seq) +
                                  " (batch " + std::to_string(r.batch) + ", planner " + std::to_string(r.planner) +
                                  ", index " + std::to_string(r.index) + ")";
        if (r.code != static_cast<uint8_t>(ResultCode::kCommitted) && r.code != static_cast<uint8_t>(ResultCode::kAbortedLogic)) {
          fail_verify(where + " was " + proto::ResultCodeName(static_cast<ResultCode>(r.code)));
          break;
        }
        if (i > 0 && records[i - 1].batch == r.batch && records[i - 1].planner == r.planner && records[i - 1].index == r.index) {
          fail_verify(where + " shares its planned position with another txn");
          break;
        }
        if (r.seq != next[r.conn]) {
          fail_verify(where + " planned out of its connection's order (expected txn #" + std::to_string(next[r.conn]) + ")");
          break;
        }
        ++next[r.conn];
        const storage::Txn txn = gens[r.conn]->Next();
        reads.clear();
        const bool committed = r.code == static_cast<uint8_t>(ResultCode::kCommitted);
        auto applied = ref.Apply(txn, /*keep=*/committed, &reads);
        if (!applied.ok()) {
          fail_verify(where + ": " + applied.status().message());
        } else if (applied.value() != committed) {
          fail_verify(where + (committed ? " committed but aborts" : " aborted but commits") +
                      " when the txns run serially in planned order");
        } else if (committed && ReadsHash(reads) != r.reads_hash) {
          fail_verify(where + ": the values it read differ from the serial run's");
        }
        reads_checked += committed ? reads.size() / options.Layout().size() : 0;
      }
      if (!verify_failed) {
        verify_text = "ok: " + std::to_string(records.size()) + " txns in planned order, fates and " +
                      std::to_string(reads_checked) + " read values equal the serial reference's, state digest " +
                      Hex(ref.table().Digest());
        if (leader_answered && leader_status.last_digest != ref.table().Digest()) {
          fail_verify("the leader's state digest " + Hex(leader_status.last_digest) + " differs from the reference's " +
                      Hex(ref.table().Digest()) + " (another client ran, or the cluster was not fresh?)");
        }
      }
    }
  }

  // Report.
  Totals& t = totals;
  std::lock_guard<std::mutex> lk(t.mu);
  const int64_t window_ns = (has_txns ? end : window_end) - window.start_ns.load();
  const double window_s = static_cast<double>(window_ns) / 1e9;
  const uint64_t w_committed = has_txns ? t.committed : t.w_committed;
  const uint64_t w_aborted = has_txns ? t.aborted : t.w_aborted;
  const double tps = window_s > 0 ? static_cast<double>(w_committed) / window_s : 0;
  const double ops = tps * static_cast<double>(ops_per_txn);
  const double p50 = Ms(t.latency_ns.Percentile(0.50)), p95 = Ms(t.latency_ns.Percentile(0.95));
  const double p99 = Ms(t.latency_ns.Percentile(0.99)), p999 = Ms(t.latency_ns.Percentile(0.999));
  std::printf("qrstore-client: %s against %s, %s (seed %" PRIu64 ", %u connection(s) x %" PRIu64 " in flight)\n",
              kind.c_str(), target.c_str(),
              has_txns ? (std::to_string(total_txns) + " txns").c_str() : ("measured " + Num(window_s) + " s").c_str(),
              seed, conns, outstanding);
  std::printf("  throughput     %.0f txn/s, %.0f ops/s (%" PRIu64 " ops per txn)\n", tps, ops, ops_per_txn);
  std::printf("  committed      %" PRIu64 "  aborted %" PRIu64 "  rejected %" PRIu64 "  failed %" PRIu64
              "  errors %" PRIu64 "  (whole run: %" PRIu64 " committed)\n",
              w_committed, w_aborted, t.rejected, t.failed, t.errors, t.committed);
  std::printf("  latency ms     p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n", p50, p95, p99, p999,
              Ms(t.latency_ns.max()));
  JsonObject cpu_json, cpu_txn_json, phases_json;
  for (const cluster::NodeInfo& n : topo->nodes()) {
    auto a = status0.find(n.name);
    auto b = status1.find(n.name);
    if (a == status0.end() || b == status1.end()) {
      std::printf("  node %-8s   no status (down?)\n", n.name.c_str());
      continue;
    }
    const proto::NodeStatus& s = b->second;
    const double cpu_s = static_cast<double>(s.cpu_ns - a->second.cpu_ns) / 1e9;
    const double us_per_txn = w_committed > 0 ? cpu_s * 1e6 / static_cast<double>(has_txns ? t.committed : w_committed) : 0;
    cpu_json.Dbl(n.name, cpu_s);
    cpu_txn_json.Dbl(n.name, us_per_txn);
    const proto::PhaseMeans& ph = s.phases;
    JsonObject pj;
    pj.Dbl("plan_ms", ph.plan_ms);
    pj.Dbl("deliver_ms", ph.deliver_ms);
    pj.Dbl("exec_ms", ph.exec_ms);
    pj.Dbl("repl_ms", ph.repl_ms);
    pj.Dbl("repl_wait_ms", ph.repl_wait_ms);
    pj.Dbl("commit_ms", ph.commit_ms);
    phases_json.Raw(n.name, pj.Done());
    std::printf("  node %-8s   %-8s batches %" PRIu64 "  per batch ms: plan %.3f deliver %.3f exec %.3f repl %.3f "
                "repl-wait %.3f commit %.3f  cpu %.2f s (%.3f us/txn)\n",
                n.name.c_str(), s.role.c_str(), s.committed_batches, ph.plan_ms, ph.deliver_ms, ph.exec_ms, ph.repl_ms,
                ph.repl_wait_ms, ph.commit_ms, cpu_s, us_per_txn);
  }
  for (const auto& f : leader_status.followers) {
    std::printf("  follower %-6s lag %" PRIu64 " batches, %" PRIu64 " digests checked, %" PRIu64 " mismatches, %s\n",
                f.node.c_str(), f.lag_batches, f.checked_batches, f.mismatches,
                f.agrees_at_last ? "agrees at the last batch" : "does NOT agree at the last batch");
  }
  std::printf("  replicas agree %s%s\n", replicas_agree ? "yes" : "NO",
              leader_status.followers.empty() ? " (no followers)" : "");
  std::printf("  verify         %s\n", verify_text.c_str());
  for (const auto& e : t.first_errors) std::printf("  error          %s\n", e.c_str());

  if (json) {
    JsonObject inputs;
    inputs.Str("config_file", cli.Get("config"));
    if (has_txns) inputs.Int("txns", total_txns); else inputs.Dbl("duration_s", duration_flag.value());
    inputs.Dbl("warmup_s", warmup_flag.value());
    inputs.Int("connections", conns);
    inputs.Int("outstanding", outstanding);
    inputs.Int("seed", seed);
    inputs.Str("workload_file", cli.Get("workload-file"));
    inputs.Str("target", target);
    std::string ov = "[";
    for (size_t i = 0; i < cli.overrides().size(); ++i) ov += (i ? "," : "") + JsonString(cli.overrides()[i]);
    inputs.Raw("overrides", ov + "]");
    JsonObject j;
    j.Str("workload", kind);
    j.Int("committed", w_committed);
    j.Int("aborted", w_aborted);
    j.Int("rejected", t.rejected);
    j.Int("failed", t.failed);
    j.Int("errors", t.errors);
    j.Int("committed_total", t.committed);
    j.Dbl("elapsed_s", window_s);
    j.Dbl("throughput_tps", tps);
    j.Dbl("ops_per_s", ops);
    j.Dbl("p50_ms", p50);
    j.Dbl("p95_ms", p95);
    j.Dbl("p99_ms", p99);
    j.Dbl("p999_ms", p999);
    j.Dbl("max_ms", Ms(t.latency_ns.max()));
    j.Bool("replicas_agree", replicas_agree);
    j.Int("digest_mismatches", leader_status.digest_mismatches);
    j.Int("follower_lag_batches", max_lag);
    j.Int("leader_batches", leader_status.committed_batches);
    j.Int("acked_batches", t.max_acked_batch);  // 1 + the highest batch any answer came from
    j.Str("leader_digest", Hex(leader_status.last_digest));
    j.Raw("server_cpu_s", cpu_json.Done());
    j.Raw("cpu_us_per_txn", cpu_txn_json.Done());
    j.Raw("phases", phases_json.Done());
    j.Str("verify", verify_text);
    j.Raw("inputs", inputs.Done());
    j.Raw("config", config.DumpJson());
    std::printf("%s\n", j.Done().c_str());
  }
  std::fflush(stdout);
  if (!drained) return Fail(kExitFailed, "some requests got no answer within 60 s");
  if (broken || t.errors > 0 || t.failed > 0 || t.rejected > 0) {
    return Fail(kExitFailed, std::to_string(t.failed) + " failed, " + std::to_string(t.rejected) + " rejected, " +
                                 std::to_string(t.errors) + " errors" + (t.first_errors.empty() ? "" : ": " + t.first_errors[0]));
  }
  if (!replicas_agree) return Fail(kExitFailed, "the replicas did not all agree with the leader within client.settle_timeout_ms");
  if (verify_failed) return Fail(kExitFailed, "verify " + verify_text);
  return kExitOk;
}

}  // namespace
}  // namespace qrstore::bench

int main(int argc, char** argv) { return qrstore::bench::Main(argc, argv); }
