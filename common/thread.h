// NamedThread: a std::thread that carries a name (visible in top/gdb, at most 15 chars)
// and joins on destruction, so no thread outlives its owner. Owners stop threads in
// reverse start order: set their stop flag, wake them, then Join().
#pragma once

#include <functional>
#include <string>
#include <thread>

namespace qrstore {

class NamedThread {
 public:
  NamedThread() = default;
  NamedThread(std::string name, std::function<void()> body);
  NamedThread(NamedThread&&) = default;
  NamedThread& operator=(NamedThread&& other);
  ~NamedThread() { Join(); }

  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  bool joinable() const { return thread_.joinable(); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::thread thread_;
};

// Names the calling thread (truncated to 15 characters, the Linux limit).
void SetCurrentThreadName(const std::string& name);

}  // namespace qrstore
