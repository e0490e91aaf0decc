// Always-on assertions for bugs (never for operating failures, which return Status).
// QR_CHECK(cond, fmt, ...) prints file:line, the condition and a printf-style message to
// stderr, then aborts. Kept in release builds: a broken invariant must never run on silently.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace qrstore::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
}  // namespace qrstore::internal

#define QR_CHECK(cond, ...)                                                     \
  do {                                                                         \
    if (__builtin_expect(!(cond), 0)) {                                        \
      ::qrstore::internal::CheckFailed(__FILE__, __LINE__, #cond, " " __VA_ARGS__); \
    }                                                                          \
  } while (0)

// Checks with the two values printed (integers only).
#define QR_CHECK_OP(a, op, b)                                                          \
  do {                                                                                \
    auto qr_a_ = (a);                                                                 \
    auto qr_b_ = (b);                                                                 \
    if (__builtin_expect(!(qr_a_ op qr_b_), 0)) {                                     \
      ::qrstore::internal::CheckFailed(__FILE__, __LINE__, #a " " #op " " #b,         \
                                       "%lld vs %lld", static_cast<long long>(qr_a_), \
                                       static_cast<long long>(qr_b_));                \
    }                                                                                 \
  } while (0)
#define QR_CHECK_EQ(a, b) QR_CHECK_OP(a, ==, b)
#define QR_CHECK_NE(a, b) QR_CHECK_OP(a, !=, b)
#define QR_CHECK_LT(a, b) QR_CHECK_OP(a, <, b)
#define QR_CHECK_LE(a, b) QR_CHECK_OP(a, <=, b)
#define QR_CHECK_GT(a, b) QR_CHECK_OP(a, >, b)
#define QR_CHECK_GE(a, b) QR_CHECK_OP(a, >=, b)
