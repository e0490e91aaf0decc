// Mutex, MutexLock and MutexUniqueLock: std::mutex, std::lock_guard and std::unique_lock with
// clang's thread-safety attributes (common/thread_annotations.h), so that members declared
// GUARDED_BY(mu_) and functions declared REQUIRES(mu_) are checked by the compiler. Each is a
// thin inline wrapper over its std:: counterpart and costs nothing more at run time. Any thread
// may use them; the usual std::mutex rules hold (not recursive, unlocked by its owner).
//
// Condition variables stay std::condition_variable: MutexUniqueLock::native() is the
// std::unique_lock<std::mutex>& that wait, wait_for and wait_until take.
//
// A wait's predicate is a lambda, which the analysis checks as a function of its own: it does
// not know that the condition variable calls it with the lock held, so a predicate reading a
// guarded member is declared to require the lock, which is what wait guarantees:
//
//   MutexUniqueLock lock(mu_);
//   cv_.wait(lock.native(), [this]() REQUIRES(mu_) { return stop_ || !queue_.empty(); });
//
// (The call inside the standard library is not checked: it is a system header.) A while loop
// around a predicate-less wait is checked as well, where it reads better.
//
// A helper that must drop its caller's lock for a while is declared REQUIRES(mu_) and calls
// mu_.Unlock() and mu_.Lock() itself: the analysis cannot tie a MutexUniqueLock passed to it as
// an argument to mu_.
#pragma once

#include <mutex>

#include "common/check.h"
#include "common/thread_annotations.h"

namespace qrstore {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Takes the lock if it is free; true if taken.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // The std::mutex itself, for std::unique_lock (MutexUniqueLock uses it; other code should not
  // need it: locking through it is invisible to the analysis).
  std::mutex& native() RETURN_CAPABILITY(this) { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex from construction to the end of the scope, as std::lock_guard does.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Holds a Mutex from construction to the end of the scope unless Unlock() drops it first (and
// Lock() takes it again), as std::unique_lock does; native() is the std::unique_lock for a
// std::condition_variable's waits.
class SCOPED_CAPABILITY MutexUniqueLock {
 public:
  explicit MutexUniqueLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexUniqueLock() RELEASE() {}  // lock_ unlocks if it holds the mutex
  MutexUniqueLock(const MutexUniqueLock&) = delete;
  MutexUniqueLock& operator=(const MutexUniqueLock&) = delete;

  void Lock() ACQUIRE() { lock_.lock(); }
  void Unlock() RELEASE() { lock_.unlock(); }

  // For std::condition_variable::wait, wait_for and wait_until only: they give the mutex back
  // before returning, so the analysis rightly sees it held throughout.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

// Tells the analysis, for a scope, that `alias` is held because `held` is: for one Mutex that
// the code reaches by two names the analysis cannot equate (it compares names, not addresses),
// e.g. an object's own `ring_.mu` and `stage_.ring_->mu`, where the stage holds a pointer to
// that object's ring. It takes nothing; it checks that both are the same Mutex. The caller
// holds `held` (not declared REQUIRES(held): on a scoped capability's constructor the analysis
// reads that as adopting `held`, and would drop it with the alias at the end of the scope).
//
//   MutexLock lock(ring_.mu);
//   MutexAlias held(ring_.mu, stage_.ring_mu());  // ring_mu() RETURN_CAPABILITY(ring_->mu)
//   stage_.FooLocked();                           // FooLocked() REQUIRES(ring_->mu)
class SCOPED_CAPABILITY MutexAlias {
 public:
  MutexAlias(const Mutex& held, const Mutex& alias) ACQUIRE(alias) {
    QR_CHECK(&held == &alias, "MutexAlias of two different mutexes");
  }
  ~MutexAlias() RELEASE() {}
  MutexAlias(const MutexAlias&) = delete;
  MutexAlias& operator=(const MutexAlias&) = delete;
};

static_assert(sizeof(Mutex) == sizeof(std::mutex));
static_assert(sizeof(MutexLock) == sizeof(std::lock_guard<std::mutex>));
static_assert(sizeof(MutexUniqueLock) == sizeof(std::unique_lock<std::mutex>));

}  // namespace qrstore
