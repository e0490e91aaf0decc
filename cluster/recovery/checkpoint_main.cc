// qrstore-checkpoint: lists and validates one node's checkpoint files (cluster/recovery/checkpointer.h
// writes them under <server.checkpoint_dir>/<node>/, storage/checkpoint.h is the format), and
// can dump the newest valid one in the server's dump format (workloads::DumpState).
//
// A file is valid when ReadCheckpoint accepts it for this node's identity (cluster id,
// partition, record size, capacity: the values the server derives from the same config), its
// header batch matches its name, its session table decodes under the configured limits, and the
// state digest recomputed from its records and sessions equals the header's. Single-threaded;
// reads only (the optional dump is the one file it writes). Runs beside a live node too: the
// writer renames complete files into place, and a file it prunes meanwhile is shown refused.
//
// Exit status: 0 the newest file is valid, 1 no valid checkpoint or the newest is refused,
// 2 bad input (flags, config, unknown node, unusable --dump path).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "cluster/config/cluster_config.h"
#include "cluster/config/topology.h"
#include "cluster/recovery/checkpointer.h"
#include "cluster/sessions/session_store.h"
#include "common/cli.h"
#include "common/exit_codes.h"
#include "common/hash.h"
#include "common/report.h"
#include "planner/session_table.h"
#include "storage/checkpoint.h"
#include "storage/table.h"
#include "workloads/workload.h"

namespace qrstore::cluster {
namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "qrstore-checkpoint: %s\n", msg.c_str());
  return code;
}

// What one file holds, as far as it could be read.
struct FileReport {
  std::string path, name;
  uint64_t name_batch = 0;  // from the file name (ListCheckpoints only lists parseable names)
  bool meta_known = false;  // the header was read: meta and bytes below are meaningful
  storage::CheckpointMeta meta;
  bool sessions_known = false;
  uint64_t sessions = 0, outcomes = 0;
  uint64_t bytes = 0;
  std::string error;  // empty: valid
};

