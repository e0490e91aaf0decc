#include "common/thread.h"

#include <pthread.h>

namespace qrstore {

void SetCurrentThreadName(const std::string& name) {
  std::string short_name = name.substr(0, 15);
  pthread_setname_np(pthread_self(), short_name.c_str());
}

NamedThread::NamedThread(std::string name, std::function<void()> body) : name_(std::move(name)) {
  thread_ = std::thread([n = name_, b = std::move(body)] {
    SetCurrentThreadName(n);
    b();
  });
}

NamedThread& NamedThread::operator=(NamedThread&& other) {
  if (this != &other) {
    Join();
    name_ = std::move(other.name_);
    thread_ = std::move(other.thread_);
  }
  return *this;
}

}  // namespace qrstore
