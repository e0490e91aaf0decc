// Server: one qrstore node as a process (qrstore-server), the QueCC-R shape of the paper: every
// node holds the whole table of its partition.
//   leader (row 0)  = ClientService -> LocalPlanner -> Pipeline, and each planned slice is
//                     encoded and handed to ReplicateData (one stream per planner); commit and
//                     replies wait until every slice of the batch is replicated (Invariant 1),
//                     executors start at once (replication.mode=speculative) or after it (sync).
//   follower (1..rf) = ReceiveData -> FollowerFeed (decode + validate) -> Pipeline; it never
//                     plans, answers transaction requests with "not leader", and reports its
//                     state digest after every batch to the leader, which compares.
// The replication backend (none | raft | zookeeper) is one config key; its member list, roles
// and ids are derived from cluster.nodes (cluster/config/topology.h).
//
// Failure: a replication failure on the leader (not leader any more, backend stopped) stops
// admitting transactions and answers every unacknowledged one with `failed`; nothing
// un-replicated is ever acknowledged. A bad slice on a follower stops its apply with an error
// naming batch and planner. Either way the process keeps serving status (state "failed") until
// it is told to stop.
//
// Shutdown (SIGTERM, see server_main.cc): a leader stops admitting, finishes the batches in
// flight, replies, replicates an end marker on every stream, waits (bounded) for its connected
// followers to apply everything, and stops; a follower waits (bounded) for the end marker and
// the last batch. With server.dump_state_dir each writes <dir>/<node>.tsv.
//
// Threads: Create/Start/Shutdown from the main thread; everything else runs on the pieces'
// own named threads plus "watch" (acts on replication failures, which callbacks only report).
#pragma once

#include <memory>
#include <string>

#include "cluster/port/protocol.h"
#include "common/config.h"
#include "common/status.h"

namespace qrstore::cluster {

class ServerImpl;

// How this process came to run the node (qrstore-server passes it on across its re-executions).
struct ServerLaunch {
  // > 0: the process re-executed itself to rejoin its group after it was deposed (this many
  // times so far). Such a start never leads a fresh cluster: it follows from its newest
  // checkpoint (or the initial table) and the group's log, and its status says `rejoining`
  // until its leader sees it in step.
  uint32_t rejoins = 0;
};

class Server {
 public:
  // Validates the config for node `node` (errors name the keys), loads the initial table.
  // Binds nothing and starts nothing.
  static Result<std::unique_ptr<Server>> Create(const Config& config, const std::string& node,
                                                const ServerLaunch& launch = {});
  ~Server();

  // Binds the client port, starts replication (a leader waits to lead), the pipeline and the
  // front-end. Errors name the key at fault (a port in use, a backend that cannot start).
  Status Start();
  // "qrstore-server ready: ..." (one line, for scripts).
  std::string ReadyLine() const;
  // One line of counters for the periodic stats log.
  std::string StatsLine() const;
  proto::NodeStatus NodeStatusNow() const;
  // The clean stop described above. OK when everything committed was answered (and, on a
  // follower, the leader's end was reached) and the dump (if asked) was written.
  Status Shutdown();
  // OK, or why this node stopped serving (replication failure, bad slice).
  Status health() const;
  // Non-OK once the node must stop by itself: it was deposed (*deposed true: it rejoins by
  // re-executing itself, or with server.rejoin_when_deposed false exits kExitDeposed), or the
  // backend made it leader and it could not take over (exit 1).
  Status fail_stop(bool* deposed) const;
  // fail_stop's reason is a restart: the node fetched a peer's checkpoint to load (server_main
  // re-executes itself after Shutdown).
  bool restart_requested() const;

 private:
  explicit Server(std::unique_ptr<ServerImpl> impl);
  std::unique_ptr<ServerImpl> impl_;
};

}  // namespace qrstore::cluster
