// The Catch2 test runner (its main and implementation), compiled here with the project's flags
// instead of linking Debian's prebuilt libCatch2WithMain.a. In a sanitizer build it is
// instrumented like everything else: the prebuilt library carries uninstrumented out-of-line
// copies of inline library code (std::shared_ptr's release, for one), and when the linker picks
// those for the whole test binary ThreadSanitizer no longer sees the reference counts' atomics
// and reports races that are not there.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
