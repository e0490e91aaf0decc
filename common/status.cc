#include "common/status.h"

#include <cstdarg>

namespace qrstore {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

namespace internal {
void CheckFailed(const char* file, int line, const char* cond, const char* fmt, ...) {
  std::fprintf(stderr, "CHECK failed at %s:%d: %s", file, line, cond);
  if (fmt != nullptr && fmt[0] == ' ') ++fmt;  // QR_CHECK prefixes one space to the format
  if (fmt != nullptr && fmt[0] != '\0') {
    std::fprintf(stderr, ": ");
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace qrstore
