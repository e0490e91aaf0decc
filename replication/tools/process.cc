#include "replication/tools/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/clock.h"

namespace qrstore::replication::tools {

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_), exited_(other.exited_), code_(other.code_) {
  other.pid_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    if (running()) Terminate(0);
    pid_ = other.pid_;
    exited_ = other.exited_;
    code_ = other.code_;
    other.pid_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (running()) {
    Signal(SIGKILL);
    (void)Wait(5000);
  }
}

Result<Subprocess> Subprocess::Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return Status::InvalidArgument("Spawn: empty argv");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return Status::IoError("open " + log_path + ": " + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    if (log_fd >= 0) ::close(log_fd);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: die with the parent, so no member outlives a crashed bench or test.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    // The parent may block signals (e.g. for sigwait); the child starts clean.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(args[0], args.data());
    const char msg[] = "exec failed\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  Subprocess p;
  p.pid_ = pid;
  return p;
}

void Subprocess::Signal(int sig) {
  if (running()) ::kill(pid_, sig);
}

Result<int> Subprocess::Wait(int64_t timeout_ms) {
  if (pid_ <= 0) return Status::InvalidArgument("no process");
  if (exited_) return code_;
  const int64_t deadline = NowMillis() + timeout_ms;
  int64_t sleep_ms = 1;
  while (true) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return code_;
    }
    if (r < 0 && errno != EINTR) return Status::Internal(std::string("waitpid: ") + std::strerror(errno));
    if (NowMillis() >= deadline) return Status::Timeout("process " + std::to_string(pid_) + " still running");
    // Bounded back-off polling: waitpid has no timeout, and the wait is short.
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = std::min<int64_t>(sleep_ms * 2, 20);
  }
}

int Subprocess::Terminate(int64_t grace_ms) {
  if (pid_ <= 0) return -1;
  if (!exited_) {
    Signal(SIGTERM);
    Result<int> r = Wait(grace_ms);
    if (r.ok()) return r.value();
    Signal(SIGKILL);
  }
  Result<int> r = Wait(10000);
  return r.ok() ? r.value() : -1;
}

Result<uint16_t> FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string err = std::strerror(errno);
    ::close(fd);
    return Status::IoError("bind 127.0.0.1:0: " + err);
  }
  ::close(fd);
  return static_cast<uint16_t>(ntohs(addr.sin_port));
}

Result<std::string> MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return Status::IoError("mkdtemp " + templ + ": " + std::strerror(errno));
  return templ;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::vector<std::string> ReadCompleteLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path, std::ios::binary);
  if (!in) return lines;
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t start = 0;
  while (true) {
    size_t nl = content.find('\n', start);
    if (nl == std::string::npos) break;
    lines.push_back(content.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return ".";
  return p.parent_path().string();
}

std::string TailFile(const std::string& path, size_t n) {
  std::vector<std::string> lines = ReadCompleteLines(path);
  std::ostringstream os;
  size_t from = lines.size() > n ? lines.size() - n : 0;
  for (size_t i = from; i < lines.size(); ++i) os << "    " << lines[i] << "\n";
  return os.str();
}

}  // namespace qrstore::replication::tools
