// Run (client/run.h): connecting, the timeline with its failover following, the drain and the
// replica check of one qrstore-client run, each a member function on the main thread.
#include "client/run.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <utility>

#include "client/cluster_view.h"
#include "client/stats.h"
#include "client/verify.h"
#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/report.h"

namespace qrstore::client {
namespace {

namespace proto = cluster::proto;

// SIGINT / SIGTERM: the run ends as if its time were up (no more requests, the in-flight ones
// are answered, the summary is printed); a second one kills as usual (SA_RESETHAND).
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
extern "C" void OnInterrupt(int) { g_interrupted.store(true, std::memory_order_relaxed); }
void CatchInterrupts() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int64_t ProcessCpuNanos() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ns = [](const timeval& t) { return int64_t{t.tv_sec} * 1'000'000'000 + int64_t{t.tv_usec} * 1000; };
  return ns(u.ru_utime) + ns(u.ru_stime);
}

// Whether `pred` holds for every connection (asked in order, up to the first that fails it).
template <class Pred>
bool All(const std::vector<std::unique_ptr<LoadConnection>>& lc, Pred pred) {
  return std::all_of(lc.begin(), lc.end(), [&](auto& l) { return pred(*l); });
}

}  // namespace

Run::Run(const RunOptions& options) : o_(options), topo_(options.topology), log_(Logger("client")) {}

uint64_t Run::Sum(std::atomic<uint64_t> Counts::*field) const {
  uint64_t s = 0;
  for (auto& l : lc_) s += (l->counts().*field).load(std::memory_order_relaxed);
  return s;
}

uint64_t Run::Inflight() const {
  uint64_t s = 0;
  for (auto& l : lc_) s += l->inflight();
  return s;
}

bool Run::CanTakeOver(uint32_t partition) const { return topo_.Group(partition).size() > 1; }

std::optional<int> Run::Connect() {
  // Each partition: whoever leads it now (the backend elects; row 0 only leads a fresh cluster, and
  // in a row a follower may have taken a dead leader's place). A group just started (or
  // restarted) may not have elected yet: wait for it, as after a failover.
  if (!o_.has_node) {
    for (uint32_t p = 0; p < topo_.partitions(); ++p) {
      WaitForServingLeader(topo_, p, std::min(o_.connect_ms, 1000), o_.config.GetInt("client.failover_timeout_ms"));
      leads_.push_back(LiveLeader(topo_, p, o_.connect_ms).client_address());
    }
  }
  out_.target = leads_.empty() ? std::string() : leads_[0];
  if (o_.has_node) out_.target = topo_.Find(o_.node).value()->client_address();  // checked (run_options.cc)
  log_->info("effective config from {}:\n{}", o_.config_file, o_.config.Dump());

  // Connections. A duration run with --verify stops submitting at client.verify_max_txns
  // (o_.budget).
  for (uint32_t c = 0; c < o_.conns; ++c) {
    auto l = MakeConnection(c);
    if (!l.ok()) return Fail(kExitBadInput, l.status().message());
    lc_.push_back(std::move(l).value());
  }
  return ConnectAll();
}

Result<std::unique_ptr<LoadConnection>> Run::MakeConnection(uint32_t c) {
  workloads::WorkloadOptions conn_options = o_.workload;
  if (o_.row_size > 1) conn_options.home_partition = c % o_.row_size;
  auto gen = workloads::MakeGenerator(conn_options, ConnectionSeed(o_.seed, c));
  if (!gen.ok()) return gen.status();
  ConnectionConfig cc;
  cc.index = c;
  cc.quota = o_.budget > 0 ? o_.budget / o_.conns + (c < o_.budget % o_.conns ? 1 : 0) : UINT64_MAX;
  cc.outstanding = o_.outstanding;
  cc.per_request = o_.per_request;
  // Each connection paces its share: a request of n txns every n * C / T seconds.
  if (o_.target_tps > 0) cc.request_interval_ns = static_cast<int64_t>(o_.per_request * 1e9 * o_.conns / o_.target_tps);
  cc.keep_records = o_.verify;
  cc.connect_timeout_ms = o_.connect_ms;
  cc.follow_leader = kFollowLeader;
  cc.sessions = true;  // a session per connection, carried across failovers
  cc.max_frame_bytes = static_cast<uint32_t>(std::min<uint64_t>(
      std::max<uint64_t>(MaxReplyBytes(o_.workload, o_.per_request), 1u << 16), uint64_t{1} << 31));
  return std::make_unique<LoadConnection>(cc, std::move(gen).value(), &window_, &errors_, &signal_);
}

std::optional<int> Run::ConnectAll() {
  std::string& target = out_.target;
  // Connection 0 asks first whether the target takes transactions, and follows one redirect.
  for (int attempt = 0;; ++attempt) {
    if (Status st = lc_[0]->Connect(target); !st.ok()) return Fail(kExitFailed, st.message());
    auto probe = lc_[0]->Probe(o_.connect_ms);
    if (!probe.ok()) return Fail(kExitFailed, probe.status().message());
    if (probe.value().empty()) break;
    if (attempt == 1) {
      return Fail(kExitFailed, target + " does not take transactions either (it names " + probe.value() +
                                   "): no leader after one redirect");
    }
    log_->info("{} is not the leader: redirected to {}", target, probe.value());
    target = probe.value();
    lc_[0]->Finish();
    auto fresh = MakeConnection(0);
    lc_[0] = std::move(fresh).value();
  }
  for (uint32_t c = 1; c < o_.conns; ++c) {
    const std::string to = o_.row_size > 1 ? leads_[c % o_.row_size] : target;
    if (Status st = lc_[c]->Connect(to); !st.ok()) return Fail(kExitFailed, st.message());
  }
  for (auto& l : lc_) {
    if (Status st = l->OpenSession(o_.connect_ms); !st.ok()) return Fail(kExitFailed, st.message());
  }
  // The leader we drive: its node name, for its status and its followers.
  for (const cluster::NodeInfo& n : topo_.nodes()) {
    if (n.client_address() == target) out_.leader_name = n.name;
  }
  if (const cluster::NodeInfo* ln = out_.leader_name.empty() ? nullptr : topo_.Find(out_.leader_name).value()) {
    for (const cluster::NodeInfo* m : topo_.Group(ln->partition)) {
      if (m->name != ln->name) out_.follower_names.push_back(m->name);
    }
  }
  log_->info("{} {} against {} ({} connection(s), {} in flight each, {} txns per request, seed {}{})", o_.kind,
             o_.has_txns ? std::to_string(o_.total_txns) + " txns" : Num(o_.duration_s) + " s", target, o_.conns,
             o_.outstanding, o_.per_request, o_.seed, o_.pacing);
  return std::nullopt;
}

void Run::OpenWindow() {
  out_.status0 = AllStatus(topo_, o_.connect_ms);
  out_.cpu0 = ProcessCpuNanos();
  window_.start_ns.store(NowNanos(), std::memory_order_release);
}

void Run::CloseWindow() {
  window_.end_ns.store(NowNanos(), std::memory_order_release);
  out_.cpu1 = ProcessCpuNanos();
  out_.status1 = AllStatus(topo_, o_.connect_ms);
}

void Run::Drive() {
  // The main thread keeps the timeline.
  const int64_t warmup_ns = static_cast<int64_t>(o_.warmup_s * 1e9);
  const int64_t duration_ns = static_cast<int64_t>(o_.duration_s * 1e9);
  start_ = NowNanos();
  out_.start_unix_s =
      static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count()) / 1e6;
  if (o_.has_txns || warmup_ns == 0) OpenWindow();
  CatchInterrupts();
  for (auto& l : lc_) l->Start();
  next_report_ = o_.progress_interval_ns > 0 ? start_ + o_.progress_interval_ns : INT64_MAX;
  last_report_ = last_progress_ = last_commit_ns_ = start_;
  for (;;) {
    const int64_t now = NowNanos();
    if (window_.start_ns.load() == INT64_MAX && now >= start_ + warmup_ns) {
      OpenWindow();
      log_->info("warm-up done: measuring for {} s", Num(o_.duration_s));
    }
    if (now >= next_report_) Progress(now);
    NoteCommits(now);
    if (kFollowLeader && FollowTick(now)) {
      out_.gave_up = true;
      break;
    }
    out_.broken = !All(lc_, [](LoadConnection& l) { return !l.Broken(); });
    if (out_.broken) break;
    if (signal_.stopping()) {
      log_->warn("a txn failed or an error reply came: no more requests (the run has failed)");
      break;
    }
    if (g_interrupted.load(std::memory_order_relaxed)) {
      out_.interrupted = true;
      log_->warn("interrupted: no more requests; the ones in flight are answered, then the summary (again to kill)");
      break;
    }
    if (All(lc_, [](LoadConnection& l) { return l.Done(); })) {
      out_.capped = !o_.has_txns;
      break;
    }
    // The run's time is up: it ends, but not in the middle of a failover. A leader lost just
    // before the end leaves txns in doubt on connections that have no leader: the client finishes
    // the failover first (bounded by client.failover_timeout_ms, FollowTick), so that the drain
    // gets their outcomes from the new leader.
    const bool time_up =
        !o_.has_txns && window_.start_ns.load() != INT64_MAX && now >= window_.start_ns.load() + duration_ns;
    if (time_up && (lost_since_ < 0 || !CanTakeOver(lost_partition_))) break;
    if (time_up && !finishing_failover_) {
      finishing_failover_ = true;
      log_->warn("the run's {} s are up during a failover: finishing it before the drain (client.failover_timeout_ms)",
                 Num(o_.duration_s));
    }
    if (CheckSilentLeader(now)) continue;
    if (lost_since_ < 0 && (out_.stalled = CheckStall(now))) break;
    int64_t wake = std::min<int64_t>(next_report_, now + 100'000'000);  // stall checks 10 times a second
    if (lost_since_ >= 0) wake = std::min(wake, next_look_);
    if (!o_.has_txns && !time_up) {
      const int64_t ws = window_.start_ns.load();
      wake = std::min(wake, ws == INT64_MAX ? start_ + warmup_ns : ws + duration_ns);
    }
    events_ = signal_.WaitFor(events_, wake - NowNanos());
  }
  if (lost_since_ >= 0 && !out_.gave_up) {
    // The run's end came while no node had taken over: that is not a run that went on.
    errors_.Note("the run ended " + Num(static_cast<double>(NowNanos() - lost_since_) / 1e6) + " ms after losing its " +
                 "leader of partition " + std::to_string(lost_partition_) + ", before any of its nodes took over");
  }
  if (!o_.has_txns && window_.start_ns.load() != INT64_MAX) CloseWindow();  // before the drain
  if (out_.capped) log_->warn("stopped submitting at client.verify_max_txns = {} txns (kept for --verify)", o_.verify_cap);
}

