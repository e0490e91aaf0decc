// RowNode (cluster/row/row_node.h) with followers: Rules 1 and 2 of docs/partitioned-rows.md
// (sections 9.2 and 9.4). Rule 1: Two leaders of a 2-partition row on loopback, each with a stand-in for its replication
// group that records what it is asked to replicate and confirms only when the test says so. A
// home's whole home slice (a RowHomeBundle: every partition's part) goes to its own group first,
// and its peer gets its part only after that group confirmed it: the peer's group is never asked
// to replicate a part whose home slice its home's group does not hold.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cluster/follow/follower_feed.h"
#include "cluster/row/row_feed.h"
#include "cluster/row/row_messages.h"
#include "cluster/row/row_node.h"
#include "common/clock.h"
#include "replication/none/none_replicator.h"
#include "storage/table.h"
#include "tests/unit/cluster/row/loopback_addresses.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using namespace qrstore::cluster;
using storage::KeyMapper;

namespace {

constexpr uint64_t kKeys = 200;
const storage::RecordLayout kLayout{4, 8};


// What one node asked its group to replicate, in order: (batch, slice, bytes).
struct Group {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::tuple<uint64_t, uint32_t, std::string>> asked;
  template <typename P>
  bool WaitFor(P pred, int seconds = 10) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(seconds), [&] { return pred(asked); });
  }
};

// Node p of a row over `parts`, one planner per home, executor ranges `ranges`, small batches.
RowNodeOptions NodeOptions(uint32_t p, const std::vector<std::string>& addrs, const KeyMapper& parts,
                           const KeyMapper& ranges) {
  RowNodeOptions o;
  o.partition = p;
  o.peer_addresses = addrs;
  o.partitions = parts;
  o.pipeline.planners = 1;
  o.pipeline.executors = ranges.buckets();
  o.pipeline.batches_in_flight = 2;
  o.pipeline.ranges = ranges;
  o.pipeline.track_digest = true;
  o.planner.batch_txns = 60;
  o.planner.batch_timeout_ns = 2'000'000;
  o.planner.planners = 1;
  o.record_bytes = kLayout.size();
  o.connect_timeout_ms = 10'000;
  return o;
}

// A row follower's feed of partition p from its group (`repl`) into `node`, as RowServer
// builds it: the last of `streams` streams holds the batch-end records; bundles are kept.
std::unique_ptr<FollowerFeed> StartRowFeed(RowNode* node, replication::Replicator* repl, uint32_t p, uint32_t streams,
                                           const KeyMapper& parts, const KeyMapper& ranges, bool input = false,
                                           bool writes = false) {
  FollowerFeedOptions fo;
  fo.planners = streams;
  fo.ranges = ranges;
  fo.window = 4;
  fo.row = true;
  fo.place = planner::RowPlace{parts, p};
  fo.batch_end_stream = true;
  fo.record_bytes = kLayout.size();
  SetRowFeedReaders(&fo, node, input, writes);
  auto feed = std::make_unique<FollowerFeed>(fo, node->pipeline(), repl, [node](uint64_t end) { node->SetEnd(end); });
  REQUIRE(feed->Start().ok());
  return feed;
}

// Submits every txn to a row home, waiting while its queue is full (bounded: 20 s); how many went.
size_t SubmitAll(RowNode* node, std::vector<storage::Txn> txns) {
  size_t sent = 0;
  const int64_t deadline = NowNanos() + 20'000'000'000;
  while (sent < txns.size() && NowNanos() < deadline) {
    std::vector<storage::Txn> rest(txns.begin() + static_cast<std::ptrdiff_t>(sent), txns.end());
    const size_t n = node->SubmitMany(rest);
    sent += n;
    if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return sent;
}

// Txns for the row tests: cross-partition dependencies, logic aborts and debits.
testing::GenOptions MixedTxns() {
  testing::GenOptions g;
  g.keys = kKeys;
  g.max_ops = 6;
  g.dep_per_100 = 25;
  g.abort_per_100 = 4;
  g.fire_per_10k = 1500;
  g.debit_per_100 = 20;
  return g;
}

// Starts two row leaders at once (each waits for the other to dial in).
void StartPair(RowNode* a, RowNode* b) {
  Status sb;
  std::thread t([&] { sb = b->Start(); });
  const Status sa = a->Start();
  t.join();
  REQUIRE(sa.ok());
  REQUIRE(sb.ok());
}

// Runs f when the test ends, also when a REQUIRE ends it early.
struct AtExit {
  std::function<void()> f;
  ~AtExit() { f(); }
};

// A RowNode's failure handler that records into m->failures under m->mu.
template <typename M>
std::function<void(const Status&)> RecordFailures(M* m) {
  return [m](const Status& st) {
    std::lock_guard<std::mutex> lk(m->mu);
    m->failures.push_back(st);
  };
}

struct Leader {
  Group group;
  std::unique_ptr<storage::Table> table;
  std::unique_ptr<RowNode> node;
  std::vector<Status> failures;
  std::mutex fmu;
};

}  // namespace

