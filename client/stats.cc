#include "client/stats.h"

#include <algorithm>

namespace qrstore::client {

namespace proto = cluster::proto;

std::optional<NodeWindow> WindowOf(const proto::NodeStatus& a, const proto::NodeStatus& b) {
  if (b.cpu_ns < a.cpu_ns || b.committed_batches < a.committed_batches) return std::nullopt;
  NodeWindow w;
  w.cpu_s = static_cast<double>(b.cpu_ns - a.cpu_ns) / 1e9;
  w.batches = b.committed_batches - a.committed_batches;
  auto diff = [](uint64_t x, uint64_t y) { return static_cast<double>(y >= x ? y - x : 0); };
  w.replicated_bytes = b.replicated_bytes >= a.replicated_bytes ? b.replicated_bytes - a.replicated_bytes : 0;
  if (b.times.replies > a.times.replies) {
    w.replies = b.times.replies - a.times.replies;
    const double r = static_cast<double>(w.replies) * 1e6;
    w.reply_ms = diff(a.times.reply_ns, b.times.reply_ns) / r;
    w.request_ms = diff(a.times.request_ns, b.times.request_ns) / r;
  }
  if (w.batches > 0) {
    const double n = static_cast<double>(w.batches);
    w.log_syncs_per_batch = diff(a.times.log_syncs, b.times.log_syncs) / n;
    w.log_sync_ms = diff(a.times.log_sync_ns, b.times.log_sync_ns) / n / 1e6;
  }
  if (w.batches == 0) {
    w.phases = b.phases;
    return w;
  }
  const double na = static_cast<double>(a.committed_batches), nb = static_cast<double>(b.committed_batches);
  const double n = static_cast<double>(w.batches);
  // Rounding of the cumulative means can make a tiny phase slightly negative: clamp at 0.
  auto win = [&](double ma, double mb) { return std::max(0.0, (mb * nb - ma * na) / n); };
  w.phases.cut_ms = win(a.phases.cut_ms, b.phases.cut_ms);
  w.phases.plan_ms = win(a.phases.plan_ms, b.phases.plan_ms);
  w.phases.deliver_ms = win(a.phases.deliver_ms, b.phases.deliver_ms);
  w.phases.exec_ms = win(a.phases.exec_ms, b.phases.exec_ms);
  w.phases.repl_ms = win(a.phases.repl_ms, b.phases.repl_ms);
  w.phases.repl_wait_ms = win(a.phases.repl_wait_ms, b.phases.repl_wait_ms);
  w.phases.commit_ms = win(a.phases.commit_ms, b.phases.commit_ms);
  w.phases_windowed = true;
  return w;
}

Status ReplicaAgreement(const proto::NodeStatus& leader, const std::vector<std::string>& followers) {
  const uint64_t last = leader.committed_batches;
  for (const proto::FollowerView& f : leader.followers) {
    if (f.mismatches > 0) {
      return Status::Corruption(f.node + ": " + std::to_string(f.mismatches) + " of its " +
                                std::to_string(f.checked_batches) + " reported digests differ from " + leader.node + "'s");
    }
  }
  if (leader.digest_mismatches > 0) {
    return Status::Corruption(leader.node + " counted " + std::to_string(leader.digest_mismatches) +
                              " follower digests that differ from its own");
  }
  for (const std::string& name : followers) {
    auto it = std::find_if(leader.followers.begin(), leader.followers.end(),
                           [&](const proto::FollowerView& f) { return f.node == name; });
    if (it == leader.followers.end()) {
      return Status::Unavailable(name + ": " + leader.node + " lists no such follower");
    }
    if (it->stranded) continue;  // it will not catch up: reported apart, not waited for
    if (it->applied_batches < last) {
      return Status::Unavailable(name + ": applied " + std::to_string(it->applied_batches) + " of " + leader.node +
                                 "'s " + std::to_string(last) + " committed batches" +
                                 (it->connected ? "" : " (not connected)"));
    }
    if (!it->agrees_at_last) {
      return Status::Unavailable(name + ": has not confirmed " + leader.node + "'s digest at its last batch (" +
                                 std::to_string(last) + " batches)");
    }
  }
  return Status::Ok();
}

bool FollowersCaughtUp(const proto::NodeStatus& leader, const std::vector<std::string>& followers) {
  return std::all_of(followers.begin(), followers.end(), [&](const std::string& name) {
    return std::any_of(leader.followers.begin(), leader.followers.end(), [&](const proto::FollowerView& f) {
      return f.node == name && (f.stranded || f.applied_batches >= leader.committed_batches);
    });
  });
}

std::vector<const proto::FollowerView*> StrandedFollowers(const proto::NodeStatus& leader) {
  std::vector<const proto::FollowerView*> out;
  for (const proto::FollowerView& f : leader.followers) {
    if (f.stranded) out.push_back(&f);
  }
  return out;
}

}  // namespace qrstore::client
