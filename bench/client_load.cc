#include "bench/client_load.h"

#include <algorithm>
#include <chrono>

#include "bench/report.h"
#include "bench/verify.h"
#include "workloads/reference_executor.h"
#include "common/clock.h"

namespace qrstore::bench {

namespace proto = cluster::proto;
using proto::ResultCode;

Status Driver::Connect(const std::string& address, int timeout_ms) {
  auto c = cluster::ClientConnection::Connect(address, timeout_ms, std::to_string(index_),
                                              [this](uint8_t type, std::string_view body) { OnFrame(type, body); });
  if (!c.ok()) return c.status();
  conn_ = std::move(c).value();
  return Status::Ok();
}

Result<std::string> Driver::Probe(int timeout_ms) {
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

bool Driver::Drain(int64_t deadline_ns) {
  thread_.Join();
  std::unique_lock<std::mutex> lk(mu_);
  while (!pending_.empty() && conn_->open()) {
    const int64_t left = deadline_ns - NowNanos();
    if (left <= 0) return false;
    cv_.wait_for(lk, std::chrono::nanoseconds(std::min<int64_t>(left, 100'000'000)));
  }
  return pending_.empty();
}

void Driver::Loop() {
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

void Driver::OnFrame(uint8_t type, std::string_view body) {
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

void Driver::Account(const Req& req, int64_t now) {
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

void Driver::Broken(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(totals_->mu);
    ++totals_->errors;
    totals_->Note("connection " + std::to_string(index_) + ": " + why);
  }
  conn_->Shutdown(Status::Corruption(why));  // the reader thread: no join here
  cv_.notify_all();
}

Result<std::string> VerifyPlannedOrder(const workloads::WorkloadOptions& options, uint64_t seed, uint32_t conns,
                                       std::vector<VerifyRecord> records, uint64_t sent, bool overflow,
                                       std::optional<uint64_t> leader_digest) {
  if (overflow) return Status::ResourceExhausted("more than client.verify_max_txns results (raise it or run fewer txns)");
  if (records.size() != sent) {
    return Status::Internal(std::to_string(sent) + " txns sent but " + std::to_string(records.size()) + " results kept");
  }
  std::sort(records.begin(), records.end(), [](const VerifyRecord& a, const VerifyRecord& b) {
    if (a.batch != b.batch) return a.batch < b.batch;
    if (a.planner != b.planner) return a.planner < b.planner;
    return a.index < b.index;
  });
  std::vector<std::unique_ptr<workloads::Generator>> gens;
  std::vector<uint64_t> next(conns, 0);
  for (uint32_t c = 0; c < conns; ++c) {
    auto g = workloads::MakeGenerator(options, ConnSeed(seed, c));
    if (!g.ok()) return g.status();
    gens.push_back(std::move(g).value());
  }
  workloads::ReferenceExecutor ref(options.Layout(), options.RecordCount());
  QR_RETURN_IF_ERROR(workloads::LoadTable(options, ref.mutable_table()));
  std::string reads;
  uint64_t reads_checked = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const VerifyRecord& r = records[i];
    const std::string where = "connection " + std::to_string(r.conn) + " txn #" + std::to_string(r.seq) + " (batch " +
                              std::to_string(r.batch) + ", planner " + std::to_string(r.planner) + ", index " +
                              std::to_string(r.index) + ")";
    if (r.code != static_cast<uint8_t>(ResultCode::kCommitted) && r.code != static_cast<uint8_t>(ResultCode::kAbortedLogic)) {
      return Status::Internal(where + " was " + proto::ResultCodeName(static_cast<ResultCode>(r.code)));
    }
    if (i > 0 && records[i - 1].batch == r.batch && records[i - 1].planner == r.planner && records[i - 1].index == r.index) {
      return Status::Internal(where + " shares its planned position with another txn");
    }
    if (r.seq != next[r.conn]) {
      return Status::Internal(where + " planned out of its connection's order (expected txn #" +
                              std::to_string(next[r.conn]) + ")");
    }
    ++next[r.conn];
    const storage::Txn txn = gens[r.conn]->Next();
    reads.clear();
    const bool committed = r.code == static_cast<uint8_t>(ResultCode::kCommitted);
    auto applied = ref.Apply(txn, /*keep=*/committed, &reads);
    if (!applied.ok()) return Status::Internal(where + ": " + applied.status().message());
    if (applied.value() != committed) {
      return Status::Internal(where + (committed ? " committed but aborts" : " aborted but commits") +
                              " when the txns run serially in planned order");
    }
    if (committed && ReadsHash(reads) != r.reads_hash) {
      return Status::Internal(where + ": the values it read differ from the serial run's");
    }
    reads_checked += committed ? reads.size() / options.Layout().size() : 0;
  }
  const uint64_t digest = ref.table().Digest();
  if (leader_digest && *leader_digest != digest) {
    return Status::Internal("the leader's state digest " + Hex(*leader_digest) + " differs from the reference's " +
                            Hex(digest) + " (another client ran, or the cluster was not fresh?)");
  }
  return "ok: " + std::to_string(records.size()) + " txns in planned order, fates and " + std::to_string(reads_checked) +
         " read values equal the serial reference's, state digest " + Hex(digest);
}

}  // namespace qrstore::bench