void Run::Progress(int64_t now) {
  const int64_t interval = o_.progress_interval_ns;
  const uint64_t committed = Sum(&Counts::committed);
  const double dt = static_cast<double>(now - last_report_) / 1e9;
  log_->info("t={:.0f}s committed={} ({:.0f} txn/s) aborted={} failed={} outstanding={}",
             static_cast<double>(now - start_) / 1e9, committed,
             static_cast<double>(committed - last_committed_) / dt, Sum(&Counts::aborted), Sum(&Counts::failed),
             Inflight());
  // Intervals the loop missed (a status question of a failover held it) count 0 and the
  // commits go to the last one: the timeline keeps its time axis.
  std::vector<uint64_t>& timeline = out_.timeline;
  const int64_t missed = interval > 0 ? (now - next_report_) / interval : 0;
  for (int64_t m = 0; m < missed && timeline.size() < kMaxTimeline; ++m) timeline.push_back(0);
  if (timeline.size() < kMaxTimeline) {
    timeline.push_back(committed - last_committed_);
  } else {
    timeline.back() += committed - last_committed_;
  }
  last_committed_ = committed;
  last_report_ = now;
  while (next_report_ <= now) next_report_ += interval;
}

void Run::NoteCommits(int64_t now) {
  if (const uint64_t c = Sum(&Counts::committed); c != commits_seen_) {
    if (commits_seen_ > 0) out_.longest_gap_ns = std::max(out_.longest_gap_ns, now - last_commit_ns_);
    if (lost_since_ < 0) episode_since_ = -1;  // committing again: the failover is over
    commits_seen_ = c;
    last_commit_ns_ = now;
  }
}

