// The POSIX file layer qrstore's durable state goes through: errors that name the path and the
// call, a write that finishes or fails, fsync of a file and of the folder that names it, a
// small file replaced atomically, and listing and reading. Stateless free functions, callable
// from any thread. Every failure is a Status (kIoError; kNotFound for a missing path where the
// function says so), never an exception or a silent short write.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"

namespace qrstore::file {

// kIoError "<what>: <strerror(errno)>" (errno as the failed call left it).
Status Errno(const std::string& what);

// Writes all n bytes at the file position (EINTR retried); `path` names the file in errors.
Status WriteAll(int fd, const void* data, size_t n, const std::string& path);

// fsync of a folder, so the entries created or renamed in it are durable.
Status SyncDir(const std::string& dir);

// Every entry of `dir` but . and .., unsorted. kNotFound when dir does not exist.
Result<std::vector<std::string>> ListDir(const std::string& dir);

// `dir` and its missing parents (mode 0755). OK when it exists already.
Status MakeDirs(const std::string& dir);

// The whole file. kNotFound when it does not exist; kIoError past max_bytes.
Result<std::string> ReadFile(const std::string& path, size_t max_bytes);

// Replaces `path` by `bytes` durably: written to a temporary file beside it, fsynced, renamed
// over it, then the folder fsynced. A crash leaves the old file or the new one, never a part.
Status WriteFileAtomic(const std::string& path, const std::string& bytes);

}  // namespace qrstore::file