TEST_CASE("row node: a home slice goes to its home's group first, its peer gets its part only once that is confirmed",
          "[row]") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, kKeys);  // partition 0: keys 0..99, 1: 100..199
  const KeyMapper ranges = KeyMapper::Within(parts, 1);
  const std::vector<std::string> addrs = testing::LoopbackAddresses(2);
  std::vector<std::unique_ptr<Leader>> leaders;
  for (uint32_t p = 0; p < 2; ++p) {
    auto l = std::make_unique<Leader>();
    l->table = std::make_unique<storage::Table>(kLayout, kKeys);
    const std::string zero(kLayout.size(), '\0');
    for (uint64_t k = 0; k < kKeys; ++k) {
      if (parts.Of(k) == p) REQUIRE(l->table->Insert(k, zero.data()).ok());
    }
    RowNodeOptions o = NodeOptions(p, addrs, parts, ranges);
    Group* g = &l->group;
    o.replicate = [g](uint64_t b, uint32_t s, std::string bytes) {
      std::lock_guard<std::mutex> lk(g->mu);
      g->asked.emplace_back(b, s, std::move(bytes));
      g->cv.notify_all();
    };
    Leader* raw = l.get();
    l->node = std::make_unique<RowNode>(
        o, l->table.get(), [](const std::vector<commit::TxnOutcome>&) {}, [](const commit::BatchInfo&) {},
        [raw](const Status& s) {
          std::lock_guard<std::mutex> lk(raw->fmu);
          raw->failures.push_back(s);
        },
        [](uint32_t) {});
    leaders.push_back(std::move(l));
  }
  // Both must listen before either dials: start them together.
  std::vector<Status> started(2);
  {
    std::thread t1([&] { started[1] = leaders[1]->node->Start(); });
    started[0] = leaders[0]->node->Start();
    t1.join();
  }
  REQUIRE(started[0].ok());
  REQUIRE(started[1].ok());

  // Home 0 gets a transaction that writes on both partitions: its home slice has a part for 1.
  std::vector<storage::Txn> txns(1);
  txns[0].id = 1;
  txns[0].ops = {{storage::OpKind::kUpdate, 5, 0, 0}, {storage::OpKind::kUpdate, 150, 0, 0}};
  REQUIRE(leaders[0]->node->SubmitMany(txns) == 1);

  // Home 0's group is asked for the whole home slice of some batch b: a bundle with both parts.
  uint64_t b = 0;
  REQUIRE(leaders[0]->group.WaitFor([&](const auto& asked) {
    for (const auto& [batch, slice, bytes] : asked) {
      RowHomeBundle hb;
      if (slice != 0 || !DecodeRowMessage(bytes, &hb).ok() || hb.parts.size() != 2) continue;
      planner::PlannedSlice part;
      if (planner::DecodeSlice(hb.parts[1], &part).ok() && !part.txns.empty()) {
        b = batch;
        return true;
      }
    }
    return false;
  }));
  // Nothing is confirmed yet: partition 1 never receives home 0's part of batch b, so its group
  // is never asked to replicate slice 0 (home 0's stream) of b, however long we wait.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    std::lock_guard<std::mutex> lk(leaders[1]->group.mu);
    for (const auto& [batch, slice, bytes] : leaders[1]->group.asked) {
      INFO("partition 1's group was asked for batch " << batch << ", slice " << slice);
      CHECK_FALSE((slice == 0 && batch >= b));
    }
  }
  // Home 0's group confirms every home slice it was asked for, in order: the parts leave, and
  // partition 1's group is asked for home 0's part of b, byte for byte the bundle's part.
  std::string expected_part;
  {
    std::lock_guard<std::mutex> lk(leaders[0]->group.mu);
    for (const auto& [batch, slice, bytes] : leaders[0]->group.asked) {
      if (slice != 0 || batch > b) continue;
      if (batch == b) {
        RowHomeBundle hb;
        REQUIRE(DecodeRowMessage(bytes, &hb).ok());
        expected_part = hb.parts[1];
      }
    }
  }
  for (uint64_t x = 0; x <= b; ++x) leaders[0]->node->MarkReplicated(x, 0);
  REQUIRE(leaders[1]->group.WaitFor([&](const auto& asked) {
    for (const auto& [batch, slice, bytes] : asked) {
      if (batch == b && slice == 0) return bytes == expected_part;
    }
    return false;
  }));
  {
    std::lock_guard<std::mutex> lk(leaders[0]->fmu);
    CHECK(leaders[0]->failures.empty());
  }
  for (auto& l : leaders) l->node->Stop();
}