bool Run::CheckSilentLeader(int64_t now) {
  if (o_.row_size == 1 && lost_since_ < 0 && Inflight() > 0 && now - last_progress_ > o_.silent_leader_ns &&
      now >= next_look_) {
    // No reply for a while with txns in flight: if another node says it leads, this one was
    // deposed while paused or cut off (it may never answer again): move to the new leader.
    next_look_ = now + o_.silent_leader_ns / 2;
    // Only a leader the members name counts: with none named (an election under way) the
    // config's row 0 is no evidence that this one was deposed.
    const cluster::NodeInfo* live = NamedLeader(topo_, 0, std::min(o_.connect_ms, kLookMs));
    if (live != nullptr && live->name != out_.leader_name) {
      const std::string why = out_.leader_name + " did not answer for " +
                              Num(static_cast<double>(now - last_progress_) / 1e6) + " ms and " + live->name +
                              " leads, as its group says";
      for (auto& l : lc_) l->Abandon(why);
      return true;
    }
  }
  return false;
}

bool Run::CheckStall(int64_t now) {
  const uint64_t results = Sum(&Counts::results);
  if (results != last_results_) {
    last_results_ = results;
    last_progress_ = now;
    return false;
  }
  const uint64_t in_flight = Inflight();
  if (in_flight == 0 || now - last_progress_ < o_.stall_ns) return false;
  const std::string why = "no reply for " + Num(static_cast<double>(now - last_progress_) / 1e9) + " s with " +
                          std::to_string(in_flight) + " txns in flight (client.stall_timeout_ms)";
  errors_.Note(out_.target + ": " + why);
  for (auto& l : lc_) l->Shutdown(Status::Timeout(out_.target + ": " + why));
  return true;
}

