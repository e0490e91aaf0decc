// The checkpoint transfer (cluster/recovery/checkpoint_transfer.h) over a real ClientService on
// 127.0.0.1: a transfer cut off midway (the source stalls past stall_ms) resumes at the same
// offset of the same file, one whose file the source pruned midway starts over with the newest,
// one with nothing recent enough fails after its attempts saying why. The fetched file must be
// byte for byte the source's, under its final name, with no part file left. The fetcher only
// moves bytes (the restart validates the file in full), so the files here are random bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/port/client_service.h"
#include "cluster/recovery/checkpoint_transfer.h"
#include "common/net/stream_net.h"
#include "common/rng.h"
#include "storage/checkpoint.h"
#include "tests/integration/raft/raft_test_util.h"

using namespace qrstore;
namespace fs = std::filesystem;
namespace proto = cluster::proto;

namespace {

struct TempDir {
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "qrstore-transfer-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

std::string RandomBytes(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng.Next());
  return s;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A source node's client port serving `dir`, with a hook run before each piece is served.
struct Source {
  explicit Source(std::string d) : dir(std::move(d)) {
    cluster::ClientServiceOptions so;
    so.node = "src";
    so.listen_address = "127.0.0.1:" + std::to_string(replication::raft::testing::FreePorts(1)[0]);
    so.records = 1;
    so.record_bytes = 8;
    address = so.listen_address;
    cluster::ClientServiceHandler h;
    h.status = [] { return proto::NodeStatus{}; };
    h.checkpoint_fetch = [this](const proto::CheckpointFetch& req) {
      int n = 0;
      {
        std::lock_guard<std::mutex> lk(mu);
        requests.push_back(req);
        n = static_cast<int>(requests.size());
      }
      if (before) before(n, req);
      return cluster::ServeCheckpointChunk(dir, req);
    };
    service = std::make_unique<cluster::ClientService>(so, h);
    REQUIRE(service->Start().ok());
  }
  ~Source() { service->Stop(1000); }
  std::vector<proto::CheckpointFetch> Requests() {
    std::lock_guard<std::mutex> lk(mu);
    return requests;
  }

  std::string dir;
  std::string address;
  std::function<void(int, const proto::CheckpointFetch&)> before;  // set before the fetch starts
  std::mutex mu;
  std::vector<proto::CheckpointFetch> requests;  // guarded by mu
  std::unique_ptr<cluster::ClientService> service;
};

// Runs a fetch to the end, ticking its watchdog as the server's watch thread does.
Result<uint64_t> Fetch(const Source& src, const std::string& dst, uint64_t min_batch, int attempts = 8) {
  auto net = net::MakeNngStreamNet();
  cluster::CheckpointFetchOptions o;
  o.net = net.get();
  o.source_node = "src";
  o.source_address = src.address;
  o.dir = dst;
  o.min_batch = min_batch;
  o.chunk_bytes = 1 << 20;
  o.stall_ms = 300;
  o.attempts = attempts;
  o.identity = "[test]";
  cluster::CheckpointFetcher f(o);
  f.Start();
  for (int i = 0; i < 3000; ++i) {  // 60 s at most
    if (auto r = f.result()) {
      f.Stop();
      return *r;
    }
    f.Tick();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  f.Stop();
  FAIL("the transfer did not end within 60 s");
  return Status::Timeout("no end");
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& de : fs::directory_iterator(dir)) out.push_back(de.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("checkpoint transfer: a transfer cut off midway resumes at the same offset of the same file") {
  TempDir src_dir, dst_dir;
  const std::string bytes = RandomBytes((5 << 20) + 12345, 1);
  WriteFile(src_dir.path + "/" + storage::CheckpointFileName(100), bytes);
  Source src(src_dir.path);
  std::atomic<bool> stalled{false};
  src.before = [&](int, const proto::CheckpointFetch& req) {
    // The third piece: the source goes silent past the fetcher's stall_ms, once.
    if (req.offset == (2u << 20) && !stalled.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  };
  Result<uint64_t> r = Fetch(src, dst_dir.path, 50);
  REQUIRE(r.ok());
  CHECK(r.value() == 100);
  CHECK(ReadFile(dst_dir.path + "/" + storage::CheckpointFileName(100)) == bytes);
  CHECK(Names(dst_dir.path) == std::vector<std::string>{storage::CheckpointFileName(100)});  // no part file
  // It asked for offset 2 MiB again on a new connection (resumed), never for 0 again.
  const auto reqs = src.Requests();
  int at_2mib = 0, at_0 = 0;
  for (const auto& q : reqs) {
    at_2mib += q.offset == (2u << 20);
    at_0 += q.offset == 0;
    if (q.offset > 0) CHECK(q.batch == 100);  // every later piece names the file
  }
  CHECK(stalled.load());
  CHECK(at_2mib == 2);
  CHECK(at_0 == 1);
}

TEST_CASE("checkpoint transfer: a file the source prunes midway starts the transfer over with its newest") {
  TempDir src_dir, dst_dir;
  const std::string old_bytes = RandomBytes(3 << 20, 2);
  const std::string new_bytes = RandomBytes((3 << 20) + 7, 3);
  const std::string old_path = src_dir.path + "/" + storage::CheckpointFileName(100);
  WriteFile(old_path, old_bytes);
  Source src(src_dir.path);
  src.before = [&](int n, const proto::CheckpointFetch&) {
    if (n == 2) {  // after the first piece: a newer checkpoint is written, the old one pruned
      WriteFile(src_dir.path + "/" + storage::CheckpointFileName(120), new_bytes);
      fs::remove(old_path);
    }
  };
  Result<uint64_t> r = Fetch(src, dst_dir.path, 50);
  REQUIRE(r.ok());
  CHECK(r.value() == 120);
  CHECK(ReadFile(dst_dir.path + "/" + storage::CheckpointFileName(120)) == new_bytes);
  CHECK(Names(dst_dir.path) == std::vector<std::string>{storage::CheckpointFileName(120)});
}

TEST_CASE("checkpoint transfer: nothing recent enough at the source fails after its attempts, saying why") {
  TempDir src_dir, dst_dir;
  WriteFile(src_dir.path + "/" + storage::CheckpointFileName(100), RandomBytes(1000, 4));
  Source src(src_dir.path);
  Result<uint64_t> r = Fetch(src, dst_dir.path, 500, /*attempts=*/2);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().ToString());
  CHECK(r.status().message().find("no checkpoint of batch 500 or later") != std::string::npos);
  CHECK(Names(dst_dir.path).empty());
}
