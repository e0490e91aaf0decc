// --verify's final check and the summary of a qrstore-client run (client/report.h): the text
// lines, the --json object (its keys in a fixed order: scripts read them), the exit status.
#include "client/report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <vector>

#include "client/client.h"
#include "client/stats.h"
#include "client/verify.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/report.h"
#include "workloads/latency_histogram.h"

namespace qrstore::client {
namespace {

namespace proto = cluster::proto;

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string Fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// The run's figures the summary prints: whole run, and the measured window's.
struct Totals {
  uint64_t committed_total = 0, aborted_total = 0, rejected = 0, failed = 0;
  uint64_t w_committed = 0, w_aborted = 0;  // in the window (a --txns run: the whole run)
  uint64_t write_ops_committed = 0, in_doubt = 0, write_ops_in_doubt = 0, retried = 0, no_values = 0;
  uint64_t submitted = 0;
  double window_s = 0, tps = 0, ops = 0;
  double p50 = 0, p95 = 0, p99 = 0, p999 = 0, max_ms = 0, mean_ms = 0;  // committed txns' latency
  double client_cpu_s = 0;
  double PerTxnUs(double cpu_s) const { return w_committed > 0 ? cpu_s * 1e6 / static_cast<double>(w_committed) : 0.0; }
};

// Every node's figures over the window as JSON objects by node name (filled as they are printed).
struct NodeJson {
  std::string cpu, cpu_per_txn, phases, batches;
  double in_server_ms = 0;  // mean over every node's replies in the window: a request read -> answered
  uint64_t replies = 0;
  // What replication cost per committed txn in the window (docs/replication-points.md).
  std::string point;              // replication.point, as the nodes said ("" when none did)
  uint64_t replicated_bytes = 0;  // over every node
  double leader_cpu_s = 0, follower_cpu_s = 0;
  uint32_t leaders = 0, followers = 0;
};

// The digests after a --verify replay that passed: the row's leaders' (each partition's its
// own), or the leader's.
Status CheckDigests(const RunOptions& o, const Run& run, const ClientVerifyReport& vr) {
  const RunOutcome& out = run.outcome();
  if (o.row_size > 1) {
    // Each node of the row holds the reference's records of its partition (and the initial
    // ones of the others). Asked again rather than reusing the settle loop's statuses: a peer
    // may report a batch's outcomes a moment before its batch hook records the digest.
    for (uint32_t p = 0; p < o.row_size; ++p) {
      const cluster::NodeInfo& n = o.topology.Leader(p);
      auto st = QueryStatus(n.client_address(), o.connect_ms);
      if (!st.ok()) return Status::Unavailable(n.name + "'s final digest is unknown: " + st.status().message());
      if (st.value().last_digest != vr.partition_digests[p]) {
        return Status::Internal(n.name + " (partition " + std::to_string(p) + "): state digest " +
                                Hex(st.value().last_digest) + " differs from the reference's for its partition " +
                                Hex(vr.partition_digests[p]) + " (another client ran, or the cluster was not fresh?)");
      }
    }
  } else if (out.leader_answered && out.leader_status.last_digest != vr.reference_digest) {
    return Status::Internal("the leader's state digest " + Hex(out.leader_status.last_digest) +
                            " differs from the reference's " + Hex(vr.reference_digest) +
                            " (another client ran, or the cluster was not fresh?)");
  } else if (!out.leader_answered) {
    return Status::Unavailable("the leader's final digest is unknown: " + out.agreement.message());
  }
  return Status::Ok();
}

Totals Tally(const RunOptions& o, const Run& run) {
  workloads::LatencyHistogram latency;
  for (auto& l : run.connections()) latency.Merge(l->latency());
  Totals t;
  t.committed_total = run.Sum(&Counts::committed);
  t.aborted_total = run.Sum(&Counts::aborted);
  t.rejected = run.Sum(&Counts::rejected);
  t.failed = run.Sum(&Counts::failed);
  t.w_committed = o.has_txns ? t.committed_total : run.Sum(&Counts::w_committed);
  t.w_aborted = o.has_txns ? t.aborted_total : run.Sum(&Counts::w_aborted);
  t.write_ops_committed = run.Sum(&Counts::write_ops_committed);
  t.in_doubt = run.Sum(&Counts::in_doubt);
  t.write_ops_in_doubt = run.Sum(&Counts::write_ops_in_doubt);
  t.retried = run.Sum(&Counts::retried);
  t.no_values = run.Sum(&Counts::no_values);
  for (auto& l : run.connections()) t.submitted += l->sent();
  t.window_s = static_cast<double>(run.window().end_ns.load() - run.window().start_ns.load()) / 1e9;
  t.tps = t.window_s > 0 ? static_cast<double>(t.w_committed) / t.window_s : 0;
  t.ops = t.tps * static_cast<double>(o.ops_per_txn);
  t.p50 = Ms(latency.Percentile(0.50));
  t.p95 = Ms(latency.Percentile(0.95));
  t.p99 = Ms(latency.Percentile(0.99));
  t.p999 = Ms(latency.Percentile(0.999));
  t.max_ms = Ms(latency.max());
  t.mean_ms = latency.mean() / 1e6;
  t.client_cpu_s = static_cast<double>(run.outcome().cpu1 - run.outcome().cpu0) / 1e9;
  return t;
}

// The run's lines: what ran against what, throughput, counts, fates, failovers, latency, CPU.
void PrintRun(const RunOptions& o, const Run& run, const Totals& t) {
  const RunOutcome& out = run.outcome();
  std::printf("qrstore-client: %s against %s, %s (seed %" PRIu64 ", %u connection(s) x %" PRIu64
              " in flight, %u txns per request%s)\n",
              o.kind.c_str(), out.target.c_str(),
              o.has_txns ? (std::to_string(o.total_txns) + " txns in " + Num(t.window_s) + " s").c_str()
                         : ("measured " + Num(t.window_s) + " s").c_str(),
              o.seed, o.conns, o.outstanding, o.per_request, o.pacing.c_str());
  std::printf("  throughput     %.0f txn/s, %.0f ops/s (%" PRIu64 " ops per txn)\n", t.tps, t.ops, o.ops_per_txn);
  std::printf("  committed      %" PRIu64 "  aborted %" PRIu64 "  rejected %" PRIu64 "  failed %" PRIu64
              "  errors %" PRIu64 "  (whole run: %" PRIu64 " submitted, %" PRIu64 " committed)\n",
              t.w_committed, t.w_aborted, t.rejected, t.failed, run.errors().count(), t.submitted, t.committed_total);
  if (out.interrupted) {
    std::printf("  interrupted    by SIGINT/SIGTERM: the run ended early (%s)\n",
                o.has_txns ? "before all its txns were sent: a failed run" : "what ran is reported");
  }
  std::printf("  fates          write ops committed %" PRIu64 " (whole run); in doubt %" PRIu64 " txns (%" PRIu64
              " write ops): outcome unknown (answered failed or lost in flight without a session, expired, or "
              "unanswered at the end), executed or not\n",
              t.write_ops_committed, t.in_doubt, t.write_ops_in_doubt);
  std::printf("  sessions       one per connection; %" PRIu64 " txns sent again to a new leader (each answered "
              "once: what had run is answered from the replicated session table, not run again)\n",
              t.retried);
  if (out.failovers > 0 || out.gave_up) {
    std::printf("  failovers      %" PRIu64 " (now driving %s); longest time without a commit %.0f ms%s\n",
                out.failovers, out.leader_name.c_str(), static_cast<double>(out.longest_gap_ns) / 1e6,
                out.gave_up ? "; GAVE UP: no new leader within client.failover_timeout_ms" : "");
  }
  std::printf("  latency ms     p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (request sent -> answer, committed)\n",
              t.p50, t.p95, t.p99, t.p999, t.max_ms);
  std::printf("  client cpu     %.2f s (%.3f us/txn)\n", t.client_cpu_s, t.PerTxnUs(t.client_cpu_s));
}

// A line per node: its role, batches, phase times and CPU over the window.
NodeJson PrintNodes(const RunOptions& o, const Run& run, const Totals& t) {
  const RunOutcome& out = run.outcome();
  JsonObject cpu_json, cpu_txn_json, phases_json, batches_json;
  uint64_t replies = 0;
  double request_ms_sum = 0;
  NodeJson nj;
  for (const cluster::NodeInfo& n : o.topology.nodes()) {
    auto a = out.status0.find(n.name);
    auto b = out.status1.find(n.name);
    std::optional<NodeWindow> w;
    if (a != out.status0.end() && b != out.status1.end()) w = WindowOf(a->second, b->second);
    if (!w) {
      std::printf("  node %-8s   %s\n", n.name.c_str(),
                  a == out.status0.end() || b == out.status1.end() ? "no status in the window (down?)"
                                                                   : "restarted in the window");
      continue;
    }
    cpu_json.Dbl(n.name, w->cpu_s);
    cpu_txn_json.Dbl(n.name, t.PerTxnUs(w->cpu_s));
    batches_json.Int(n.name, w->batches);
    const proto::PhaseMeans& ph = w->phases;
    JsonObject pj;
    pj.Dbl("cut_ms", ph.cut_ms);
    pj.Dbl("plan_ms", ph.plan_ms);
    pj.Dbl("deliver_ms", ph.deliver_ms);
    pj.Dbl("exec_ms", ph.exec_ms);
    pj.Dbl("repl_ms", ph.repl_ms);
    pj.Dbl("repl_wait_ms", ph.repl_wait_ms);
    pj.Dbl("commit_ms", ph.commit_ms);
    pj.Bool("windowed", w->phases_windowed);
    pj.Dbl("log_syncs_per_batch", w->log_syncs_per_batch);
    pj.Dbl("log_sync_ms", w->log_sync_ms);
    pj.Int("replies", w->replies);
    pj.Dbl("reply_ms", w->reply_ms);
    pj.Dbl("request_ms", w->request_ms);
    phases_json.Raw(n.name, pj.Done());
    if (!b->second.point.empty()) nj.point = b->second.point;
    nj.replicated_bytes += w->replicated_bytes;
    if (b->second.role == "leader") {
      nj.leader_cpu_s += w->cpu_s;
      ++nj.leaders;
    } else if (b->second.role == "follower") {
      nj.follower_cpu_s += w->cpu_s;
      ++nj.followers;
    }
    replies += w->replies;
    request_ms_sum += w->request_ms * static_cast<double>(w->replies);
    std::printf("  node %-8s   %-8s batches %" PRIu64 "%s  per batch ms: cut %.3f plan %.3f deliver %.3f exec %.3f "
                "repl %.3f repl-wait %.3f commit %.3f  cpu %.2f s (%.3f us/txn)\n",
                n.name.c_str(), b->second.role.c_str(), w->batches, w->phases_windowed ? "" : " (means since start)",
                ph.cut_ms, ph.plan_ms, ph.deliver_ms, ph.exec_ms, ph.repl_ms, ph.repl_wait_ms, ph.commit_ms, w->cpu_s,
                t.PerTxnUs(w->cpu_s));
    if (w->log_syncs_per_batch > 0 || w->replies > 0) {
      std::string log = w->log_syncs_per_batch > 0
                            ? "log fsync " + Fixed3(w->log_sync_ms) + " ms per batch (" + Fixed3(w->log_syncs_per_batch) +
                                  " syncs)"
                            : std::string("log fsync none here");
      std::string rep = w->replies > 0 ? "; " + std::to_string(w->replies) + " replies: in this server " +
                                             Fixed3(w->request_ms) + " ms (read -> written), complete -> written " +
                                             Fixed3(w->reply_ms) + " ms"
                                       : std::string();
      std::printf("  %-15s  %s%s\n", "", log.c_str(), rep.c_str());
    }
  }
  nj.cpu = cpu_json.Done();
  nj.cpu_per_txn = cpu_txn_json.Done();
  nj.phases = phases_json.Done();
  nj.batches = batches_json.Done();
  nj.replies = replies;
  nj.in_server_ms = replies > 0 ? request_ms_sum / static_cast<double>(replies) : 0;
  if (replies > 0 && t.w_committed > 0) {
    std::printf("  a txn's time   mean %.3f ms: %.3f in the servers (request read -> reply written), %.3f outside "
                "(network, client queues)\n",
                t.mean_ms, nj.in_server_ms, t.mean_ms - nj.in_server_ms);
  }
  if (nj.followers > 0 && t.w_committed > 0) {
    const double txns = static_cast<double>(t.w_committed);
    std::printf("  replication    point %s: %.1f bytes replicated per txn; cpu per txn %.3f us a leader, %.3f us a "
                "follower (means over %u and %u)\n",
                nj.point.empty() ? "?" : nj.point.c_str(), static_cast<double>(nj.replicated_bytes) / txns,
                t.PerTxnUs(nj.leader_cpu_s) / std::max(1u, nj.leaders),
                t.PerTxnUs(nj.follower_cpu_s) / nj.followers, nj.leaders, nj.followers);
  }
  return nj;
}

// A line per follower (lag, digests; down or stranded ones said so), and whether the replicas
// agree.
void PrintReplicas(const Run& run) {
  const RunOutcome& out = run.outcome();
  for (const auto& f : out.leader_status.followers) {
    if (std::find(out.down_followers.begin(), out.down_followers.end(), f.node) != out.down_followers.end()) {
      std::printf("  follower %-6s DOWN (no status, no report connection; lag %" PRIu64 " batches): not waited for\n",
                  f.node.c_str(), f.lag_batches);
      continue;
    }
    if (f.stranded) {
      std::printf("  follower %-6s STRANDED (lag %" PRIu64 " batches, %" PRIu64 " mismatches): %s\n", f.node.c_str(),
                  f.lag_batches, f.mismatches, f.note.c_str());
      continue;
    }
    std::printf("  follower %-6s lag %" PRIu64 " batches, %" PRIu64 " digests checked, %" PRIu64 " mismatches, %s\n",
                f.node.c_str(), f.lag_batches, f.checked_batches, f.mismatches,
                f.agrees_at_last ? "agrees at the last batch" : "does NOT agree at the last batch");
  }
  const std::vector<const proto::FollowerView*> stranded = StrandedFollowers(out.leader_status);
  std::string stranded_text;
  for (const proto::FollowerView* f : stranded) stranded_text += (stranded_text.empty() ? "" : ", ") + f->node;
  if (!stranded_text.empty()) stranded_text = " (stranded, not counted: " + stranded_text + ")";
  std::string down_text;
  for (const std::string& d : out.down_followers) down_text += (down_text.empty() ? "" : ", ") + d;
  if (!down_text.empty()) stranded_text += " (down, not counted: " + down_text + ")";
  std::printf("  replicas agree %s%s%s\n", out.replicas_agree ? "yes" : "NO: ",
              out.replicas_agree ? (out.follower_names.empty() ? " (no followers)" : "") : out.agreement.message().c_str(),
              stranded_text.c_str());
}

// --json's "inputs": what the run was asked.
std::string InputsJson(const RunOptions& o) {
  JsonObject inputs;
  inputs.Str("config_file", o.config_file);
  if (o.has_txns) inputs.Int("txns", o.total_txns); else inputs.Dbl("duration_s", o.duration_s);
  inputs.Dbl("warmup_s", o.warmup_s);
  inputs.Int("connections", o.conns);
  inputs.Int("outstanding", o.outstanding);
  inputs.Int("txns_per_request", o.per_request);
  inputs.Dbl("target_tps", o.target_tps);
  inputs.Int("seed", o.seed);
  inputs.Bool("verify", o.verify);
  inputs.Str("workload_file", o.workload_file);
  inputs.Str("node", o.node);
  inputs.Raw("overrides", JsonStringArray(o.overrides));
  return inputs.Done();
}

// --json: one object, the last line of stdout.
void PrintJson(const RunOptions& o, const Run& run, const Totals& t, const NodeJson& nodes, const VerifyResult& verify) {
  const RunOutcome& out = run.outcome();
  JsonObject j;
  j.Str("workload", o.kind);
  j.Str("target", out.target);
  j.Int("submitted", t.submitted);
  j.Int("committed", t.w_committed);
  j.Int("aborted", t.w_aborted);
  j.Int("rejected", t.rejected);
  j.Int("failed", t.failed);
  j.Int("errors", run.errors().count());
  j.Bool("interrupted", out.interrupted);
  j.Int("committed_total", t.committed_total);
  // Whole run: what an exactly-once check needs (the table's update counters sum to at least
  // update_ops_committed and at most that plus update_ops_in_doubt).
  j.Int("update_ops_committed", t.write_ops_committed);
  j.Int("in_doubt", t.in_doubt);
  j.Int("update_ops_in_doubt", t.write_ops_in_doubt);
  j.Int("failovers", out.failovers);
  j.Dbl("unavailable_ms", static_cast<double>(out.longest_gap_ns) / 1e6);  // the longest time without a commit
  j.Int("retried", t.retried);  // txns sent again to a new leader (client sessions)
  // Of the committed: retries answered from the session table (they had run), without values.
  j.Int("committed_no_values", t.no_values);
  j.Str("leader", out.leader_name);
  j.Int("aborted_total", t.aborted_total);
  j.Dbl("elapsed_s", t.window_s);
  j.Dbl("throughput_tps", t.tps);
  j.Dbl("ops_per_s", t.ops);
  j.Dbl("p50_ms", t.p50);
  j.Dbl("p95_ms", t.p95);
  j.Dbl("p99_ms", t.p99);
  j.Dbl("p999_ms", t.p999);
  j.Dbl("max_ms", t.max_ms);
  j.Dbl("mean_ms", t.mean_ms);
  j.Dbl("in_server_ms", nodes.in_server_ms);  // the mean of every node's request_ms, by replies
  j.Bool("replicas_agree", out.replicas_agree);
  if (!out.replicas_agree) j.Str("replicas_detail", out.agreement.message());
  std::vector<std::string> stranded_names;
  JsonObject stranded_json;
  for (const proto::FollowerView* f : StrandedFollowers(out.leader_status)) {
    stranded_names.push_back(f->node);
    stranded_json.Str(f->node, f->note);
  }
  std::string timeline_json;
  for (uint64_t c : out.timeline) timeline_json += (timeline_json.empty() ? "" : ",") + std::to_string(c);
  j.Int("progress_interval_ms", static_cast<uint64_t>(o.config.GetInt("client.progress_interval_ms")));
  char start_buf[32];  // (ms precision: Dbl keeps 6 digits)
  std::snprintf(start_buf, sizeof start_buf, "%.3f", out.start_unix_s);
  j.Raw("timeline_start_unix_s", start_buf);  // committed_per_interval[0] starts here
  j.Raw("committed_per_interval", "[" + timeline_json + "]");
  j.Raw("stranded_followers", JsonStringArray(stranded_names));
  j.Raw("down_followers", JsonStringArray(out.down_followers));
  j.Raw("stranded_detail", stranded_json.Done());
  j.Int("digest_mismatches", out.leader_status.digest_mismatches);
  j.Int("follower_lag_batches", out.max_lag);
  j.Int("leader_batches", out.leader_status.committed_batches);
  j.Int("acked_batches", out.acked_batches);  // 1 + the highest batch any committed/aborted answer came from
  j.Str("leader_digest", Hex(out.leader_status.last_digest));
  j.Raw("server_cpu_s", nodes.cpu);
  j.Raw("cpu_us_per_txn", nodes.cpu_per_txn);
  j.Raw("batches", nodes.batches);
  j.Raw("phases", nodes.phases);
  j.Str("replication_point", nodes.point);
  j.Dbl("replicated_bytes_per_txn",
        t.w_committed > 0 ? static_cast<double>(nodes.replicated_bytes) / static_cast<double>(t.w_committed) : 0.0);
  j.Dbl("leader_cpu_us_per_txn", t.PerTxnUs(nodes.leader_cpu_s) / std::max(1u, nodes.leaders));
  j.Dbl("follower_cpu_us_per_txn", nodes.followers > 0 ? t.PerTxnUs(nodes.follower_cpu_s) / nodes.followers : 0.0);
  j.Dbl("client_cpu_s", t.client_cpu_s);
  j.Dbl("client_cpu_us_per_txn", t.PerTxnUs(t.client_cpu_s));
  j.Bool("stopped_at_verify_cap", out.capped);
  j.Str("verify", verify.text);
  j.Raw("inputs", InputsJson(o));
  j.Raw("config", o.config.DumpJson());
  std::printf("%s\n", j.Done().c_str());
}

}  // namespace

VerifyResult VerifyRun(const RunOptions& o, Run& run) {
  VerifyResult r;
  if (o.verify && run.Sum(&Counts::in_doubt) > 0) {
    // The serial reference needs every txn's fate.
    r.text = "not possible: " + std::to_string(run.Sum(&Counts::in_doubt)) +
             " txns are in doubt (a failover: executed or not, the client cannot tell yet)";
    r.failed = true;
  } else if (o.verify) {
    std::vector<ClientTxnRecord> records;
    std::vector<uint64_t> sent;
    for (auto& l : run.connections()) {
      sent.push_back(l->sent());
      records.insert(records.end(), l->records().begin(), l->records().end());
      std::vector<ClientTxnRecord>().swap(l->records());
    }
    const int64_t v0 = NowNanos();
    ClientVerifyReport vr;
    Status v = VerifyClientRun(o.workload, o.seed, sent, &records, &vr, o.row_size);
    if (v.ok()) v = CheckDigests(o, run, vr);
    if (v.ok()) {
      r.text = "ok: " + std::to_string(vr.txns) + " txns in planned order (" + std::to_string(vr.committed) +
               " committed, " + std::to_string(vr.aborted) + " aborted), fates and " +
               std::to_string(vr.reads_checked) + " read values equal the serial reference's" +
               (vr.values_unknown > 0 ? " (" + std::to_string(vr.values_unknown) +
                                            " retried txns answered from the session table without their values)"
                                      : std::string()) +
               (o.row_size > 1 ? " (batch by batch with the row's cascade rule; each partition's digest checked)" : "") +
               ", digest " +
               Hex(vr.reference_digest) + ", " + Num(static_cast<double>(NowNanos() - v0) / 1e9) + " s";
    } else {
      r.text = "failed: " + v.message();
      r.failed = true;
    }
  }
  return r;
}

int Report(const RunOptions& o, const Run& run, const VerifyResult& verify) {
  const RunOutcome& out = run.outcome();
  const Totals t = Tally(o, run);
  PrintRun(o, run, t);
  const NodeJson nodes = PrintNodes(o, run, t);
  PrintReplicas(run);
  std::printf("  verify         %s\n", verify.text.c_str());
  const std::vector<std::string> first_errors = run.errors().first();
  for (const auto& e : first_errors) std::printf("  error          %s\n", e.c_str());
  if (o.json) PrintJson(o, run, t, nodes, verify);
  std::fflush(stdout);
  // Following the leader, `failed` replies are txns in doubt of a failover (reported), not a
  // failed run.
  const uint64_t errors = run.errors().count();
  if (out.stalled || out.broken || errors > 0 || (t.failed > 0 && !kFollowLeader) || t.rejected > 0) {
    return Fail(kExitFailed, std::to_string(t.failed) + " failed, " + std::to_string(t.rejected) + " rejected, " +
                                 std::to_string(errors) + " errors" +
                                 (first_errors.empty() ? "" : ": " + first_errors[0]));
  }
  if (!out.replicas_agree) return Fail(kExitFailed, "the replicas do not agree with the leader: " + out.agreement.message());
  if (out.interrupted && o.has_txns) {
    return Fail(kExitFailed, "interrupted before its " + std::to_string(o.total_txns) + " txns were sent");
  }
  if (verify.failed) return Fail(kExitFailed, "verify " + verify.text);
  return kExitOk;
}

}  // namespace qrstore::client