bool Run::FollowTick(int64_t now) {
  std::string why;
  bool lost = false;
  for (uint32_t c = 0; c < lc_.size(); ++c) {
    std::string w;
    // While one partition fails over, only its connections count (the others' wait).
    if ((lost_since_ < 0 || c % o_.row_size == lost_partition_) && lc_[c]->LostLeader(&w)) {
      if (!lost && lost_since_ < 0) lost_partition_ = c % o_.row_size;
      lost = true;
      if (why.empty()) why = w;
    }
  }
  if (!lost) return false;
  if (episode_since_ < 0) episode_since_ = now;
  if (lost_since_ < 0) {
    lost_since_ = now;
    next_look_ = now;
    log_->warn("lost the leader {} ({}): txns in flight there are in doubt; looking for the new leader",
               o_.row_size == 1 ? out_.leader_name : "of partition " + std::to_string(lost_partition_), why);
  }
  if (now >= next_look_) LookForLeader(now);
  if (episode_since_ >= 0 && NowNanos() - episode_since_ > o_.failover_timeout_ns) {
    errors_.Note("no node of partition " + std::to_string(lost_partition_) +
                 " took over as leader within client.failover_timeout_ms (" +
                 std::to_string(o_.failover_timeout_ns / 1'000'000) + " ms; asked every node of cluster.nodes)");
    return true;
  }
  return false;
}

