// Monotonic time for measurement and timeouts. Outcomes never depend on it: only latency
// figures, batch timeouts (which decide when a batch closes, never what is in it relative
// to the planned order) and drivers' timers read it. The Raft core reads no clock at all.
#pragma once

#include <chrono>
#include <cstdint>

namespace qrstore {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline int64_t NowMicros() { return NowNanos() / 1000; }
inline int64_t NowMillis() { return NowNanos() / 1000000; }

}  // namespace qrstore
