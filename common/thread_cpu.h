// The CPU time each of this process's threads used, by thread name: what a benchmark divides by
// the transactions it committed for a per-transaction CPU budget (planning, execution, commit,
// the load generator...). Reads /proc/self/task; callable from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace qrstore {

// The group a thread name counts in: the name without trailing spaces and line breaks, then
// without a trailing "-<digits>" ("executor-0" and "executor-1" are "executor"). The same rule
// is written again in scripts/thread-cpu.sh, which reads another process's threads without a
// build; tests/unit/common/thread_cpu_test.cc checks that the two agree.
std::string ThreadGroup(std::string_view name);

// CPU nanoseconds (user + system) of every live thread of this process, summed by ThreadGroup.
// Resolution: the kernel's clock tick (10 ms at 100 Hz). Empty without /proc.
std::map<std::string, int64_t> ThreadCpuNanos();

// after - before, group by group (a group missing from `before` counts from 0).
std::map<std::string, int64_t> ThreadCpuDelta(const std::map<std::string, int64_t>& before,
                                             const std::map<std::string, int64_t>& after);

}  // namespace qrstore
