// The replication.raft.* config keys (declared in raft_replicator.h), apart from the backend
// itself so a program that only reads configs (the client) does not link raft.
#include "replication/raft/raft_replicator.h"

namespace qrstore::replication::raft {

void AddConfigKeys(ConfigSchema* schema) {
  schema->AddList("replication.raft.members", "127.0.0.1:7400",
                  "host:port of every member, in node id order (member i = node id i)");
  schema->AddInt("replication.raft.node_id", 0, 0, 254, "this process's node id (index into members)");
  schema->AddInt("replication.raft.preferred_leader", 0, -1, 254,
                 "member that campaigns at once in a fresh cluster (-1: none, plain election)");
  schema->AddInt("replication.raft.tick_ms", 10, 1, 10000, "Raft tick length (ms)");
  schema->AddInt("replication.raft.election_ticks", 30, 2, 100000,
                 "election timeout in ticks (randomized in [n, 2n))");
  schema->AddInt("replication.raft.heartbeat_ticks", 1, 1, 100000, "leader heartbeat interval in ticks");
  schema->AddInt("replication.raft.catch_up_election_ticks", 100, 0, 100000,
                 "election timeout in ticks (randomized in [n, 2n)) of a member restarted with a log, until its "
                 "application has caught up with the group's commit: members busy replaying their logs side by "
                 "side do not depose a leader as busy as they are; 0 or below election_ticks: election_ticks");
  schema->AddBool("replication.raft.pre_vote", true,
                  "a member whose election timer fires first asks the others whether they would vote for it "
                  "(PreVote), so one that was cut off, paused or restarted cannot depose a working leader");
  schema->AddBool("replication.raft.vote_after_catch_up", false,
                  "this member neither votes nor campaigns until a leader caught its log up to that leader's "
                  "commit: for a member whose log did not survive a restart (log=memory), which may have "
                  "forgotten its votes; the server sets it when a memory-log member restarts from a checkpoint");
  schema->AddString("replication.raft.log", "memory", "Raft log storage", {"memory", "disk"});
  schema->AddString("replication.raft.dir", "", "directory of the disk log (required when log=disk)");
  schema->AddString("replication.raft.fsync", "batch",
                    "disk log sync: always (each write), batch (once per driver iteration), never",
                    {"always", "batch", "never"});
  schema->AddInt("replication.raft.segment_bytes", 64ll << 20, 4096, 1ll << 40, "disk log segment size");
  schema->AddBool("replication.raft.direct_io", true,
                  "disk log segments written with O_DIRECT (whole blocks, no page cache); buffered writes where "
                  "the file system refuses it");
  schema->AddInt("replication.raft.max_log_bytes", 256ll << 20, 1 << 20, 1ll << 40,
                 "log bytes retained per group (older applied entries are compacted)");
  schema->AddInt("replication.raft.max_append_bytes", 4ll << 20, 1024, 1ll << 30,
                 "entry bytes per AppendRequest (at least one entry is always sent)");
  schema->AddInt("replication.raft.max_inflight_appends", 64, 1, 100000, "pipelined AppendRequests per follower");
  schema->AddInt("replication.raft.max_uncommitted_bytes", 64ll << 20, 1024, 1ll << 40,
                 "proposed-but-uncommitted bytes a leader accepts before ReplicateData waits");
  schema->AddInt("replication.raft.max_lag_bytes", 128ll << 20, 1024, 1ll << 40,
                 "flow control: a leader stops proposing while the followers its quorum needs (the best placed "
                 "live ones) lack more than this many bytes (keeps them within the log budget, max_log_bytes); a "
                 "follower behind them never holds the group back and falls out of the log instead (stranded)");
  schema->AddInt("replication.raft.max_buffered_bytes", 256ll << 20, 1024, 1ll << 40,
                 "committed bytes per group waiting for ReceiveData before apply pauses");
  schema->AddString("replication.raft.transport", "nng",
                    "peer byte streams: nng (nng's stream API) or tcp (plain POSIX sockets); same framing",
                    {"nng", "tcp"});
  schema->AddInt("replication.raft.send_buffer_messages", 1024, 1, 1 << 20,
                 "messages queued per peer before sends to it are dropped (Raft resends)");
  schema->AddInt("replication.raft.seed", 1, 0, INT64_MAX, "seed of the election timer randomization");
  schema->AddInt("replication.raft.stats_interval_ms", 10000, 0, 1 << 30, "periodic stats log line (0: off)");
  schema->AddString("replication.raft.test_isolate_file", "",
                    "tests: while the file <this>.<node_id> exists, this member drops every message to and from "
                    "its peers (cut off from them; clients still reach it); empty: off");
}

}  // namespace qrstore::replication::raft