std::string Age(int64_t created_unix_ms, int64_t now_ms) {
  const int64_t s = (now_ms - created_unix_ms) / 1000;
  if (s < 0) return "future";  // another host's clock; informational only
  if (s < 120) return std::to_string(s) + "s";
  if (s < 2 * 3600) return std::to_string(s / 60) + "m";
  if (s < 2 * 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string Size(uint64_t bytes) {
  char buf[32];
  if (bytes < 10'000) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < 1'000'000) std::snprintf(buf, sizeof buf, "%.1f KB", static_cast<double>(bytes) / 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// Reads and checks `r.path` in full (cluster/recovery/checkpointer.h ValidateNodeCheckpoint: the
// server's restart checks the same); on success *table holds it.
void Validate(const storage::CheckpointExpect& expect, const workloads::WorkloadOptions& workload,
              const planner::SessionLimits& limits, FileReport* r, std::unique_ptr<storage::Table>* table) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(r->path, ec);
  r->bytes = ec ? 0 : bytes;  // a file gone meanwhile: ReadCheckpoint says so
  planner::SessionTable sessions;
  Status st = ValidateNodeCheckpoint(r->path, expect, workload.Layout(), limits, table, &sessions, &r->meta,
                                     &r->meta_known);
  if (!st.ok()) {
    // The line already names the file.
    const std::string prefix = r->path + ": ";
    r->error = st.message().rfind(prefix, 0) == 0 ? st.message().substr(prefix.size()) : st.message();
    return;
  }
  r->sessions_known = true;
  r->sessions = sessions.sessions();
  r->outcomes = sessions.outcomes();
}

void Print(const FileReport& r, bool json, int64_t now_ms) {
  if (json) {
    JsonObject j;
    j.Str("file", r.path);
    j.Int("batch", r.meta_known ? r.meta.batch : r.name_batch);
    j.Raw("records", r.meta_known ? std::to_string(r.meta.records) : "null");
    j.Raw("sessions", r.sessions_known ? std::to_string(r.sessions) : "null");
    j.Raw("outcomes", r.sessions_known ? std::to_string(r.outcomes) : "null");
    j.Raw("digest", r.meta_known ? JsonString(Hex(r.meta.digest)) : "null");
    j.Raw("created_unix_ms", r.meta_known ? std::to_string(r.meta.created_unix_ms) : "null");
    j.Int("bytes", r.bytes);
    j.Bool("ok", r.error.empty());
    j.Raw("error", r.error.empty() ? "null" : JsonString(r.error));
    std::printf("%s\n", j.Done().c_str());
    return;
  }
  auto known = [](bool k, const std::string& v) { return k ? v : std::string("-"); };
  std::printf("%s  batch %llu  records %s  sessions %s  outcomes %s  digest %s  age %s  size %s  %s\n", r.name.c_str(),
              static_cast<unsigned long long>(r.meta_known ? r.meta.batch : r.name_batch),
              known(r.meta_known, std::to_string(r.meta.records)).c_str(),
              known(r.sessions_known, std::to_string(r.sessions)).c_str(),
              known(r.sessions_known, std::to_string(r.outcomes)).c_str(),
              known(r.meta_known, Hex(r.meta.digest)).c_str(),
              known(r.meta_known, Age(r.meta.created_unix_ms, now_ms)).c_str(), Size(r.bytes).c_str(),
              r.error.empty() ? "ok" : ("REFUSED: " + r.error).c_str());
}

int Main(int argc, char** argv) {
  CommandLine cli("qrstore-checkpoint", "--config FILE --node NAME [--key=value ...] [--dump OUT.tsv] [--json]",
                  "Lists the checkpoint files of node NAME (<server.checkpoint_dir>/<NAME>/checkpoint-<batch>.qrc),\n"
                  "newest first, and validates each in full: every record and checksum, the node's identity\n"
                  "(cluster, partition, record size, capacity, from the same config and overrides the server\n"
                  "ran with), the session table under the configured server.session_* limits, and the state\n"
                  "digest recomputed from the records and sessions against the header's. One line per file:\n"
                  "name, batch, records, sessions, outcomes, digest, age, size, then ok or REFUSED: <why>.\n"
                  "--json: one object per file: file, batch, records, sessions, outcomes, digest,\n"
                  "created_unix_ms, bytes, ok, error.\n"
                  "Reads only; safe beside a running node. Single-partition clusters only.\n"
                  "Exit status: 0 the newest checkpoint is valid, 1 none is valid or the newest is refused,\n"
                  "2 bad input (flags, config, unknown node, unusable --dump path).");
  cli.AddValue("config", "FILE", "the cluster config the node ran with");
  cli.AddValue("node", "NAME", "which node of cluster.nodes");
  cli.AddValue("dump", "OUT.tsv",
               "write the newest valid checkpoint's records (the server's dump format)");
  cli.AddSwitch("json", "one JSON object per file instead of the lines (null: unknown)");

  ConfigSchema schema;
  AddClusterConfigKeys(&schema);
  if (auto code = cli.ParseStandard(argc, argv, &schema)) return *code;
  if (!cli.Has("config")) return Fail(kExitBadInput, "missing --config FILE (see qrstore-checkpoint --help)");
  auto config = Config::Load(schema, cli.Get("config"), cli.overrides());
  if (!config.ok()) return Fail(kExitBadInput, config.status().message());
  auto topo = Topology::FromConfig(config.value());
  if (!topo.ok()) return Fail(kExitBadInput, cli.Get("config") + ": " + topo.status().message());
  if (!cli.Has("node")) return Fail(kExitBadInput, "missing --node NAME (see qrstore-checkpoint --help)");
  const std::string node = cli.Get("node");
  auto me = topo->Find(node);
  if (!me.ok()) return Fail(kExitBadInput, cli.Get("config") + ": " + me.status().message());
  const std::string dir = NodeCheckpointDir(config.value(), node);
  if (dir.empty()) {
    return Fail(kExitBadInput, "server.checkpoint_dir is empty: this cluster takes no checkpoints (set it, or pass "
                               "--server.checkpoint_dir=DIR as the servers were)");
  }
  auto workload = workloads::OptionsFromConfig(config.value());
  if (!workload.ok()) return Fail(kExitBadInput, workload.status().message());
  // One table per file checked, plus the newest valid one kept for --dump.
  if (Status s = workloads::CheckMemoryFits(workload.value(), 2, 0); !s.ok()) return Fail(kExitBadInput, s.message());

  const planner::SessionLimits limits = SessionLimitsFromConfig(config.value());  // as the server's
  const storage::CheckpointExpect expect = NodeCheckpointIdentity(topo.value(), me.value()->partition, workload.value());

  const std::string dump = cli.Get("dump");
  const bool dump_existed = !dump.empty() && ::access(dump.c_str(), F_OK) == 0;
  if (!dump.empty()) {
    if (Status s = workloads::ProbeWritable(dump); !s.ok()) return Fail(kExitBadInput, "--dump: " + s.message());
  }
  auto drop_probe = [&] {
    if (!dump.empty() && !dump_existed) std::remove(dump.c_str());  // leave no empty dump behind
  };

  auto paths = storage::ListCheckpoints(dir);
  if (!paths.ok() || paths->empty()) {
    drop_probe();
    return Fail(kExitFailed, "no checkpoint of node " + node + ": " +
                                 (paths.ok() ? "no checkpoint files in " + dir : paths.status().message()));
  }
  const bool json = cli.Has("json");
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  if (!json) std::printf("%s: %zu checkpoint files, newest first\n", dir.c_str(), paths->size());
  std::unique_ptr<storage::Table> newest_valid;
  std::string newest_valid_name;
  bool newest_ok = false;
  for (size_t i = 0; i < paths->size(); ++i) {
    FileReport r;
    r.path = paths->at(i);
    r.name = std::filesystem::path(r.path).filename().string();
    // ListCheckpoints lists only names "checkpoint-<20 digits>.qrc".
    r.name_batch = std::stoull(r.name.substr(std::string("checkpoint-").size(), 20));
    std::unique_ptr<storage::Table> table;
    Validate(expect, workload.value(), limits, &r, &table);
    if (i == 0) newest_ok = r.error.empty();
    if (table && !newest_valid) newest_valid = std::move(table), newest_valid_name = r.name;
    Print(r, json, now_ms);
  }
  std::fflush(stdout);

  if (!newest_valid) {
    drop_probe();
    return Fail(kExitFailed, "no valid checkpoint in " + dir + (dump.empty() ? "" : ": nothing dumped"));
  }
  if (!dump.empty()) {
    if (Status s = workloads::DumpState(*newest_valid, dump); !s.ok()) return Fail(kExitFailed, s.message());
    std::fprintf(stderr, "qrstore-checkpoint: wrote %llu records of %s to %s\n",
                 static_cast<unsigned long long>(newest_valid->size()), newest_valid_name.c_str(), dump.c_str());
  }
  if (!newest_ok) return Fail(kExitFailed, "the newest checkpoint is refused (the newest valid: " + newest_valid_name + ")");
  return kExitOk;
}

}  // namespace
}  // namespace qrstore::cluster

int main(int argc, char** argv) { return qrstore::cluster::Main(argc, argv); }
