#include "cluster/follow/replica_monitor.h"

#include <cinttypes>
#include <cstdio>

#include "common/clock.h"
#include "common/logging.h"

namespace qrstore::cluster {

namespace {
constexpr size_t kMaxAhead = 1 << 16;  // a follower's reports waiting for the leader's commit

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}
}  // namespace

DigestMonitor::DigestMonitor(std::vector<std::string> followers, size_t history) : ring_(history, {UINT64_MAX, 0}) {
  QR_CHECK(history >= 1);
  for (auto& name : followers) {
    Follower f;
    f.view.node = name;
    followers_.emplace(name, std::move(f));
  }
}

void DigestMonitor::RecordOwn(uint64_t batch, uint64_t digest) {
  MutexLock lk(mu_);
  ring_[batch % ring_.size()] = {batch, digest};
  own_next_ = batch + 1;
  own_last_digest_ = digest;
  for (auto& [name, f] : followers_) {
    auto it = f.ahead.find(batch);
    if (it == f.ahead.end()) continue;
    const uint64_t d = it->second;
    f.ahead.erase(it);
    Check(f, batch, d);
  }
}

void DigestMonitor::Check(Follower& f, uint64_t batch, uint64_t digest) {
  const auto& slot = ring_[batch % ring_.size()];
  if (slot.first != batch) {
    ++unchecked_;
    return;
  }
  ++f.view.checked_batches;
  const bool match = slot.second == digest;
  if (!match) {
    ++f.view.mismatches;
    ++mismatches_;
    Logger("replicas")->error("digest mismatch: follower {} batch {}: {} (leader {})", f.view.node, batch, Hex(digest),
                              Hex(slot.second));
  }
  if (batch == f.last_batch) f.last_matched = match;
}

Status DigestMonitor::OnReport(const proto::FollowerReport& report) {
  MutexLock lk(mu_);
  auto it = followers_.find(report.node);
  if (it == followers_.end()) {
    return Status::InvalidArgument("follower report from '" + report.node + "', not a follower of this partition");
  }
  Follower& f = it->second;
  if (report.applied_batches < f.view.applied_batches) {
    // A restarted follower (it replays from batch 0): its progress starts over.
    Logger("replicas")->info("follower {} restarted: applied {} (was {})", report.node, report.applied_batches,
                             f.view.applied_batches);
    f.ahead.clear();
  }
  f.view.applied_batches = report.applied_batches;
  f.ended = report.ended;
  for (const proto::BatchDigest& d : report.digests) {
    f.last_batch = d.batch;
    f.last_matched = false;
    if (d.batch < own_next_) {
      Check(f, d.batch, d.digest);
    } else if (f.ahead.size() < kMaxAhead) {
      f.ahead[d.batch] = d.digest;
    } else {
      ++unchecked_;
    }
  }
  return Status::Ok();
}

void DigestMonitor::SetConnected(const std::string& node, bool connected) {
  MutexLock lk(mu_);
  auto it = followers_.find(node);
  if (it != followers_.end()) it->second.view.connected = connected;
}

