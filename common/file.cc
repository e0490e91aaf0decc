#include "common/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace qrstore::file {

Status Errno(const std::string& what) { return Status::IoError(what + ": " + std::strerror(errno)); }

Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("write " + path);
    }
    if (w == 0) return Status::IoError("write " + path + ": no progress");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("open dir " + dir);
  const int rv = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  errno = err;
  if (rv != 0) return Errno("fsync dir " + dir);
  return Status::Ok();
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return Status::NotFound("directory " + dir + " does not exist");
    return Errno("open dir " + dir);
  }
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* e = ::readdir(d);
    if (e == nullptr) break;
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) {
    errno = err;
    return Errno("read dir " + dir);
  }
  return names;
}

Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("MakeDirs: empty path");
  for (size_t pos = 1;; ++pos) {
    pos = dir.find('/', pos);
    const std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return Errno("mkdir " + prefix);
    if (pos == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return Errno("stat " + dir);
  if (!S_ISDIR(st.st_mode)) return Status::IoError(dir + ": exists and is not a directory");
  return Status::Ok();
}

Result<std::string> ReadFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path + " does not exist");
    return Errno("open " + path);
  }
  std::string out;
  char buf[1 << 14];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      const Status st = Errno("read " + path);
      ::close(fd);
      return st;
    }
    if (r == 0) break;
    if (out.size() + static_cast<size_t>(r) > max_bytes) {
      ::close(fd);
      return Status::IoError(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomic(const std::string& path, const std::string& bytes) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("create " + tmp);
  Status st = WriteAll(fd, bytes.data(), bytes.size(), tmp);
  if (st.ok() && ::fsync(fd) != 0) st = Errno("fsync " + tmp);
  if (::close(fd) != 0 && st.ok()) st = Errno("close " + tmp);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = Errno("rename " + tmp + " to " + path);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return SyncDir(dir);
}

}  // namespace qrstore::file
