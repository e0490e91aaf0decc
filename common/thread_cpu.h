// The CPU time each of this process's threads used, by thread name: what a benchmark divides by
// the transactions it committed for a per-transaction CPU budget (planning, execution, commit,
// the load generator...). Reads /proc/self/task; callable from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace qrstore {

// CPU nanoseconds (user + system) of every live thread of this process, summed by thread name
// with a trailing "-<digits>" dropped ("executor-0" and "executor-1" count as "executor").
// Resolution: the kernel's clock tick (10 ms at 100 Hz). Empty without /proc.
std::map<std::string, int64_t> ThreadCpuNanos();

// after - before, group by group (a group missing from `before` counts from 0).
std::map<std::string, int64_t> ThreadCpuDelta(const std::map<std::string, int64_t>& before,
                                             const std::map<std::string, int64_t>& after);

}  // namespace qrstore
