// What qrstore-client asks a cluster's nodes (client/cluster_view.h).
#include "client/cluster_view.h"

#include <algorithm>
#include <cinttypes>
#include <chrono>
#include <cstdio>
#include <thread>

#include "client/client.h"
#include "cluster/config/cluster_config.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/logging.h"

namespace qrstore::client {

namespace proto = cluster::proto;

// Every node's status (parallel); a node that does not answer is missing from the map.
std::map<std::string, proto::NodeStatus> AllStatus(const cluster::Topology& topo, int timeout_ms,
                                                  std::vector<std::string>* errors) {
  std::vector<std::string> addresses;
  for (const cluster::NodeInfo& n : topo.nodes()) addresses.push_back(n.client_address());
  auto results = QueryStatuses(addresses, timeout_ms);
  std::map<std::string, proto::NodeStatus> out;
  for (size_t i = 0; i < results.size(); ++i) {
    const cluster::NodeInfo& n = topo.nodes()[i];
    if (results[i].ok()) {
      out[n.name] = std::move(results[i]).value();
    } else if (errors != nullptr) {
      errors->push_back(n.name + " (" + n.client_address() + "): " + results[i].status().message());
    }
  }
  return out;
}

const cluster::NodeInfo* ServingLeader(const std::vector<const cluster::NodeInfo*>& group,
                                       const std::vector<Result<proto::NodeStatus>>& results) {
  const cluster::NodeInfo* found = nullptr;
  uint64_t found_term = 0;
  for (size_t i = 0; i < results.size() && i < group.size(); ++i) {
    if (!results[i].ok()) continue;
    const proto::NodeStatus& s = results[i].value();
    if (s.role == "leader" && s.state == "serving" && (found == nullptr || s.term > found_term)) {
      found = group[i];
      found_term = s.term;
    }
  }
  return found;
}

const cluster::NodeInfo* NamedLeader(const cluster::Topology& topo, uint32_t partition, int timeout_ms) {
  const auto group = topo.Group(partition);
  std::vector<std::string> addresses;
  for (const cluster::NodeInfo* n : group) addresses.push_back(n->client_address());
  auto results = QueryStatuses(addresses, timeout_ms);
  if (const cluster::NodeInfo* serving = ServingLeader(group, results)) return serving;
  std::map<std::string, int> named;  // leader named by the members that answer -> votes
  for (const auto& r : results) {
    if (r.ok() && !r.value().leader.empty()) ++named[r.value().leader];
  }
  const cluster::NodeInfo* best = nullptr;
  int votes = 0;
  for (const auto& [name, v] : named) {  // ordered: ties go to the first name
    auto n = topo.Find(name);
    if (v > votes && n.ok()) best = n.value(), votes = v;
  }
  return best;
}

const cluster::NodeInfo& LiveLeader(const cluster::Topology& topo, uint32_t partition, int timeout_ms) {
  const cluster::NodeInfo* named = NamedLeader(topo, partition, timeout_ms);
  return named != nullptr ? *named : topo.Leader(partition);
}

void WaitForServingLeader(const cluster::Topology& topo, uint32_t partition, int timeout_ms, int64_t wait_ms) {
  const auto group = topo.Group(partition);
  std::vector<std::string> addresses;
  for (const cluster::NodeInfo* n : group) addresses.push_back(n->client_address());
  const int64_t wait_until = NowNanos() + wait_ms * 1'000'000;
  bool said = false;
  for (;;) {
    const auto results = QueryStatuses(addresses, timeout_ms);
    const bool any = std::any_of(results.begin(), results.end(), [](const auto& r) { return r.ok(); });
    if (!any || ServingLeader(group, results) != nullptr || NowNanos() >= wait_until) return;
    if (!said) {
      Logger("client")->warn("no node of partition {} leads and serves yet: waiting (client.failover_timeout_ms)",
                             partition);
    }
    said = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// More batches behind its leader than this, a serving follower shows "catching-up" (a follower
// in step is a handful of batches behind: those in flight).
constexpr uint64_t kCatchingUpBatches = 50;

namespace {
// A partitioned row's summary under the node table: each partition's group (who leads it, as
// its members say, and how many of them serve) and each row (serving when every node of it
// serves; else which nodes do not, and how they are).
void PrintRowSummary(const cluster::Topology& topo, const std::map<std::string, proto::NodeStatus>& all) {
  std::printf("\n%-10s %-10s %s\n", "partition", "leader", "members serving");
  for (uint32_t q = 0; q < topo.partitions(); ++q) {
    std::string leader = "none";
    uint32_t serving = 0;
    const std::vector<const cluster::NodeInfo*> group = topo.Group(q);
    for (const cluster::NodeInfo* n : group) {
      auto it = all.find(n->name);
      if (it == all.end()) continue;
      if (it->second.state == "serving") ++serving;
      if (it->second.role == "leader") leader = n->name + "@" + std::to_string(it->second.term);
    }
    std::printf("%-10u %-10s %u of %zu\n", q, leader.c_str(), serving, group.size());
  }
  std::printf("\n%-10s %s\n", "row", "state");
  for (uint32_t r = 0; r < topo.rows(); ++r) {
    std::string missing;
    for (uint32_t q = 0; q < topo.partitions(); ++q) {
      const cluster::NodeInfo& n = topo.At(q, r);
      auto it = all.find(n.name);
      const std::string state = it == all.end() ? "down" : it->second.state;
      if (state != "serving") missing += (missing.empty() ? "" : ", ") + n.name + " " + state;
    }
    std::printf("%-10u %s\n", r, missing.empty() ? "serving" : ("not serving: " + missing).c_str());
  }
}
}  // namespace

int StatusMain(const cluster::Topology& topo, int timeout_ms) {
  std::vector<std::string> errors;
  auto all = AllStatus(topo, timeout_ms, &errors);
  std::map<std::string, proto::FollowerView> views;  // as the leaders see their followers
  for (const auto& [name, s] : all) {
    for (const auto& f : s.followers) views[f.node] = f;
  }
  // leader: whom the node believes leads its group, with the backend's term (raft) or epoch
  // (zookeeper): "n1@2".
  std::printf("%-12s %-9s %-11s %10s %12s %8s %-10s %-10s %-14s %s\n", "node", "role", "state", "batches", "committed",
              "lag", "digest", "leader", "checkpoint", "error");
  for (const cluster::NodeInfo& n : topo.nodes()) {
    auto it = all.find(n.name);
    if (it == all.end()) {
      // No answer (down, paused, unreachable): what its leader knows of it, if anything.
      std::string lag = "-", digest = "-", error = "no answer";
      if (auto v = views.find(n.name); v != views.end()) {
        lag = std::to_string(v->second.lag_batches);
        if (v->second.stranded) {
          digest = "stranded";
          error += "; stranded (as its leader sees it): " + v->second.note;
        }
      }
      std::printf("%-12s %-9s %-11s %10s %12s %8s %-10s %-10s %-14s %s\n", n.name.c_str(), "-", "down", "-", "-",
                  lag.c_str(), digest.c_str(), "-", "-", error.c_str());
      continue;
    }
    const proto::NodeStatus& s = it->second;
    std::string lag = "-", digest = "-";
    std::string error = s.error;
    if (auto v = views.find(n.name); v != views.end()) {
      lag = std::to_string(v->second.lag_batches);
      digest = v->second.mismatches > 0 ? "MISMATCH"
               : v->second.stranded   ? "stranded"
                                      : (v->second.agrees_at_last ? "agrees" : "behind");
      if (v->second.stranded && error.empty()) error = "stranded (as its leader sees it): " + v->second.note;
    } else if (s.role == "leader") {
      digest = s.digest_mismatches > 0 ? "MISMATCH" : "reference";
    }
    const std::string leader = s.leader.empty() ? "-" : s.leader + "@" + std::to_string(s.term);
    // A serving follower further behind its leader than a few batches in flight is catching up.
    std::string state = s.state;
    if (auto v = views.find(n.name); v != views.end() && state == "serving" && !v->second.stranded &&
                                     v->second.lag_batches > kCatchingUpBatches) {
      state = "catching-up";
    }
    // A node that re-executed itself after it was deposed rejoins until its leader sees it
    // reporting and in step.
    if (auto v = views.find(n.name); s.rejoins > 0 && s.role == "follower" && (state == "serving" || state == "catching-up") &&
                                     (v == views.end() || !v->second.connected || v->second.lag_batches > kCatchingUpBatches)) {
      state = "rejoining";
    }
    // The newest checkpoint it wrote: "<batch>/<age>s".
    const std::string checkpoint =
        s.has_checkpoint ? std::to_string(s.checkpoint_batch) + "/" + std::to_string(s.checkpoint_age_s) + "s" : "-";
    std::printf("%-12s %-9s %-11s %10" PRIu64 " %12" PRIu64 " %8s %-10s %-10s %-14s %s\n", n.name.c_str(),
                s.role.c_str(), state.c_str(), s.committed_batches, s.committed_txns, lag.c_str(), digest.c_str(),
                leader.c_str(), checkpoint.c_str(), error.empty() ? "-" : error.c_str());
  }
  if (topo.partitions() > 1) PrintRowSummary(topo, all);
  std::fflush(stdout);
  for (const auto& e : errors) std::fprintf(stderr, "qrstore-client: %s: no answer: %s\n", topo.name().c_str(), e.c_str());
  return errors.empty() ? kExitOk : kExitFailed;
}

// The table the servers loaded (their status: NodeStatus::loaded) wins over this client's copy
// of the config file, which may lack the overrides they were started with (cluster.sh up
// --ycsb.records=...): a key that differs is taken from the servers, unless the user chose it
// for this run (`chosen`: key -> "command line" or the workload file), which is an error
// saying what the servers hold. Servers that do not answer (or do not say) leave the config
// as it is: the connections report them.
Status FollowTheServers(const cluster::Topology& topo, int timeout_ms, const std::map<std::string, std::string>& chosen,
                        Config* config) {
  auto log = Logger("client");
  const cluster::NodeInfo& leader = LiveLeader(topo, 0, timeout_ms);
  auto st = QueryStatus(leader.client_address(), timeout_ms);
  if (!st.ok()) {
    log->warn("could not ask {} what it loaded ({}): generating for the config file's table", leader.name,
              st.status().message());
    return Status::Ok();
  }
  const std::vector<std::pair<std::string, std::string>> mine = cluster::TableKeys(*config);
  std::vector<std::string> adopt;
  for (const auto& loaded : st.value().loaded) {
    // (no structured binding: clang 14 cannot capture one in the lambda below)
    const std::string& key = loaded.first;
    const std::string& theirs = loaded.second;
    auto it = std::find_if(mine.begin(), mine.end(), [&](const auto& kv) { return kv.first == key; });
    if (it == mine.end() || it->second == theirs) continue;
    if (auto c = chosen.find(key); c != chosen.end()) {
      return Status::InvalidArgument(c->second + ": " + key + "=" + it->second + " but the servers hold " + key + "=" +
                                     theirs + " (" + leader.name + "'s status): start them with it (cluster.sh up " +
                                     "CONFIG --" + key + "=" + it->second + ") or leave it out");
    }
    log->info("the servers hold {}={} (the config file says {}): generating for that", key, theirs, it->second);
    adopt.push_back(key + "=" + theirs);
  }
  if (adopt.empty()) return Status::Ok();
  auto with = config->WithOverrides(adopt);
  if (!with.ok()) return Status::InvalidArgument("what " + leader.name + " loaded: " + with.status().message());
  *config = std::move(with).value();
  return Status::Ok();
}

}  // namespace qrstore::client
