// The end of a qrstore-client run: --verify's final check (the run's records against the serial
// reference executor, client/verify.h, and the leaders' final digests), and the summary on
// stdout (text, then with --json one JSON object as the last line) with the exit status it
// implies. Main thread, after Run::CheckReplicas.
#pragma once

#include <string>

#include "client/run.h"
#include "client/run_options.h"

namespace qrstore::client {

// --verify's outcome as the summary's "verify" line says it ("skipped" without --verify).
struct VerifyResult {
  std::string text = "skipped";
  bool failed = false;
};

// With --verify: replays the run's records on the serial reference and compares the final
// digests (asks the row's leaders again). Moves the connections' records out.
VerifyResult VerifyRun(const RunOptions& o, Run& run);

// Prints the summary (and --json's object) on stdout; returns the exit status: kExitOk, or
// kExitFailed naming why on stderr.
int Report(const RunOptions& o, const Run& run, const VerifyResult& verify);

}  // namespace qrstore::client
