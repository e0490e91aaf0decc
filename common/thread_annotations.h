// Clang's thread-safety attributes as macros: they let the compiler check, at every access,
// that the lock a member is declared GUARDED_BY is held, and that a function declared REQUIRES
// a lock is only called with it held. The analysis runs with -Wthread-safety (clang only: the
// top-level CMakeLists.txt turns it on and makes it an error); with any other compiler the
// macros expand to nothing and the code builds unchanged.
//
// The capability type they name is qrstore::Mutex (common/mutex.h): libstdc++'s std::mutex
// carries no attributes, so the analysis cannot follow it.
//
// Where each goes:
//   class CAPABILITY("mutex") Mutex;                 a type that is a lock
//   class SCOPED_CAPABILITY MutexLock;               an RAII holder of a lock
//   int n_ GUARDED_BY(mu_);                          read or written with mu_ held
//   int* p_ PT_GUARDED_BY(mu_);                      what p_ points to needs mu_ (p_ itself not)
//   void FooLocked() REQUIRES(mu_);                  callers hold mu_
//   void Stop() EXCLUDES(mu_);                       callers do not hold mu_ (it takes it)
//   void Lock() ACQUIRE();  void Unlock() RELEASE(); take / drop a lock and return
//   bool TryLock() TRY_ACQUIRE(true);                holds the lock when it returned true
//   Mutex& mu() RETURN_CAPABILITY(mu_);              the returned lock is mu_
//   void f() NO_THREAD_SAFETY_ANALYSIS;              not checked (say why beside it)
#pragma once

#if defined(__clang__)
#define QR_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define QR_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(name) QR_THREAD_ANNOTATION(capability(name))
#define SCOPED_CAPABILITY QR_THREAD_ANNOTATION(scoped_lockable)

#define GUARDED_BY(x) QR_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) QR_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) QR_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) QR_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))

#define REQUIRES(...) QR_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) QR_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define EXCLUDES(...) QR_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

#define ACQUIRE(...) QR_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) QR_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) QR_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) QR_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) QR_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) QR_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) QR_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) QR_THREAD_ANNOTATION(lock_returned(x))

#define NO_THREAD_SAFETY_ANALYSIS QR_THREAD_ANNOTATION(no_thread_safety_analysis)
