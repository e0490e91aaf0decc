// Exit codes shared by every qrstore program, so scripts and tests can tell a failed run from
// bad input without parsing messages.
//   0  success
//   1  the run failed (a verification, a peer, a replication error, an I/O error mid-run)
//   2  bad input: an unknown or malformed flag, an invalid config (file or --key=value), a
//      path that cannot be used; reported before any work starts
//   3  qrstore-server only: the node led its group and was deposed (another member leads now;
//      see cluster/node/server_impl.h). It stopped by itself, acknowledged nothing after losing
//      leadership, and wrote no dump: its table may hold speculative batches.
#pragma once

namespace qrstore {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitDeposed = 3;

}  // namespace qrstore