void Run::LookForLeader(int64_t now) {
  // The node of the group that says it leads and serves, and not the one just lost.
  const auto group = topo_.Group(lost_partition_);
  std::vector<std::string> addresses;
  for (const cluster::NodeInfo* n : group) addresses.push_back(n->client_address());
  const cluster::NodeInfo* found = ServingLeader(group, QueryStatuses(addresses, std::min(o_.connect_ms, kLookMs)));
  if (found == nullptr) {
    // Every 50 ms for the first 3 s (an election takes a few hundred ms: a longer back-off
    // would add to the pause), then doubling up to 1 s (a whole cluster restarting).
    next_look_ = now + look_backoff_;
    if (now - lost_since_ > 3'000'000'000) look_backoff_ = std::min<int64_t>(look_backoff_ * 2, 1'000'000'000);
    return;
  }
  for (uint32_t c = 0; c < lc_.size(); ++c) {
    auto& l = lc_[c];
    if (c % o_.row_size != lost_partition_ || !l->LostLeader()) continue;
    if (Status st = l->Reconnect(found->client_address()); !st.ok()) {
      log_->warn("{} leads, but connecting to it failed: {}; trying again", found->name, st.message());
      next_look_ = now + look_backoff_;
      return;
    }
  }
  ++out_.failovers;
  const std::string after = Num(static_cast<double>(NowNanos() - lost_since_) / 1e6);
  if (o_.row_size == 1) {
    log_->warn("failover: {} leads now; every connection moved to it {} ms after the first lost its leader",
               found->name, after);
  } else {
    log_->warn("failover: {} leads partition {} now; its connections moved to it {} ms after the first lost its leader",
               found->name, lost_partition_, after);
  }
  if (o_.row_size == 1) {
    out_.target = found->client_address();
    out_.leader_name = found->name;
    out_.follower_names.clear();
    for (const cluster::NodeInfo* m : group) {
      if (m->name != found->name) out_.follower_names.push_back(m->name);
    }
  }
  lost_since_ = -1;
  look_backoff_ = 50'000'000;
}

void Run::Drain() {
  // No new requests; the in-flight ones are answered (or the connection stalls). A leader
  // lost during the drain is followed as in the run (unless the run was interrupted or gave up):
  // the new leader answers what the old one left unanswered (sessions), and the connections
  // moved to it stop sending again.
  bool replicated = true;
  for (uint32_t p = 0; p < o_.row_size; ++p) replicated = replicated && CanTakeOver(p);
  const bool follow_in_drain =
      kFollowLeader && replicated && !out_.interrupted && !out_.gave_up && !out_.broken && !out_.stalled;
  auto drained = [&](LoadConnection& l) { return l.Idle() && !(follow_in_drain && l.LostLeader()); };
  for (auto& l : lc_) l->StopSending();
  auto failing_over = [&] { return follow_in_drain && lost_since_ >= 0; };
  bool drain_failover = false;  // logged once
  while (!out_.broken && !out_.stalled && !out_.gave_up && (failing_over() || !All(lc_, drained))) {
    const int64_t now = NowNanos();
    if (follow_in_drain) {
      if (!drain_failover && std::any_of(lc_.begin(), lc_.end(), [](auto& l) { return l->LostLeader(); })) {
        drain_failover = true;
        log_->warn("the leader was lost during the drain: following it to the new one (client.failover_timeout_ms)");
      }
      if (FollowTick(now)) {
        out_.gave_up = true;
        break;
      }
      for (auto& l : lc_) l->StopSending();  // a connection moved to a new leader sends only what it resends
    }
    if (!failing_over() && (out_.stalled = CheckStall(now))) break;
    out_.broken = !All(lc_, [](LoadConnection& l) { return !l.Broken(); });
    events_ = signal_.WaitFor(events_, failing_over() ? std::max<int64_t>(next_look_ - now, 1'000'000) : 100'000'000);
  }
  for (auto& l : lc_) l->Finish();
  for (auto& l : lc_) out_.broken |= l->Broken();
  if (window_.start_ns.load() == INT64_MAX) OpenWindow();  // ended during the warm-up: an empty window
  if (window_.end_ns.load() == INT64_MAX) CloseWindow();
}

void Run::CheckReplicas() {
  // Poll the leader until every follower has its last committed batch with its digest (in a
  // partitioned row, every partition's leader for its own followers; the summary shows
  // partition 0's leader with every follower of the row).
  FindReplicas();
  Settle();
  out_.replicas_agree = out_.agreement.ok();
  for (const auto& f : out_.leader_status.followers) out_.max_lag = std::max(out_.max_lag, f.lag_batches);
  for (auto& l : lc_) out_.acked_batches = std::max(out_.acked_batches, l->counts().acked_batches.load());
}

