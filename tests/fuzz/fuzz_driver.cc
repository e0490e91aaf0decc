// The main() of a fuzz target in the normal (non-libFuzzer) build: runs LLVMFuzzerTestOneInput on
// every file given, or on every file of every directory given, so ctest replays the checked-in
// seed corpus and every input that ever crashed (tests/fuzz/regressions/<target>/) with g++.
// A failing input aborts (the targets check their contracts with QR_CHECK), failing the test.
//
// `--mutants N` (targets with a structure-aware LLVMFuzzerCustomMutator only): after replaying
// each input, also runs N mutants of it, made by the target's mutator in pairs (a mutant of the
// input, then a mutant of that one), with seeds fixed by the input's position and the mutant's
// number, so a run is the same every time. A mutant that fails is first written to
// ./mutant-crash-<target>, to be replayed and kept as a regression.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed)
    __attribute__((weak));

namespace {

// The mutant being run, for the abort handler.
const uint8_t* g_mutant = nullptr;
size_t g_mutant_size = 0;
char g_crash_path[512] = "mutant-crash";

void OnAbort(int sig) {
  if (g_mutant != nullptr) {
    const int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t w = write(fd, g_mutant, g_mutant_size);
      (void)w;
      close(fd);
    }
    const char msg[] = "fuzz driver: a structural mutant failed; it is in ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    w = write(2, g_crash_path, strlen(g_crash_path));
    w = write(2, "\n", 1);
    (void)w;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  long mutants = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mutants" && i + 1 < argc) {
      char* end = nullptr;
      mutants = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || mutants < 0 || mutants > 1'000'000) {
        std::fprintf(stderr, "--mutants: expected a count in [0, 1000000] (got '%s')\n", argv[i]);
        return 2;
      }
      continue;
    }
    const std::filesystem::path p(a);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (std::filesystem::exists(p)) {
      files.push_back(p);
    }
  }
  if (mutants > 0 && LLVMFuzzerCustomMutator == nullptr) {
    std::fprintf(stderr, "--mutants: this target has no structure-aware mutator\n");
    return 2;
  }
  std::snprintf(g_crash_path, sizeof g_crash_path, "mutant-crash-%s",
                std::filesystem::path(argv[0]).filename().string().c_str());
  std::signal(SIGABRT, OnAbort);
  std::sort(files.begin(), files.end());
  size_t ran = 0;
  constexpr size_t kMaxMutantBytes = 1 << 20;
  std::vector<uint8_t> buf;
  for (size_t n = 0; n < files.size(); ++n) {
    std::ifstream in(files[n], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++ran;
    size_t size = 0;
    for (long m = 0; m < mutants; ++m) {
      if (m % 2 == 0) {
        buf.assign(bytes.begin(), bytes.end());
        size = buf.size();
      }
      buf.resize(std::max(kMaxMutantBytes, size));
      size = LLVMFuzzerCustomMutator(buf.data(), size, buf.size(), static_cast<unsigned>(n * 1'000'003 + m));
      g_mutant = buf.data();
      g_mutant_size = size;
      LLVMFuzzerTestOneInput(buf.data(), size);
      g_mutant = nullptr;
      ++ran;
    }
  }
  std::printf("%zu inputs replayed, %zu runs with mutants\n", files.size(), ran);
  return files.empty() ? 1 : 0;
}