std::vector<proto::FollowerView> DigestMonitor::Views(uint64_t committed_batches) const {
  MutexLock lk(mu_);
  std::vector<proto::FollowerView> out;
  for (const auto& [name, f] : followers_) {
    proto::FollowerView v = f.view;
    v.lag_batches = committed_batches > v.applied_batches ? committed_batches - v.applied_batches : 0;
    // Agrees at the leader's last committed batch: it reported exactly that batch last and it
    // matched. (With no batch committed yet there is nothing to disagree on.)
    v.agrees_at_last = committed_batches == 0 ? true
                                              : (f.last_batch == committed_batches - 1 && f.last_matched &&
                                                 v.applied_batches >= committed_batches);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::string> DigestMonitor::ConnectedNotEnded() const {
  MutexLock lk(mu_);
  std::vector<std::string> out;
  for (const auto& [name, f] : followers_) {
    if (f.view.connected && !f.ended) out.push_back(name);
  }
  return out;
}

uint64_t DigestMonitor::mismatches() const {
  MutexLock lk(mu_);
  return mismatches_;
}
uint64_t DigestMonitor::unchecked() const {
  MutexLock lk(mu_);
  return unchecked_;
}

// ---------------------------------------------------------------------------------------------

DigestReporter::DigestReporter(Options options)
    : opt_(std::move(options)), net_(net::MakeNngStreamNet()), leader_address_(opt_.leader_address) {}

DigestReporter::~DigestReporter() { Stop(0); }

void DigestReporter::RecordApplied(uint64_t batch, uint64_t digest) {
  {
    MutexLock lk(mu_);
    pending_.push_back(proto::BatchDigest{batch, digest});
    applied_ = batch + 1;
    while (pending_.size() > opt_.max_pending) {
      pending_.pop_front();
      ++dropped_;
    }
  }
}

void DigestReporter::SetLeader(const std::string& address) {
  {
    MutexLock lk(mu_);
    if (address == leader_address_) return;
    leader_address_ = address;
    leader_changed_ = true;
    if (conn_ != nullptr) conn_->Shutdown();  // a write blocked on the old leader ends now
  }
  cv_.notify_all();
}

void DigestReporter::MarkEnded(bool ended) {
  {
    MutexLock lk(mu_);
    ended_ = ended;
  }
  cv_.notify_all();
}

Status DigestReporter::Start() {
  thread_ = NamedThread("report", [this] { Loop(); });
  return Status::Ok();
}

void DigestReporter::Stop(int64_t timeout_ms) {
  if (!thread_.joinable()) return;
  {
    MutexLock lk(mu_);
    stop_ = true;
    flush_deadline_ns_ = NowNanos() + timeout_ms * 1'000'000;
  }
  cv_.notify_all();
  {
    // A write blocked on a leader that stopped reading ends at the deadline at the latest.
    MutexUniqueLock lk(mu_);
    if (!cv_.wait_for(lk.native(), std::chrono::milliseconds(timeout_ms), [&]() REQUIRES(mu_) { return done_; }) &&
        conn_ != nullptr) {
      conn_->Shutdown();
    }
  }
  thread_.Join();
}

uint64_t DigestReporter::dropped() const {
  MutexLock lk(mu_);
  return dropped_;
}

bool DigestReporter::SendPending(net::StreamConn* conn, bool always) {
  proto::FollowerReport report;
  report.node = opt_.node;
  bool ended_sent = false;
  {
    MutexLock lk(mu_);
    report.applied_batches = applied_;
    report.ended = ended_;
    report.digests.assign(pending_.begin(), pending_.end());
    ended_sent = ended_sent_;
  }
  if (!always && report.digests.empty() && report.ended == ended_sent) return true;
  const std::string frame = proto::Frame(proto::MsgType::kFollowerReport, proto::EncodeFollowerReport(report));
  iovec iov{const_cast<char*>(frame.data()), frame.size()};
  if (!conn->WriteAll(&iov, 1)) return false;
  MutexLock lk(mu_);
  // Drop what was sent (new digests may have been appended meanwhile; old ones may have been
  // dropped by the bound, so match by batch).
  if (!report.digests.empty()) {
    while (!pending_.empty() && pending_.front().batch <= report.digests.back().batch) pending_.pop_front();
  }
  ended_sent_ = report.ended;
  return true;
}

void DigestReporter::Loop() {
  std::unique_ptr<net::StreamConn> conn;
  bool sent_on_conn = false;
  int64_t backoff_ms = 50;
  for (;;) {
    bool stopping = false;
    {
      MutexUniqueLock lk(mu_);
      cv_.wait_for(lk.native(), std::chrono::milliseconds(opt_.interval_ms), [&]() REQUIRES(mu_) { return stop_; });
      stopping = stop_;
      if (stopping && NowNanos() >= flush_deadline_ns_) break;
    }
    std::string address;
    {
      MutexLock lk(mu_);
      if (leader_changed_) {
        leader_changed_ = false;
        conn_ = nullptr;
        conn.reset();
        sent_on_conn = false;
      }
      address = leader_address_;
    }
    if (!conn && address.empty()) {
      if (stopping) break;
      continue;  // no leader known: wait for SetLeader (the wait above is bounded)
    }
    if (!conn) {
      conn = net_->Connect(address, 1000);
      if (!conn) {
        if (stopping) break;
        MutexUniqueLock lk(mu_);
        cv_.wait_for(lk.native(), std::chrono::milliseconds(backoff_ms), [&]() REQUIRES(mu_) { return stop_; });
        backoff_ms = std::min<int64_t>(backoff_ms * 2, 1000);
        continue;
      }
      backoff_ms = 50;
      MutexLock lk(mu_);
      conn_ = conn.get();
    }
    // A new connection (a new leader, perhaps) hears where this follower is at once.
    const bool fresh = !sent_on_conn;
    sent_on_conn = true;
    if (!SendPending(conn.get(), fresh)) {
      sent_on_conn = false;
      MutexLock lk(mu_);
      conn_ = nullptr;
      conn.reset();
      continue;
    }
    if (stopping) break;
  }
  MutexLock lk(mu_);
  conn_ = nullptr;
  done_ = true;
  conn.reset();
  cv_.notify_all();
}

}  // namespace qrstore::cluster
