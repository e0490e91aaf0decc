#include "common/thread_cpu.h"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace qrstore {
namespace {

// utime + stime (fields 14 and 15 of /proc/<pid>/task/<tid>/stat) in clock ticks; -1 if the
// thread is gone. The name (field 2) may hold spaces and parentheses: fields are counted from
// the last ')'.
int64_t ThreadTicks(const std::string& stat_path) {
  std::ifstream f(stat_path);
  std::string line;
  if (!std::getline(f, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  int64_t utime = 0, stime = 0;
  // Field 3 (state) is the first after ')'; utime is field 14, stime 15.
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoll(field);
    if (i == 15) stime = std::stoll(field);
  }
  return utime + stime;
}

}  // namespace

// scripts/thread-cpu.sh groups names by the same rule (see the header).
std::string ThreadGroup(std::string_view name) {
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.remove_suffix(1);
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
  if (end < name.size() && end > 0 && name[end - 1] == '-') name = name.substr(0, end - 1);
  return std::string(name);
}

std::map<std::string, int64_t> ThreadCpuNanos() {
  std::map<std::string, int64_t> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  const long hz = sysconf(_SC_CLK_TCK);
  const int64_t ns_per_tick = hz > 0 ? 1'000'000'000 / hz : 10'000'000;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(base + "/comm");
    std::string name;
    if (!std::getline(comm, name)) continue;  // exited meanwhile
    const int64_t ticks = ThreadTicks(base + "/stat");
    if (ticks < 0) continue;
    out[ThreadGroup(name)] += ticks * ns_per_tick;
  }
  closedir(dir);
  return out;
}

std::map<std::string, int64_t> ThreadCpuDelta(const std::map<std::string, int64_t>& before,
                                             const std::map<std::string, int64_t>& after) {
  std::map<std::string, int64_t> d;
  for (const auto& [name, ns] : after) {
    auto it = before.find(name);
    d[name] = ns - (it == before.end() ? 0 : it->second);
  }
  return d;
}

}  // namespace qrstore
