#include "cluster/recovery/checkpoint_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/file.h"
#include "common/logging.h"
#include "storage/checkpoint.h"

namespace qrstore::cluster {

namespace fs = std::filesystem;

namespace {

using file::Errno;
using file::SyncDir;

std::string Basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool BatchOf(const std::string& path, uint64_t* batch) {
  unsigned long long b = 0;
  const std::string name = Basename(path);
  if (std::sscanf(name.c_str(), "checkpoint-%20llu.qrc", &b) != 1) return false;
  if (name != storage::CheckpointFileName(b)) return false;
  *batch = b;
  return true;
}

}  // namespace

Result<std::string> ServeCheckpointChunk(const std::string& dir, const proto::CheckpointFetch& req,
                                         uint64_t* served_batch) {
  std::string path;
  uint64_t batch = 0;
  if (req.batch == proto::kAnyCheckpoint) {
    auto files = storage::ListCheckpoints(dir);
    if (files.ok()) {
      for (const std::string& f : files.value()) {  // newest first
        uint64_t b = 0;
        if (BatchOf(f, &b) && b >= req.min_batch) {
          path = f;
          batch = b;
          break;
        }
      }
    }
    if (path.empty()) {
      return Status::NotFound("no checkpoint of batch " + std::to_string(req.min_batch) + " or later in " + dir);
    }
  } else {
    batch = req.batch;
    path = dir + "/" + storage::CheckpointFileName(batch);
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("the checkpoint of batch " + std::to_string(batch) + " is no longer kept");
    return Errno("open " + path);
  }
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    Status st = Errno("fstat " + path);
    ::close(fd);
    return st;
  }
  const uint64_t size = static_cast<uint64_t>(sb.st_size);
  if (req.offset > size) {
    ::close(fd);
    return Status::InvalidArgument("offset " + std::to_string(req.offset) + " is past the end of " + path + " (" +
                                   std::to_string(size) + " bytes)");
  }
  std::string data(std::min<uint64_t>(req.max_bytes, size - req.offset), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(req.offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status st = n == 0 ? Status::IoError(path + ": shorter than its size") : Errno("read " + path);
      ::close(fd);
      return st;
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  proto::CheckpointChunk c;
  c.request_id = req.request_id;
  c.batch = batch;
  if (served_batch != nullptr) *served_batch = batch;
  c.file_bytes = size;
  c.offset = req.offset;
  c.data = data;
  c.checksum = proto::ChunkChecksum(data);
  return proto::EncodeCheckpointChunk(c);
}

CheckpointFetcher::CheckpointFetcher(CheckpointFetchOptions options) : opt_(std::move(options)) {}

CheckpointFetcher::~CheckpointFetcher() { Stop(); }

void CheckpointFetcher::Start() {
  std::error_code ec;
  fs::create_directories(opt_.dir, ec);
  // Parts of an earlier transfer (a restart midway) are junk now.
  for (const auto& de : fs::directory_iterator(opt_.dir, ec)) {
    const std::string name = de.path().filename().string();
    if (name.rfind(".transfer-", 0) == 0) fs::remove(de.path(), ec);
  }
  {
    MutexLock lk(mu_);
    last_piece_ns_ = NowNanos();
  }
  thread_ = NamedThread("ckpt-fetch", [this] { Run(); });
}

void CheckpointFetcher::Tick() {
  MutexLock lk(mu_);
  if (conn_ != nullptr && NowNanos() - last_piece_ns_ > opt_.stall_ms * 1'000'000) {
    Logger("server")->warn("{} checkpoint transfer from {}: no piece for {} ms; reconnecting", opt_.identity,
                           opt_.source_node, opt_.stall_ms);
    conn_->Shutdown();
    last_piece_ns_ = NowNanos();
  }
}

std::optional<Result<uint64_t>> CheckpointFetcher::result() const {
  MutexLock lk(mu_);
  return result_;
}

CheckpointFetchProgress CheckpointFetcher::progress() const {
  MutexLock lk(mu_);
  return progress_;
}

void CheckpointFetcher::Stop() {
  stop_.store(true);
  {
    MutexLock lk(mu_);
    if (conn_ != nullptr) conn_->Shutdown();
  }
  cv_.notify_all();
  thread_.Join();
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void CheckpointFetcher::Run() {
  auto log = Logger("server");
  Status last = Status::Unavailable("no attempt made");
  int64_t backoff_ms = 200;
  for (int attempt = 1; attempt <= opt_.attempts && !stop_.load(); ++attempt) {
    {
      MutexLock lk(mu_);
      progress_.attempt = attempt;
    }
    std::unique_ptr<net::StreamConn> conn = opt_.net->Connect(opt_.source_address, 2000);
    if (!conn) {
      last = Status::Unavailable("cannot connect to " + opt_.source_node + " at " + opt_.source_address);
    } else {
      {
        MutexLock lk(mu_);
        conn_ = conn.get();
        last_piece_ns_ = NowNanos();
      }
      last = FetchOnce(conn.get());
      {
        MutexLock lk(mu_);
        conn_ = nullptr;
      }
      conn.reset();
      if (last.ok()) break;
    }
    if (stop_.load()) break;
    log->warn("{} checkpoint transfer from {} (attempt {} of {}): {}", opt_.identity, opt_.source_node, attempt,
              opt_.attempts, last.message());
    MutexUniqueLock lk(mu_);
    cv_.wait_for(lk.native(), std::chrono::milliseconds(backoff_ms), [&] { return stop_.load(); });
    backoff_ms = std::min<int64_t>(backoff_ms * 2, 2000);
  }
  if (stop_.load() && !last.ok()) last = Status::Aborted("stopped");
  Result<uint64_t> r = last.ok() ? Result<uint64_t>(batch_) : Result<uint64_t>(last);
  if (!last.ok() && !part_path_.empty()) {
    if (fd_ >= 0) ::close(fd_), fd_ = -1;
    std::error_code ec;
    fs::remove(part_path_, ec);
  }
  MutexLock lk(mu_);
  result_ = std::move(r);
}

Status CheckpointFetcher::FetchOnce(net::StreamConn* conn) {
  std::string body;
  for (;;) {
    if (stop_.load()) return Status::Aborted("stopped");
    proto::CheckpointFetch req;
    req.request_id = ++request_id_;
    req.min_batch = opt_.min_batch;
    req.batch = batch_;
    req.offset = offset_;
    req.max_bytes = opt_.chunk_bytes;
    const std::string frame = proto::Frame(proto::MsgType::kCheckpointFetch, proto::EncodeCheckpointFetch(req));
    iovec iov{const_cast<char*>(frame.data()), frame.size()};
    if (!conn->WriteAll(&iov, 1)) return Status::Unavailable("the connection broke (write)");
    char header[proto::kHeaderBytes];
    if (!conn->ReadFull(header, sizeof header)) return Status::Unavailable("the connection broke (read)");
    proto::FrameHeader h;
    if (Status st = proto::DecodeHeader(header, &h); !st.ok()) return st;
    if (h.body_bytes > proto::kMaxCheckpointChunk + 64) {
      return Status::Corruption("a reply of " + std::to_string(h.body_bytes) + " bytes");
    }
    body.resize(h.body_bytes);
    if (h.body_bytes > 0 && !conn->ReadFull(body.data(), body.size())) {
      return Status::Unavailable("the connection broke (read)");
    }
    if (h.type == static_cast<uint8_t>(proto::MsgType::kError)) {
      proto::ErrorReply e;
      if (Status st = proto::DecodeError(body, &e); !st.ok()) return st;
      if (e.code == StatusCode::kNotFound && batch_ != proto::kAnyCheckpoint) {
        // The source pruned the file midway: start over with its newest.
        Logger("server")->warn("{} checkpoint transfer from {}: {}; starting over with its newest", opt_.identity,
                               opt_.source_node, e.message);
        batch_ = proto::kAnyCheckpoint;
        offset_ = 0;
        continue;
      }
      return Status::Unavailable(opt_.source_node + " says: " + e.message);
    }
    if (h.type != static_cast<uint8_t>(proto::MsgType::kCheckpointChunk)) {
      return Status::Corruption("unexpected reply type " + std::to_string(h.type));
    }
    proto::CheckpointChunk c;
    if (Status st = proto::DecodeCheckpointChunk(body, &c); !st.ok()) return st;
    if (c.request_id != req.request_id || c.offset != req.offset ||
        (batch_ != proto::kAnyCheckpoint && c.batch != batch_) || c.batch < opt_.min_batch) {
      return Status::Corruption("a piece that does not answer the request (batch " + std::to_string(c.batch) +
                                ", offset " + std::to_string(c.offset) + ")");
    }
    if (batch_ == proto::kAnyCheckpoint || c.batch != batch_) {
      // A new file: (re)open the part file.
      if (fd_ >= 0) ::close(fd_), fd_ = -1;
      if (!part_path_.empty()) {
        std::error_code ec;
        fs::remove(part_path_, ec);
      }
      batch_ = c.batch;
      file_bytes_ = c.file_bytes;
      offset_ = 0;
      part_path_ = opt_.dir + "/.transfer-" + storage::CheckpointFileName(batch_) + ".part";
      fd_ = ::open(part_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd_ < 0) return Errno("create " + part_path_);
      Logger("server")->info("{} fetching the checkpoint of batch {} ({} bytes) from {}", opt_.identity, batch_,
                             file_bytes_, opt_.source_node);
    }
    if (c.file_bytes != file_bytes_) return Status::Corruption("the file's size changed midway");
    if (c.data.empty() && offset_ < file_bytes_) return Status::Corruption("an empty piece before the end");
    size_t put = 0;
    while (put < c.data.size()) {
      const ssize_t n = ::pwrite(fd_, c.data.data() + put, c.data.size() - put, static_cast<off_t>(offset_ + put));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("write " + part_path_);
      put += static_cast<size_t>(n);
    }
    offset_ += c.data.size();
    {
      MutexLock lk(mu_);
      last_piece_ns_ = NowNanos();
      progress_.batch = batch_;
      progress_.done_bytes = offset_;
      progress_.file_bytes = file_bytes_;
    }
    if (offset_ < file_bytes_) continue;
    // Whole: make it durable under its final name.
    if (::fsync(fd_) != 0) return Errno("fsync " + part_path_);
    ::close(fd_);
    fd_ = -1;
    const std::string final_path = opt_.dir + "/" + storage::CheckpointFileName(batch_);
    if (::rename(part_path_.c_str(), final_path.c_str()) != 0) return Errno("rename to " + final_path);
    part_path_.clear();
    QR_RETURN_IF_ERROR(SyncDir(opt_.dir));
    Logger("server")->info("{} fetched {} ({} bytes) from {}", opt_.identity, final_path, file_bytes_,
                           opt_.source_node);
    return Status::Ok();
  }
}

}  // namespace qrstore::cluster
