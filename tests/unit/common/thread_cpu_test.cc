#include <catch2/catch.hpp>

#include <stdio.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread.h"
#include "common/thread_cpu.h"

using namespace qrstore;

namespace {
int64_t OwnCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

TEST_CASE("thread cpu: a busy thread's time is counted under its name without the number") {
  const auto before = ThreadCpuNanos();
  REQUIRE_FALSE(before.empty());
  // Each thread waits for `measured` before it returns: an ended thread leaves /proc.
  std::atomic<bool> busy_done{false}, idle_done{false}, measured{false};
  auto wait_measured = [&] {
    const int64_t give_up = NowNanos() + 30'000'000'000;
    while (!measured.load() && NowNanos() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  std::atomic<uint64_t> sink{0};
  // Burns 200 ms of its own CPU time (whatever the host's load), at most 20 s of wall time.
  NamedThread busy("qrcpu-7", [&] {
    const int64_t start = OwnCpuNanos(), give_up = NowNanos() + 20'000'000'000;
    uint64_t x = 1;
    while (OwnCpuNanos() - start < 200'000'000 && NowNanos() < give_up) {
      for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ULL + 1;
    }
    sink.store(x);
    busy_done.store(true);
    wait_measured();
  });
  NamedThread idle("qridle-2", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    idle_done.store(true);
    wait_measured();
  });
  const int64_t deadline = NowNanos() + 30'000'000'000;
  while (!(busy_done.load() && idle_done.load()) && NowNanos() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(busy_done.load());
  const auto after = ThreadCpuNanos();
  measured.store(true);
  busy.Join();
  idle.Join();
  const auto d = ThreadCpuDelta(before, after);
  REQUIRE(d.count("qrcpu") == 1);
  CHECK(d.count("qrcpu-7") == 0);
  // 200 ms burnt, counted in clock ticks (10 ms at 100 Hz).
  CHECK(d.at("qrcpu") >= 150'000'000);
  CHECK(d.at("qrcpu") <= 300'000'000);
  REQUIRE(d.count("qridle") == 1);
  CHECK(d.at("qridle") <= 50'000'000);
  CHECK(sink.load() != 0);
}

TEST_CASE("thread cpu: scripts/thread-cpu.sh groups thread names as ThreadGroup does") {
  CHECK(ThreadGroup("executor-0") == "executor");
  CHECK(ThreadGroup("planner-12\n") == "planner");
  const std::vector<std::string> names = {"executor-0", "executor-13", "planner-1", "commit", "qrstore-bench",
                                          "raft-io-2", "row-link-10", "zk-1-2", "a--1", "-7", "7", "name-",
                                          "tick-3 ", "x1", "ends-in-dash-"};
  std::string cmd = "bash " QRSTORE_SOURCE_DIR "/scripts/thread-cpu.sh --group";
  for (const std::string& n : names) cmd += " '" + n + "'";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  REQUIRE(pclose(p) == 0);
  std::vector<std::string> groups;
  for (size_t at = 0; at < out.size();) {
    const size_t nl = out.find('\n', at);
    REQUIRE(nl != std::string::npos);
    groups.push_back(out.substr(at, nl - at));
    at = nl + 1;
  }
  REQUIRE(groups.size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    INFO("thread name '" << names[i] << "'");
    CHECK(groups[i] == ThreadGroup(names[i]));
  }
}
