// Small process helpers for the replication tools and integration tests: child processes
// started with fork/exec (killed with the parent via PR_SET_PDEATHSIG, so a crashed bench or
// test leaves nothing behind), free TCP ports on 127.0.0.1, temporary directories, and
// reading line files written by other processes.
//
// A Subprocess is owned by one thread; its destructor kills (SIGKILL) and reaps the child if
// it is still running.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace qrstore::replication::tools {

class Subprocess {
 public:
  Subprocess() = default;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  ~Subprocess();

  // Starts argv[0] with argv; stdout and stderr go to log_path (appended; "" = inherit).
  static Result<Subprocess> Spawn(const std::vector<std::string>& argv, const std::string& log_path);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exited_; }
  // Sends a signal (no-op once reaped).
  void Signal(int sig);
  // Waits up to timeout_ms for exit. Returns the exit code (128+signal if killed) or
  // kTimeout. Once reaped, returns the same code again.
  Result<int> Wait(int64_t timeout_ms);
  // SIGTERM, wait up to grace_ms, then SIGKILL; returns the exit code.
  int Terminate(int64_t grace_ms);

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = 0;
};

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
Result<uint16_t> FreeTcpPort();
// mkdtemp under $TMPDIR (or /tmp) with the given prefix.
Result<std::string> MakeTempDir(const std::string& prefix);
// Recursively removes a directory tree (best effort).
void RemoveTree(const std::string& path);
// Complete lines of a file (a trailing line without '\n', e.g. from a killed writer, is
// dropped). A missing file gives no lines.
std::vector<std::string> ReadCompleteLines(const std::string& path);
// Directory of the running executable (to find sibling programs in <build>/bin).
std::string SelfDir();
// Last `n` lines of a file, for error reports.
std::string TailFile(const std::string& path, size_t n);

}  // namespace qrstore::replication::tools
