#include "cluster/recovery/checkpointer.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/check.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/logging.h"
#include "common/report.h"

namespace qrstore::cluster {

uint64_t CheckpointPhase(uint64_t every_batches, uint32_t row, uint32_t rows, bool stagger) {
  if (!stagger || rows <= 1 || every_batches <= 1) return 0;
  // every_batches * row could overflow for absurd intervals: split it.
  const uint64_t r = row % rows;
  return (every_batches / rows) * r + (every_batches % rows) * r / rows;
}

std::string NodeCheckpointDir(const Config& config, const std::string& node) {
  const std::string& dir = config.GetString("server.checkpoint_dir");
  return dir.empty() ? std::string() : dir + "/" + node;
}

storage::CheckpointExpect NodeCheckpointIdentity(const Topology& topo, uint32_t partition,
                                                 const workloads::WorkloadOptions& workload) {
  storage::CheckpointExpect e;
  e.cluster_id = topo.ClusterId();
  e.partition = partition;
  e.partitions = topo.partitions();
  e.record_size = workload.Layout().size();
  e.capacity = workload.RecordCount();  // the server's table capacity
  return e;
}

Status ValidateNodeCheckpoint(const std::string& path, const storage::CheckpointExpect& expect,
                              storage::RecordLayout layout, const planner::SessionLimits& limits,
                              std::unique_ptr<storage::Table>* table, planner::SessionTable* sessions,
                              storage::CheckpointMeta* meta, bool* meta_known) {
  *meta_known = false;
  auto t = std::make_unique<storage::Table>(layout, expect.capacity);
  std::string extra;
  if (Status st = storage::ReadCheckpoint(path, expect, t.get(), meta, &extra); !st.ok()) return st;
  *meta_known = true;
  const std::string name = std::filesystem::path(path).filename().string();
  if (name != storage::CheckpointFileName(meta->batch)) {
    return Status::Corruption(path + ": the header says batch " + std::to_string(meta->batch) + ", the file name is " +
                              name);
  }
  auto decoded = planner::SessionTable::Decode(extra, limits);
  if (!decoded.ok()) return Status::Corruption(path + ": " + decoded.status().message());
  const uint64_t digest = t->Digest() ^ Mix64(decoded->Digest());
  if (digest != meta->digest) {
    return Status::Corruption(path + ": digest mismatch: header says " + Hex(meta->digest) + ", records and sessions give " +
                              Hex(digest));
  }
  *table = std::move(t);
  *sessions = std::move(decoded).value();
  return Status::Ok();
}

Checkpointer::Checkpointer(CheckpointerOptions options, storage::Table& table,
                           std::function<std::string()> encode_sessions)
    : opt_(std::move(options)), encode_sessions_(std::move(encode_sessions)), table_(table) {
  QR_CHECK(opt_.every_batches >= 1 && opt_.phase < opt_.every_batches && opt_.keep >= 1 && opt_.identity);
  // Sized once, here: a copy at a boundary allocates nothing.
  image_.Prepare(table);
}

Status Checkpointer::Start() {
  std::error_code ec;
  std::filesystem::create_directories(opt_.dir, ec);
  if (ec) return Status::IoError("server.checkpoint_dir: cannot create '" + opt_.dir + "': " + ec.message());
  if (::access(opt_.dir.c_str(), W_OK | X_OK) != 0) {
    return Status::IoError("server.checkpoint_dir: cannot write in '" + opt_.dir + "': " + std::strerror(errno));
  }
  image_.Prefault();  // here, before serving: the executors' first copy then faults nothing in
  thread_ = NamedThread("checkpoint", [this] { Loop(); });
  return Status::Ok();
}

void Checkpointer::Stop() {
  hurry_.store(true, std::memory_order_relaxed);
  {
    MutexLock lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.Join();
}

Checkpointer::~Checkpointer() {
  Stop();
  // An image armed after the writer left (Want just before Stop, Taken after it) is completed
  // here, so the table never points at a destroyed image (the executors have stopped by now).
  image_.CompleteCopy(table_);
}

storage::TableImage* Checkpointer::Want(uint64_t b) {
  if (!Candidate(b)) return nullptr;
  MutexLock lk(mu_);
  if (state_ != State::kIdle || stop_) {
    ++stats_.skipped;
    return nullptr;
  }
  state_ = State::kTaking;
  batch_ = b;
  have_image_ = false;
  image_complete_ = false;
  copy_start_ns_ = NowNanos();
  return &image_;
}

void Checkpointer::Taken(uint64_t b) {
  {
    MutexLock lk(mu_);
    QR_CHECK(state_ == State::kTaking && batch_ == b);
    have_image_ = true;
    stats_.last_pause_ms = static_cast<double>(NowNanos() - copy_start_ns_) / 1e6;
    if (!opt_.copy_on_write) {  // the executors copied it all
      image_complete_ = true;
      stats_.last_copy_ms = stats_.last_pause_ms;
      stats_.last_preserved = 0;
    }
  }
  cv_.notify_all();
}

void Checkpointer::OnCommitted(uint64_t b, uint64_t digest) {
  {
    // The commit of b may come before or after the executors' Want(b): capture while a
    // checkpoint of b may still be taken (idle: Want(b) has not come yet, and it will find the
    // writer idle, since only Want leaves kIdle).
    MutexLock lk(mu_);
    committed_any_ = true;
    last_batch_ = b;
    last_digest_ = digest;
    if (!Candidate(b)) return;
    if (!(state_ == State::kIdle || (state_ == State::kTaking && batch_ == b))) return;
  }
  std::string sessions = encode_sessions_();  // this thread's: the sink applies sessions here too
  {
    MutexLock lk(mu_);
    have_state_ = true;
    state_batch_ = b;
    state_digest_ = digest;
    state_sessions_ = std::move(sessions);
  }
  cv_.notify_all();
}

CheckpointStats Checkpointer::Stats() const {
  MutexLock lk(mu_);
  return stats_;
}

namespace {
constexpr int kWriterNice = 10;  // the writer thread's nice value (see Loop)

// CPU time of the calling thread (the writer's cost, beside its wall time).
int64_t ThreadCpuNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

void Checkpointer::Loop() {
  // Background work: below the executors, planners and the raft thread when cores are short
  // (checkpoints written by several nodes of one host at once would otherwise take their cores
  // and dip the group's throughput). Linux applies a thread's nice value to that thread alone.
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice) != 0) {
    Logger("server")->warn("{} checkpoint writer: cannot lower its priority: {}", opt_.identity(), std::strerror(errno));
  }
  MutexUniqueLock lk(mu_);
  for (;;) {
    cv_.wait(lk.native(), [&]() REQUIRES(mu_) {
      return stop_ ||
             (state_ == State::kTaking && have_image_ && (!image_complete_ || (have_state_ && state_batch_ == batch_)));
    });
    if (state_ == State::kTaking && have_image_ && !image_complete_) {
      // Copy-on-write: the rest of the copy, beside the executors; even when stopping, so that
      // the table is not left armed.
      lk.Unlock();
      const int64_t cpu0 = ThreadCpuNanos();
      image_.CompleteCopy(table_);
      const int64_t cpu = ThreadCpuNanos() - cpu0;
      lk.Lock();
      copy_cpu_ns_ = cpu;
      image_complete_ = true;
      stats_.last_copy_ms = static_cast<double>(NowNanos() - copy_start_ns_) / 1e6;
      stats_.last_preserved = image_.preserved();
      continue;
    }
    if (stop_) return;
    state_ = State::kWriting;
    const uint64_t b = batch_, digest = state_digest_;
    std::string sessions = std::move(state_sessions_);
    have_state_ = false;
    lk.Unlock();
    Write(b, digest, sessions, [this](const storage::RecordEmit& emit) { image_.ForEach(emit); }, false);
    lk.Lock();  // Write left kWriting for kIdle under the lock that counted the checkpoint
  }
}

void Checkpointer::WriteFinal(const storage::Table& table, uint64_t sessions_digest) {
  Stop();  // no background write runs beside this one
  uint64_t b = 0, digest = 0;
  {
    MutexLock lk(mu_);
    if (!committed_any_) return;  // nothing committed since start: the last checkpoint stands
    b = last_batch_;
    digest = last_digest_;
  }
  if (const uint64_t now = table.Digest() ^ Mix64(sessions_digest); now != digest) {
    Logger("server")->warn("{} no checkpoint at stop: the table is not the state after batch {} (digest {} there, {} "
                           "now: executed batches that never committed)",
                           opt_.identity(), b, Hex(digest), Hex(now));
    return;
  }
  Write(b, digest, encode_sessions_(), [&table](const storage::RecordEmit& emit) { table.ForEach(emit); }, true);
}


void Checkpointer::Write(uint64_t b, uint64_t digest, const std::string& sessions,
                         const storage::RecordSource& records, bool at_stop) {
  storage::CheckpointMeta meta = opt_.base;
  meta.batch = b;
  meta.digest = digest;
  meta.stream_next.assign(opt_.base.stream_next.size(), b + 1);  // every stream has a slice in every batch
  meta.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();  // shown as an age only
  const int64_t t0 = NowNanos(), cpu0 = ThreadCpuNanos();
  // The background ones paced; the one at stop as fast as it goes.
  const storage::WritePace pace{at_stop ? 0 : opt_.write_bytes_per_s, &hurry_};
  auto path = storage::WriteCheckpoint(opt_.dir, meta, records, sessions, opt_.keep, storage::kCheckpointBlockBytes,
                                       opt_.direct_io, pace);
  const double secs = static_cast<double>(NowNanos() - t0) / 1e9;
  const double write_cpu_ms = static_cast<double>(ThreadCpuNanos() - cpu0) / 1e6;
  auto log = Logger("server");
  MutexLock lk(mu_);
  // Idle again in the same critical section that counts the result: whoever sees `written` grow
  // (or last_error set) finds the writer ready for the next candidate.
  if (!at_stop) state_ = State::kIdle;
  if (!path.ok()) {
    // Not fatal: the node serves on; the next candidate tries again. Said once per failure.
    stats_.last_error = path.status().message();
    log->warn("{} checkpoint of batch {} failed: {}", opt_.identity(), b, stats_.last_error);
    return;
  }
  struct stat st {};
  const uint64_t bytes = ::stat(path.value().c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  ++stats_.written;
  stats_.any = true;
  stats_.last_batch = b;
  stats_.last_unix_ms = meta.created_unix_ms;
  stats_.last_bytes = bytes;
  stats_.last_write_s = secs;
  stats_.last_error.clear();
  const std::string copy = at_stop ? std::string("at stop") : fmt::format("copy {:.1f} ms", stats_.last_copy_ms);
  // The executors' pause: copy-on-write, the marking (and the preserved records, copied by the
  // writers of the table as they went on); otherwise the whole copy.
  std::string pause;
  if (at_stop) {
  } else if (!opt_.copy_on_write) {
    pause = "; executors paused for the copy";
  } else if (image_.began_stopped()) {  // sparse records: copied with every executor stopped
    pause = fmt::format("; executors paused {:.1f} ms, {} records copied on write", stats_.last_pause_ms,
                        stats_.last_preserved);
  } else {
    pause = fmt::format("; executors did not stop (the last passed the batch {:.1f} ms after the first), {} records "
                        "copied on write",
                        stats_.last_pause_ms, stats_.last_preserved);
  }
  // The writer thread's CPU for this checkpoint: the write, and (copy-on-write) its share of the
  // copy before it.
  const int64_t copy_cpu_ns = std::exchange(copy_cpu_ns_, 0);  // at stop: left from a stop, not this one's
  const double copy_cpu_ms = at_stop ? 0.0 : static_cast<double>(copy_cpu_ns) / 1e6;
  const std::string cpu = copy_cpu_ms > 0 ? fmt::format("{:.0f} ms cpu, {:.0f} of it copying before the write",
                                                        write_cpu_ms + copy_cpu_ms, copy_cpu_ms)
                                          : fmt::format("{:.0f} ms cpu", write_cpu_ms);
  log->info("{} checkpoint of batch {}: {} ({:.1f} MB, {}, written in {:.2f} s, {}{})", opt_.identity(), b,
            path.value(), static_cast<double>(bytes) / 1e6, copy, secs, cpu, pause);
  if (opt_.on_written) opt_.on_written(b);
}

}  // namespace qrstore::cluster
