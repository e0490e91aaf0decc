#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "common/file.h"

using namespace qrstore;

namespace {
std::string TempDir() {
  char tmpl[] = "/tmp/qrstore-file-test.XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}
}  // namespace

TEST_CASE("file: a small file replaced atomically reads back, and the temporary is gone") {
  const std::string dir = TempDir();
  const std::string path = dir + "/f";
  REQUIRE(file::WriteFileAtomic(path, "first").ok());
  REQUIRE(file::WriteFileAtomic(path, "second, longer").ok());
  auto got = file::ReadFile(path, 1 << 10);
  REQUIRE(got.ok());
  CHECK(got.value() == "second, longer");
  auto names = file::ListDir(dir);
  REQUIRE(names.ok());
  CHECK(names.value() == std::vector<std::string>{"f"});
  CHECK(file::ReadFile(path, 4).status().code() == StatusCode::kIoError);  // past max_bytes
  CHECK(file::ReadFile(dir + "/none", 4).status().code() == StatusCode::kNotFound);
  REQUIRE(::unlink(path.c_str()) == 0);
  REQUIRE(::rmdir(dir.c_str()) == 0);
}

TEST_CASE("file: MakeDirs makes missing parents, accepts an existing folder, refuses a file") {
  const std::string dir = TempDir();
  REQUIRE(file::MakeDirs(dir + "/a/b/c").ok());
  REQUIRE(file::MakeDirs(dir + "/a/b/c").ok());
  struct stat st {};
  REQUIRE(::stat((dir + "/a/b/c").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  REQUIRE(file::WriteFileAtomic(dir + "/a/file", "x").ok());
  const Status s = file::MakeDirs(dir + "/a/file");
  CHECK(s.code() == StatusCode::kIoError);
  CHECK(s.message().find("not a directory") != std::string::npos);
  CHECK(file::ListDir(dir + "/missing").status().code() == StatusCode::kNotFound);
  CHECK(file::SyncDir(dir + "/missing").code() == StatusCode::kIoError);
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
}