TEST_CASE("row node, Rule 2: each follower replays its partition from its group's log alone, batch-end records "
          "included", "[row]") {
  // Two leaders of a 2-partition row, each replicating to its group through the in-process
  // `none` hub; each partition's follower is a RowNode without row peers fed by a FollowerFeed
  // over that hub. Txns with cross-partition dependencies, logic aborts and debits: a follower
  // can reach its leader's state only with the values its leader received and its abort results,
  // which only the batch-end records carry. With `plain`, txns without dependencies or aborts:
  // every record is empty, and a follower commits batches before their records arrive (which
  // must not trouble it). With `corrupt`, partition 1's records name the wrong partition: its
  // follower stops, naming the record, and the leaders do not care. With `input`
  // (replication.point = input), the groups log every home slice as its input and the followers
  // plan it themselves: the parts a follower keeps for a successor's re-send are then its own
  // planning's, and must equal what its leader sent byte for byte (the parts and the input).
  // With `writes` (replication.point = writes), each batch's record is the leader's writes entry:
  // the followers execute nothing, install the images, take the fates, and keep the values and
  // reports the entry says the leader sent, which must equal what it did send.
  const bool plain = GENERATE(false, true);
  const bool corrupt = GENERATE(false, true);
  const int point = GENERATE(0, 1, 2);  // plan, input, writes
  const bool input = point == 1;
  const bool writes = point == 2;
  CAPTURE(plain, corrupt, point);
  constexpr uint32_t kParts = 2;
  constexpr uint32_t streams = kParts + 1;  // one planner per home, then the records
  const KeyMapper parts(KeyMapper::Kind::kHash, kParts, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  const std::vector<std::string> addrs = testing::LoopbackAddresses(kParts);
  struct Member {
    std::unique_ptr<replication::none::NoneReplicator> repl;
    std::unique_ptr<storage::Table> table;
    std::unique_ptr<RowNode> node;
    std::unique_ptr<FollowerFeed> feed;  // followers
    std::mutex mu;
    std::vector<Status> failures;  // guarded by mu
  };
  std::vector<std::unique_ptr<Member>> leaders, followers;
  // Stops everything in an order that cannot hang, also when a REQUIRE ends the test early: a
  // follower's node (its pipeline may wait for a record that never comes) before its feed, the
  // leaders, then the hubs' replicators (late callbacks reach the feeds until then).
  auto stop_all = [&] {
    for (auto* v : {&followers, &followers, &leaders}) {
      for (auto& m : *v) {
        if (m->node) m->node->Stop();  // idempotent: the followers' second pass is a no-op
        if (m->feed) m->feed->Stop();
      }
    }
    for (auto* v : {&followers, &leaders}) {
      for (auto& m : *v) m->repl->Stop();
    }
  };
  AtExit guard{stop_all};
  auto on_failure = [](Member* m) { return RecordFailures(m); };
  const std::string hub = "rule2-" + std::to_string(plain) + std::to_string(corrupt) + std::to_string(point) + "-p";
  for (uint32_t p = 0; p < kParts; ++p) {
    for (bool leader : {true, false}) {
      auto m = std::make_unique<Member>();
      replication::none::NoneOptions no;
      no.leader = leader;
      no.planners = streams;
      no.hub = hub + std::to_string(p);
      m->repl = std::make_unique<replication::none::NoneReplicator>(no);
      REQUIRE(m->repl->Start().ok());
      m->table = std::make_unique<storage::Table>(kLayout, kKeys);
      testing::LoadTable(m->table.get(), kKeys, 1000);
      RowNodeOptions o = NodeOptions(p, addrs, parts, ranges);
      o.replicate_input = input;
      o.replicate_writes = writes;
      Member* raw = m.get();
      if (leader) {
        o.keep_all_sent = !plain;  // the follower's copy checked with dependencies, the retention's trim without
        o.replicate = [raw, p, corrupt, plain, input, writes](uint64_t b, uint32_t s, std::string bytes) {
          // (This runs on the leader's threads: failures are recorded, and checked on the test's
          // own thread, where Catch's assertions belong.)
          if (input && s + 1 != streams) {
            // Under input every stream but the records' logs home inputs, never planned parts.
            const Result<RowMsgKind> kind = PeekRowMessage(bytes);
            if (!kind.ok() || kind.value() != RowMsgKind::kHomeInput) {
              std::lock_guard<std::mutex> lk(raw->mu);
              raw->failures.push_back(Status::Corruption("stream " + std::to_string(s) + " logged no home input"));
            }
          }
          if (writes && s + 1 == streams) {
            // Under writes the records' stream logs writes entries, never plain records.
            const Result<RowMsgKind> kind = PeekRowMessage(bytes);
            if (!kind.ok() || kind.value() != RowMsgKind::kBatchWrites) {
              std::lock_guard<std::mutex> lk(raw->mu);
              raw->failures.push_back(Status::Corruption("batch " + std::to_string(b) + " logged no writes entry"));
            }
          }
          if (corrupt && p == 1 && s + 1 == streams) {
            RowBatchEnd rec;
            RowBatchWrites w;
            if (Status d = writes ? DecodeRowMessage(bytes, &w) : DecodeRowMessage(bytes, &rec); !d.ok()) {
              std::lock_guard<std::mutex> lk(raw->mu);
              raw->failures.push_back(d);
            }
            if (writes) {
              // (What it sent goes too: the entry's decoder would refuse its reports' partition first.)
              w.end.partition = 0;
              w.sent.clear();
              w.reports.clear();
              bytes = EncodeRowMessage(w);
            } else {
              rec.partition = 0;
              bytes = EncodeRowMessage(rec);
            }
          }
          // An empty record lets its batch commit before it is handed over: slowed down here, the
          // leader's WaitFinished must still not return before the last one is (the end markers
          // below would overtake it on its stream).
          if (plain && s + 1 == streams) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          // The none hub confirms inline.
          raw->repl->ReplicateData(replication::ReplicateMeta{0, s, b}, std::move(bytes),
                                   [raw, b, s](const replication::ReplicateMeta&, Status st) {
                                     if (!st.ok()) {
                                       std::lock_guard<std::mutex> lk(raw->mu);
                                       raw->failures.push_back(st);
                                     }
                                     raw->node->MarkReplicated(b, s);
                                   });
        };
      } else {
        o.follower = true;
      }
      m->node = std::make_unique<RowNode>(
          o, m->table.get(), [](const std::vector<commit::TxnOutcome>&) {}, [](const commit::BatchInfo&) {},
          on_failure(raw), [](uint32_t) {});
      (leader ? leaders : followers).push_back(std::move(m));
    }
  }
  StartPair(leaders[0]->node.get(), leaders[1]->node.get());
  for (uint32_t p = 0; p < kParts; ++p) {
    Member* f = followers[p].get();
    REQUIRE(f->node->Start().ok());
    f->feed = StartRowFeed(f->node.get(), f->repl.get(), p, streams, parts, ranges, input, writes);
  }

  testing::GenOptions g = MixedTxns();
  if (plain) g.dep_per_100 = g.abort_per_100 = g.debit_per_100 = 0;
  for (uint32_t h = 0; h < kParts; ++h) {
    std::vector<storage::Txn> txns = testing::RandomTxns(31 + h, 600, g);
    for (auto& t : txns) t.id += h * 1'000'000;
    REQUIRE(SubmitAll(leaders[h]->node.get(), std::move(txns)) == 600);
  }
  for (auto& l : leaders) l->node->CloseInput();
  for (auto& l : leaders) REQUIRE(l->node->WaitFinished(30'000).ok());
  for (auto& l : leaders) {
    std::lock_guard<std::mutex> lk(l->mu);
    std::string why;
    for (const Status& f : l->failures) why += f.ToString() + "; ";
    INFO(why);
    REQUIRE(l->failures.empty());  // no batch failed to replicate, no record failed to decode
  }
  uint64_t end = 0;
  REQUIRE(leaders[0]->node->row_end_known(&end));
  // What a leader's clean stop replicates (cluster/node/server_stop.cc): the end marker on every stream.
  for (auto& l : leaders) {
    for (uint32_t s = 0; s < streams; ++s) {
      l->repl->ReplicateData(replication::ReplicateMeta{0, s, end}, EncodeEndMarker(end),
                             [](const replication::ReplicateMeta&, Status st) { REQUIRE(st.ok()); });
    }
  }
  // Failover's retention (docs/partitioned-rows.md 9.5): each leader keeps what it sent its peer
  // for a re-send to the peer's successor only until the peer confirms those batches durable
  // (kDurable, every batches_in_flight batches): at the end, only the last few batches' frames.
  const uint64_t bif = 2;  // NodeOptions' batches_in_flight
  for (uint32_t p = 0; p < kParts; ++p) {
    INFO("leader " << p);
    const uint32_t q = 1 - p;
    const int64_t deadline = NowNanos() + 10'000'000'000;
    // An empty record may be confirmed after its batch committed: durable catches up.
    while ((leaders[p]->node->durable_batch() < end || (plain && leaders[p]->node->retained_from(q) + bif < end)) &&
           NowNanos() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    CHECK(leaders[p]->node->durable_batch() == end);
    if (plain) {
      CHECK(leaders[p]->node->retained_from(q) + bif >= end);
      CHECK(leaders[p]->node->retained_bytes(q) < leaders[p]->node->row_stats().bytes_sent);
    }
  }
  uint64_t records = 0;
  for (auto& l : leaders) records += l->node->row_stats().batch_end_records;
  // Values crossed the row, or votes fired; under writes every batch has its entry.
  CHECK((plain && !writes ? records == 0 : records > 0));
  for (uint32_t p = 0; p < kParts; ++p) {
    INFO("partition " << p);
    Member& f = *followers[p];
    if (corrupt && p == 1) {
      const int64_t deadline = NowNanos() + 10'000'000'000;
      while (f.feed->health().ok() && NowNanos() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const Status st = f.feed->health();
      REQUIRE_FALSE(st.ok());
      CHECK(st.message().find("bad batch-end record of batch 0") != std::string::npos);
      CHECK(st.message().find("partition 0") != std::string::npos);
      continue;
    }
    REQUIRE(f.node->WaitFinished(30'000).ok());
    CHECK(f.node->Stats().committed_batches == end);
    // What a successor would owe its peers (section 9.5): the follower kept the values and the
    // reports its run produced for the peer, the same as its leader sent for the batches both
    // still hold (the leader's values may be split into other messages: compared value by value).
    // With dependencies the leader keeps all it sent (keep_all_sent), so the follower's last
    // batches are compared; with `plain` the leader's retention is trimmed to about nothing.
    if (!plain) {
      const uint32_t q = 1 - p;
      const uint64_t from = leaders[p]->node->retained_from(q);
      auto sent = [&](const RowNode& n) {
        std::set<std::tuple<uint64_t, uint32_t, uint32_t, int64_t>> values;
        std::map<std::pair<uint64_t, uint32_t>, std::string> reports;
        std::map<std::pair<uint64_t, uint32_t>, std::string> parts;
        std::map<std::pair<uint64_t, uint32_t>, std::string> votes;  // (batch, round)
        for (const auto& [b, frame] : n.RetainedFrames(q)) {
          if (b < from) continue;
          const RowMsgKind kind = PeekRowMessage(frame).value();
          if (kind == RowMsgKind::kDepValues) {
            RowDepValues m;
            REQUIRE(DecodeRowMessage(frame, &m).ok());
            for (const RowDepValue& v : m.values) values.emplace(m.batch, m.slice, v.slot, v.value);
          } else if (kind == RowMsgKind::kSubSlice) {
            RowSubSlice m;
            REQUIRE(DecodeRowMessage(frame, &m).ok());
            parts.emplace(std::make_pair(m.batch, m.slice), frame);
          } else if (kind == RowMsgKind::kReport) {
            RowReport m;
            REQUIRE(DecodeRowMessage(frame, &m).ok());
            reports.emplace(std::make_pair(m.batch, m.slice), frame);
          } else if (kind == RowMsgKind::kVotes) {
            RowVotes m;
            REQUIRE(DecodeRowMessage(frame, &m).ok());
            votes.emplace(std::make_pair(m.batch, m.round), frame);
          }
        }
        return std::make_tuple(values, reports, parts, votes);
      };
      const auto by_leader = sent(*leaders[p]->node);
      const auto by_follower = sent(*f.node);
      CHECK(std::get<0>(by_follower) == std::get<0>(by_leader));
      CHECK(std::get<1>(by_follower) == std::get<1>(by_leader));
      CHECK(std::get<2>(by_follower) == std::get<2>(by_leader));  // its home's parts, byte for byte
      // Its leader's votes, every round, byte for byte (from the batch-end records): a peer's
      // successor that runs a batch again needs them from whoever leads this partition then.
      CHECK(std::get<3>(by_follower) == std::get<3>(by_leader));
      CHECK_FALSE(std::get<3>(by_leader).empty());
      CHECK_FALSE(std::get<0>(by_leader).empty());  // everything the leader sent: values, reports, parts
      CHECK_FALSE(std::get<1>(by_leader).empty());
      CHECK_FALSE(std::get<2>(by_leader).empty());
    }
    CHECK(f.node->Stats().last_digest == leaders[p]->node->Stats().last_digest);
    // Its leader's fates (under writes taken from the entries, cascades included).
    CHECK(f.node->Stats().committed == leaders[p]->node->Stats().committed);
    CHECK(f.node->Stats().aborted == leaders[p]->node->Stats().aborted);
    if (!plain) CHECK(leaders[p]->node->Stats().aborted > 0);
    for (storage::Key k = 0; k < kKeys; ++k) {
      if (parts.Of(k) != p) continue;
      INFO("key " << k);
      REQUIRE(std::memcmp(f.table->Find(k), leaders[p]->table->Find(k), kLayout.size()) == 0);
    }
  }
  for (auto& l : leaders) {
    std::lock_guard<std::mutex> lk(l->mu);
    CHECK(l->failures.empty());
  }
}

// One failover case: a row of `parts` partitions whose leaders of `dead` stop abruptly (at once)
// once each committed `after` batches.
struct FailoverShape {
  uint32_t parts = 2;
  std::vector<uint32_t> dead;
  uint64_t after = 2;
};

TEST_CASE("row node, failover: partition leaders die mid-run (one, or two at once), their followers resume their "
          "places and the row goes on",
          "[row][failover]") {
  // docs/partitioned-rows.md 9.5. A row of 2 or 3 partitions, each with a leader and followers
  // over its `none` hub (its group); txns with cross-partition dependencies, aborts and debits.
  // The leaders of `dead` stop abruptly mid-run (their row connections close, their groups get
  // nothing more). Each one's follower F collects its group's log, stops its follower pipeline at
  // D and becomes the successor S (term 2, a new address) over the same table; the live leaders
  // waited, answer each resume, redial and go on; two successors started together resume with
  // each other (each answers the other's resume inside its own handshake, and re-sends the votes
  // its predecessor sent, which it kept from its group's batch-end records). Then more txns at
  // every home, then the row's end. Checks: every leader answers each txn submitted to it exactly
  // once; every other follower (fed from its group's log alone throughout: the dead leader's
  // entries, then the successor's) ends with its leader's digest and table.
  const FailoverShape shape = GENERATE(values<FailoverShape>({{2, {1}, 2},
                                                              {2, {1}, 6},
                                                              {2, {0}, 2},
                                                              {2, {0}, 6},
                                                              {3, {1}, 4},
                                                              {2, {0, 1}, 3},
                                                              {3, {0, 2}, 4}}));
  // With `input` the groups log home inputs (replication.point = input): the followers plan them,
  // and a successor seeds its inbox and its re-sends by planning its log's inputs.
  // With `writes` every group logs writes entries in place of its records: the followers install
  // them and execute nothing; a successor re-sends, from its group's entries, what its
  // predecessor sent (values, reports) for the batches it did not run itself.
  const int point = GENERATE(0, 1, 2);  // plan, input, writes
  const bool input = point == 1;
  const bool writes = point == 2;
  CAPTURE(point);
  const uint32_t nparts = shape.parts;
  std::vector<bool> is_dead(nparts, false);
  for (uint32_t p : shape.dead) is_dead[p] = true;
  INFO(nparts << " partitions, " << shape.dead.size() << " leader(s) dead, the first " << shape.dead[0]
              << ", after " << shape.after << " batches");
  static int run = 0;
  const std::string hub = "failover-" + std::to_string(run++) + "-p";
  const uint32_t streams = nparts + 1;
  const KeyMapper parts(KeyMapper::Kind::kHash, nparts, kKeys);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  std::vector<std::string> addrs = testing::LoopbackAddresses(nparts + shape.dead.size());
  const std::vector<std::string> successor_addresses(addrs.begin() + nparts, addrs.end());
  addrs.resize(nparts);
  struct Member {
    std::unique_ptr<replication::none::NoneReplicator> repl;
    std::unique_ptr<storage::Table> table;
    std::unique_ptr<RowNode> node;
    std::unique_ptr<FollowerFeed> feed;
    std::mutex mu;
    std::vector<Status> failures;                  // guarded by mu
    std::map<uint64_t, commit::TxnStatus> answered;  // guarded by mu: txn id -> fate (a leader's clients)
    uint64_t repeats = 0;                          // guarded by mu: a txn answered twice
  };
  // [partition]: leader, follower F (promoted where the leader dies), follower G (replays throughout).
  std::vector<std::unique_ptr<Member>> leaders, fs, gs;
  std::vector<std::unique_ptr<Member>> successors(nparts);  // [partition] where its leader died
  auto stop_all = [&] {
    std::vector<Member*> order;
    for (auto* v : {&fs, &gs, &successors, &leaders}) {
      for (auto& m : *v) {
        if (m) order.push_back(m.get());
      }
    }
    for (Member* m : order) {
      if (m->node) m->node->Stop();
      if (m->feed) m->feed->Stop();
    }
    for (Member* m : order) {
      if (m->repl) m->repl->Stop();
    }
  };
  AtExit guard{stop_all};
  auto on_failure = [](Member* m) { return RecordFailures(m); };
  auto sink = [](Member* m) {
    return [m](const std::vector<commit::TxnOutcome>& v) {
      std::lock_guard<std::mutex> lk(m->mu);
      for (const auto& o : v) {
        if (!m->answered.emplace(o.txn_id, o.status).second) ++m->repeats;
      }
    };
  };
  auto replicate_into = [](Member* m) {
    return [m](uint64_t b, uint32_t s, std::string bytes) {
      m->repl->ReplicateData(replication::ReplicateMeta{0, s, b}, std::move(bytes),
                             [m, b, s](const replication::ReplicateMeta&, Status st) {
                               if (st.ok()) m->node->MarkReplicated(b, s);
                             });
    };
  };
  auto new_repl = [&](uint32_t p, bool leader) {
    replication::none::NoneOptions no;
    no.leader = leader;
    no.planners = streams;
    no.hub = hub + std::to_string(p);
    auto r = std::make_unique<replication::none::NoneReplicator>(no);
    REQUIRE(r->Start().ok());
    return r;
  };
  // Starts nodes at once (each leader or successor waits for its peers).
  auto start_together = [](const std::vector<RowNode*>& nodes) {
    std::vector<Status> st(nodes.size());
    std::vector<std::thread> ts;
    for (size_t i = 0; i < nodes.size(); ++i) ts.emplace_back([&, i] { st[i] = nodes[i]->Start(); });
    for (auto& t : ts) t.join();
    for (size_t i = 0; i < nodes.size(); ++i) {
      INFO("node " << i << ": " << st[i].ToString());
      REQUIRE(st[i].ok());
    }
  };
  for (uint32_t p = 0; p < nparts; ++p) {
    for (int role = 0; role < 3; ++role) {  // leader, F, G
      auto m = std::make_unique<Member>();
      m->repl = new_repl(p, role == 0);
      m->table = std::make_unique<storage::Table>(kLayout, kKeys);
      testing::LoadTable(m->table.get(), kKeys, 1000);
      RowNodeOptions o = NodeOptions(p, addrs, parts, ranges);
      o.replicate_input = input;
      o.replicate_writes = writes;
      o.failover_timeout_ms = 30'000;
      o.term = 1;
      Member* raw = m.get();
      if (role == 0) {
        o.replicate = replicate_into(raw);
      } else {
        o.follower = true;
      }
      m->node = std::make_unique<RowNode>(o, m->table.get(), sink(raw), [](const commit::BatchInfo&) {},
                                          on_failure(raw), [](uint32_t) {});
      (role == 0 ? leaders : role == 1 ? fs : gs).push_back(std::move(m));
    }
  }
  {
    std::vector<RowNode*> ls;
    for (auto& l : leaders) ls.push_back(l->node.get());
    start_together(ls);
  }
  for (uint32_t p = 0; p < nparts; ++p) {
    for (auto* v : {&fs, &gs}) {
      Member* f = (*v)[p].get();
      REQUIRE(f->node->Start().ok());
      f->feed = StartRowFeed(f->node.get(), f->repl.get(), p, streams, parts, ranges, input, writes);
    }
  }
  const testing::GenOptions g = MixedTxns();
  auto submit = [&](RowNode* node, uint64_t seed, size_t n, uint64_t id_base) {
    std::vector<storage::Txn> txns = testing::RandomTxns(seed, n, g);
    for (auto& t : txns) t.id += id_base;
    return SubmitAll(node, std::move(txns));
  };
  auto wait_for = [](auto pred) {
    const int64_t deadline = NowNanos() + 20'000'000'000;
    while (!pred() && NowNanos() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return pred();
  };
  // Phase 1: every home busy; the dead partitions' leaders die once some batches committed there.
  for (uint32_t p = 0; p < nparts; ++p) REQUIRE(submit(leaders[p]->node.get(), 41 + p, 400, p * 10'000'000ull) == 400);
  for (uint32_t p : shape.dead) {
    REQUIRE(wait_for([&] { return leaders[p]->node->Stats().committed_batches >= shape.after; }));
  }
  for (uint32_t p : shape.dead) {
    leaders[p]->node->Stop();  // as a crash: its connections close, nothing more reaches its group
    leaders[p]->repl->Stop();
  }

  // Each dead partition's follower F becomes its successor S (what the server's promotion does).
  std::vector<RowNode*> starting;
  std::vector<uint64_t> ds;
  for (size_t i = 0; i < shape.dead.size(); ++i) {
    const uint32_t p = shape.dead[i];
    Member& f = *fs[p];
    std::vector<uint64_t> next(streams);
    for (uint32_t s = 0; s < streams; ++s) next[s] = f.repl->NextBatchId(0, s).value();
    uint64_t d = 0;
    std::vector<std::vector<std::string>> entries;
    REQUIRE(f.feed->CollectFrom(next, 10'000, &d, &entries).ok());
    REQUIRE(wait_for([&] { return f.node->Stats().committed_batches >= d; }));
    CHECK(f.node->Stats().committed_batches == d);
    ds.push_back(d);
    RowNodeOptions so = NodeOptions(p, addrs, parts, ranges);
    so.replicate_input = input;
    so.replicate_writes = writes;
    so.peer_addresses[p] = successor_addresses[i];
    // The other successors' addresses: what the server finds by the answering row port.
    for (size_t j = 0; j < shape.dead.size(); ++j) so.peer_addresses[shape.dead[j]] = successor_addresses[j];
    so.failover_timeout_ms = 30'000;
    so.term = 2;
    so.pipeline.first_batch = d;
    so.successor = true;
    so.resume.next = next;
    so.resume.entries = std::move(entries);
    for (uint32_t q = 0; q < nparts; ++q) so.resume.kept.push_back(f.node->RetainedFrames(q));
    f.node->Stop();
    f.feed->Stop();
    f.repl->CancelReceives(0);
    successors[p] = std::make_unique<Member>();
    Member* sraw = successors[p].get();
    sraw->repl = new_repl(p, /*leader=*/true);
    sraw->table = std::move(f.table);
    so.replicate = replicate_into(sraw);
    sraw->node = std::make_unique<RowNode>(so, sraw->table.get(), sink(sraw), [](const commit::BatchInfo&) {},
                                           on_failure(sraw), [](uint32_t) {});
    starting.push_back(sraw->node.get());
  }
  start_together(starting);
  std::string resumed_at;
  for (uint64_t d : ds) resumed_at += std::to_string(d) + " ";
  INFO("the successors resumed at batches " << resumed_at);

  // Phase 2: every home goes on; then the row ends.
  std::vector<Member*> leader_of(nparts);
  for (uint32_t p = 0; p < nparts; ++p) leader_of[p] = is_dead[p] ? successors[p].get() : leaders[p].get();
  for (uint32_t p = 0; p < nparts; ++p) {
    REQUIRE(submit(leader_of[p]->node.get(), 51 + p, 300, (10 + p) * 10'000'000ull) == 300);
  }
  for (Member* l : leader_of) l->node->CloseInput();
  for (Member* l : leader_of) REQUIRE(l->node->WaitFinished(30'000).ok());
  uint64_t end = 0;
  REQUIRE(leader_of[0]->node->row_end_known(&end));
  for (uint32_t p = 0; p < nparts; ++p) {
    INFO("the leader of partition " << p);
    // A live leader answered every successor's resume; a successor every other one's.
    CHECK(leader_of[p]->node->row_stats().resumes == shape.dead.size() - (is_dead[p] ? 1 : 0));
    for (uint32_t s = 0; s < streams; ++s) {
      leader_of[p]->repl->ReplicateData(replication::ReplicateMeta{0, s, end}, EncodeEndMarker(end),
                                        [](const replication::ReplicateMeta&, Status st) { REQUIRE(st.ok()); });
    }
    std::lock_guard<std::mutex> lk(leader_of[p]->mu);
    // Every txn its clients submitted, once (a successor's: its own clients', not its predecessor's).
    CHECK(leader_of[p]->answered.size() == (is_dead[p] ? 300u : 700u));
    CHECK(leader_of[p]->repeats == 0);
    CHECK(leader_of[p]->failures.empty());
  }
  std::vector<std::pair<uint32_t, Member*>> replicas;
  for (uint32_t p = 0; p < nparts; ++p) {
    if (!is_dead[p]) replicas.emplace_back(p, fs[p].get());
    replicas.emplace_back(p, gs[p].get());
  }
  for (const auto& [p, r] : replicas) {
    INFO("a follower of partition " << p);
    REQUIRE(r->node->WaitFinished(30'000).ok());
    CHECK(r->node->Stats().committed_batches == end);
    CHECK(r->node->Stats().last_digest == leader_of[p]->node->Stats().last_digest);
    if (!is_dead[p]) {
      // Its leader's fates, batch for batch (a successor's count starts at its D).
      CHECK(r->node->Stats().committed == leader_of[p]->node->Stats().committed);
      CHECK(r->node->Stats().aborted == leader_of[p]->node->Stats().aborted);
    }
    for (storage::Key k = 0; k < kKeys; ++k) {
      if (parts.Of(k) != p) continue;
      INFO("key " << k);
      REQUIRE(std::memcmp(r->table->Find(k), leader_of[p]->table->Find(k), kLayout.size()) == 0);
    }
  }
}
