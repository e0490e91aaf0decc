// Status and Result<T>: the error values every fallible qrstore function returns.
// Plain values, no exceptions; safe to copy between threads. A Status is either OK or carries
// a code and a message a user can act on. Bugs are not Statuses: see common/check.h.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "common/check.h"

namespace qrstore {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad input: config, flag, malformed bytes
  kCorruption,       // bytes that fail a checksum or structural check
  kNotFound,
  kIoError,
  kUnavailable,      // peer down, session lost, not leader
  kTimeout,
  kAborted,          // operation cancelled (shutdown, leadership lost)
  kResourceExhausted,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status IoError(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status Timeout(std::string msg) { return {StatusCode::kTimeout, std::move(msg)}; }
  static Status Aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }
  static Status ResourceExhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: ycsb.theta: must be >= 0" (or "OK").
  std::string ToString() const;

 private:
  Status(StatusCode code, std::string msg) : code_(code), message_(std::move(msg)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or an error. Accessing value() of an error is a bug (checked).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    QR_CHECK(!status_.ok(), "Result constructed from an OK status without a value");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    QR_CHECK(ok(), "value() of error Result: %s", status_.ToString().c_str());
    return *value_;
  }
  const T& value() const& {
    QR_CHECK(ok(), "value() of error Result: %s", status_.ToString().c_str());
    return *value_;
  }
  T&& value() && {
    QR_CHECK(ok(), "value() of error Result: %s", status_.ToString().c_str());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace qrstore

// Propagate an error Status from an expression returning Status.
#define QR_RETURN_IF_ERROR(expr)                 \
  do {                                           \
    ::qrstore::Status qr_status_ = (expr);       \
    if (!qr_status_.ok()) return qr_status_;     \
  } while (0)