void Run::FindReplicas() {
  // A follower that is down (its leader has no report connection from it, and it answers no
  // status or does not answer as a follower: a deposed old leader, or one that resumed and has
  // not noticed yet) is not waited for: it is reported apart (a dead member is the group's
  // business now, and a restart brings it back).
  // One group whose leader no longer answers: lost after the load ended (killed as the run
  // finished, before any connection saw it), so its group elects another; wait for it as a
  // failover would (client.failover_timeout_ms) and compare the replicas with that one.
  const bool leader_lost = o_.row_size == 1 && !QueryStatus(out_.target, o_.connect_ms).ok();
  if (leader_lost) {
    log_->warn("{} does not answer after the run: comparing the replicas with whoever leads now", out_.leader_name);
    WaitForServingLeader(topo_, 0, o_.connect_ms, o_.failover_timeout_ns / 1'000'000);
  }
  if (o_.row_size > 1 || leader_lost) {
    // A row: partition 0's leader now (a failover may have moved it), as for the others below.
    const cluster::NodeInfo& l = LiveLeader(topo_, 0, o_.connect_ms);
    out_.target = l.client_address();
    out_.leader_name = l.name;
    out_.follower_names.clear();
    for (const cluster::NodeInfo* m : topo_.Group(0)) {
      if (m->name != l.name) out_.follower_names.push_back(m->name);
    }
  }
  leaders_ = {out_.target};
  std::map<std::string, proto::NodeStatus> answered = AllStatus(topo_, o_.connect_ms);
  // The followers of `leader` (a node name) among `members` that are up.
  auto live_followers = [&](const std::string& leader, const std::vector<std::string>& members) {
    std::vector<std::string> live;
    auto ls = answered.find(leader);
    for (const std::string& f : members) {
      bool connected = false;
      if (ls != answered.end()) {
        for (const proto::FollowerView& v : ls->second.followers) connected |= v.node == f && v.connected;
      }
      auto a = answered.find(f);
      const bool follows = a != answered.end() && a->second.role == "follower";
      if (!connected && !follows) {
        out_.down_followers.push_back(f);
      } else {
        live.push_back(f);
      }
    }
    return live;
  };
  out_.follower_names = live_followers(out_.leader_name, out_.follower_names);
  follower_sets_.push_back(out_.follower_names);
  // The other partitions of a row: whoever leads each now (a failover may have moved it).
  for (uint32_t p = 1; p < o_.row_size; ++p) {
    const cluster::NodeInfo& l = LiveLeader(topo_, p, o_.connect_ms);
    leaders_.push_back(l.client_address());
    std::vector<std::string> members;
    for (const cluster::NodeInfo* m : topo_.Group(p)) {
      if (m->name != l.name) members.push_back(m->name);
    }
    follower_sets_.push_back(live_followers(l.name, members));
  }
}

void Run::Settle() {
  Status& agreement = out_.agreement;
  agreement = Status::Unavailable("no status from " + out_.target);
  const int64_t settle_deadline = NowNanos() + o_.settle_timeout_ns;
  for (;;) {
    agreement = Status::Ok();
    bool caught_up = true;
    for (size_t i = 0; i < leaders_.size(); ++i) {
      auto s = QueryStatus(leaders_[i], o_.connect_ms);
      if (!s.ok()) {
        if (agreement.ok()) agreement = s.status();
        caught_up = false;
        continue;
      }
      const Status a = ReplicaAgreement(s.value(), follower_sets_[i]);
      if (agreement.ok() && !a.ok()) agreement = a;
      caught_up = caught_up && FollowersCaughtUp(s.value(), follower_sets_[i]);
      if (i == 0) {
        out_.leader_answered = true;
        out_.leader_status = std::move(s).value();
      } else if (out_.leader_answered) {
        out_.leader_status.digest_mismatches += s.value().digest_mismatches;
        for (auto& f : s.value().followers) out_.leader_status.followers.push_back(f);
      }
    }
    // A mismatch is final, but the other followers still get to catch up, so that the summary
    // says which ones agree.
    if (agreement.ok() || NowNanos() >= settle_deadline) break;
    if (agreement.code() == StatusCode::kCorruption && caught_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace qrstore::client
