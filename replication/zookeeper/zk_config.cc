// The replication.zookeeper.* config keys (declared in zk_replicator.h), apart from the backend
// itself so a program that only reads configs (the client) does not link ZooKeeper.
#include <string>

#include "replication/zookeeper/zk_layout.h"
#include "replication/zookeeper/zk_replicator.h"

namespace qrstore::replication::zookeeper {

void AddConfigKeys(ConfigSchema* schema) {
  schema->AddString("replication.zookeeper.hosts", "",
                    "ZooKeeper connect string host:port[,host:port...]; empty = $QRSTORE_ZK_HOSTS");
  schema->AddString("replication.zookeeper.root", "/qrstore", "znode root of this deployment's streams");
  schema->AddInt("replication.zookeeper.session_timeout_ms", 3000, 1000, 600000,
                 "ZooKeeper session timeout (the server clamps it to [2, 20] ticks): a killed or cut-off leader is "
                 "replaced about this long after it went silent; too short for a busy host and a live leader that "
                 "misses its pings is deposed (it then rejoins as a follower: docs/reliability.md)");
  schema->AddInt("replication.zookeeper.connect_timeout_ms", 15000, 100, 600000,
                 "Start() fails with kUnavailable if no session is established by then");
  schema->AddInt("replication.zookeeper.chunk_bytes", 900 * 1024, 1,
                 static_cast<int64_t>(kMaxChunkBytes - kMarkerHeaderBytes),
                 "payloads above this are split into chunks (ZooKeeper's znode limit is ~1 MB)");
  schema->AddInt("replication.zookeeper.max_inflight", 256, 1, 65536,
                 "outstanding asynchronous ZooKeeper requests per Replicator");
  schema->AddInt("replication.zookeeper.max_inflight_bytes", 8ll << 20, 1, 1ll << 40,
                 "payload bytes of outstanding requests per Replicator (ZooKeeper buffers them in its heap)");
  schema->AddInt("replication.zookeeper.op_deadline_ms", 30000, 100, 3600000,
                 "leader: a batch not durable after this long fails with kUnavailable");
  schema->AddInt("replication.zookeeper.followers", 0, 0, 1000,
                 "leader: followers in the group (F; F+1 members). Consumed batches are deleted once F followers "
                 "registered progress; past retain_bytes the leader waits only for the (F+1)/2 most advanced live "
                 "followers (a majority), and slower or dead ones lose what they have not read "
                 "(0 = wait for nobody, keep all below retain_bytes)");
  schema->AddString("replication.zookeeper.follower_id", "",
                    "the member id ([A-Za-z0-9._-]), on every member of the group, leader included: names its "
                    "progress and live znodes and is its election znode's data (Leader().id); empty = auto (not "
                    "stable across restarts)");
  schema->AddBool("replication.zookeeper.election", true,
                  "leader election per group: a follower takes over when the leader's session ends (a fresh group "
                  "is led by replication.role=leader); every leader write is fenced by the group's epoch. false: "
                  "roles fixed by replication.role, no failover (so also with followers 0: nobody to elect)");
  schema->AddInt("replication.zookeeper.retain_bytes", 256ll << 20, 0, 1ll << 40,
                 "leader: payload bytes kept in ZooKeeper at most (its servers hold all data in memory); past it "
                 "the oldest batches the (followers+1)/2 most advanced live followers have read are deleted (any, "
                 "with none live or followers 0), and the leader starts no new batch while they have not read "
                 "enough (never waiting for a dead follower). A follower that needs a deleted batch is stranded "
                 "(with server.checkpoint_dir it fetches the leader's checkpoint: keep more than two checkpoint "
                 "intervals of batches here). 0 = no limit");
  schema->AddInt("replication.zookeeper.cleanup_interval_ms", 100, 10, 600000,
                 "leader: how often consumed batches are looked for");
  schema->AddInt("replication.zookeeper.progress_interval_ms", 200, 1, 600000,
                 "follower: at most one progress write per interval (each stalls the session's reads)");
  schema->AddInt("replication.zookeeper.poll_ms", 1000, 10, 600000,
                 "follower: re-check of awaited batches (safety net behind watches)");
}

}  // namespace qrstore::replication::zookeeper
