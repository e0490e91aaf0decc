// VerifyClientRun over synthetic runs: a ground truth is built by interleaving two connections'
// generated txns in a fixed pattern and running them serially; the records a correct server
// would report pass, and each kind of wrong report is named.
#include <catch2/catch.hpp>

#include <algorithm>

#include "client/verify.h"
#include "cluster/port/protocol.h"
#include "storage/table.h"
#include "workloads/reference_executor.h"

using namespace qrstore;
using namespace qrstore::client;
using cluster::proto::ResultCode;

namespace {

workloads::WorkloadOptions Options() {
  workloads::WorkloadOptions o;
  o.ycsb.records = 400;
  o.ycsb.fields = 2;
  o.ycsb.field_bytes = 16;
  o.ycsb.ops_per_txn = 5;
  o.ycsb.write_ratio = 0.5;
  o.ycsb.abort_ratio = 0.3;
  o.ycsb.dep_ratio = 0.2;
  return o;
}

struct Truth {
  std::vector<ClientTxnRecord> records;  // in planned order
  std::vector<uint64_t> sent;
  uint64_t digest = 0;
  uint64_t committed = 0, aborted = 0;
};

// Connection 0 sends 2 txns, then connection 1 sends 3, repeatedly, `rounds` times; positions
// are (k / 10, planner 0, k % 10) in that order.
Truth MakeTruth(uint64_t seed, int rounds) {
  const workloads::WorkloadOptions o = Options();
  Truth t;
  t.sent = {0, 0};
  std::vector<std::unique_ptr<workloads::Generator>> gens;
  for (uint32_t c = 0; c < 2; ++c) gens.push_back(std::move(workloads::MakeGenerator(o, ConnectionSeed(seed, c))).value());
  workloads::ReferenceExecutor ref(o.Layout(), o.RecordCount());
  REQUIRE(workloads::LoadTable(o, ref.mutable_table()).ok());
  uint64_t k = 0;
  for (int r = 0; r < rounds; ++r) {
    for (uint16_t c : {0, 0, 1, 1, 1}) {
      std::string reads;
      auto applied = ref.Apply(gens[c]->Next(), true, &reads);
      REQUIRE(applied.ok());
      ClientTxnRecord rec;
      rec.connection = c;
      rec.seq = t.sent[c]++;
      rec.batch = k / 10;
      rec.index = static_cast<uint32_t>(k % 10);
      rec.code = static_cast<uint8_t>(applied.value() ? ResultCode::kCommitted : ResultCode::kAbortedLogic);
      rec.reads_hash = applied.value() ? ReadsHash(reads) : 0;
      (applied.value() ? t.committed : t.aborted)++;
      t.records.push_back(rec);
      ++k;
    }
  }
  t.digest = ref.table().Digest();
  return t;
}

Status Verify(Truth t, ClientVerifyReport* report = nullptr) {
  ClientVerifyReport r;
  Status s = VerifyClientRun(Options(), 21, t.sent, &t.records, &r);
  if (report) *report = r;
  return s;
}

// The record of connection c's txn #seq.
ClientTxnRecord& Rec(Truth& t, uint16_t c, uint64_t seq) {
  auto it = std::find_if(t.records.begin(), t.records.end(),
                         [&](const ClientTxnRecord& r) { return r.connection == c && r.seq == seq; });
  REQUIRE(it != t.records.end());
  return *it;
}

}  // namespace

TEST_CASE("client verify: connection seeds") {
  CHECK(ConnectionSeed(7, 0) == 7);  // connection 0 runs the run's own sequence
  CHECK(ConnectionSeed(7, 1) != 7);
  CHECK(ConnectionSeed(7, 1) != ConnectionSeed(7, 2));
  CHECK(ConnectionSeed(7, 1) != ConnectionSeed(8, 1));
  CHECK(ConnectionSeed(7, 3) == ConnectionSeed(7, 3));
  CHECK(ReadsHash("") == 0);
  CHECK(ReadsHash("a") != ReadsHash("b"));
}

TEST_CASE("client verify: a correct run passes, in any record order, with the reference digest") {
  Truth t = MakeTruth(21, 40);
  REQUIRE(t.aborted > 0);  // both fates are exercised
  std::reverse(t.records.begin(), t.records.end());  // arrival order decides nothing
  ClientVerifyReport r;
  Status s = Verify(t, &r);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(r.txns == 200);
  CHECK(r.committed == t.committed);
  CHECK(r.aborted == t.aborted);
  CHECK(r.reads_checked > 0);
  CHECK(r.reference_digest == t.digest);
}

TEST_CASE("client verify: each wrong report is named") {
  Truth t = MakeTruth(21, 40);
  auto fails_with = [&](Truth bad, const std::string& text) {
    Status s = Verify(std::move(bad));
    INFO(s.ToString());
    CHECK_FALSE(s.ok());
    CHECK(s.message().find(text) != std::string::npos);
  };
  SECTION("a missing result") {
    Truth bad = t;
    bad.records.erase(std::find_if(bad.records.begin(), bad.records.end(),
                                   [](const ClientTxnRecord& r) { return r.connection == 1 && r.seq == 5; }));
    fails_with(bad, "connection 1 txn #5 has no result (119 results for 120 txns sent)");
  }
  SECTION("the last result missing") {
    Truth bad = t;
    bad.records.erase(std::find_if(bad.records.begin(), bad.records.end(),
                                   [](const ClientTxnRecord& r) { return r.connection == 0 && r.seq == 79; }));
    fails_with(bad, "connection 0 txn #79 has no result (79 results for 80 txns sent)");
  }
  SECTION("a read value") {
    Truth bad = t;
    ClientTxnRecord* committed_reader = nullptr;
    for (auto& r : bad.records) {
      if (r.code == static_cast<uint8_t>(ResultCode::kCommitted) && r.reads_hash != 0 && r.seq > 10) {
        committed_reader = &r;
        break;
      }
    }
    REQUIRE(committed_reader != nullptr);
    committed_reader->reads_hash ^= 1;
    fails_with(bad, "connection " + std::to_string(committed_reader->connection) + " txn #" +
                        std::to_string(committed_reader->seq) + " (batch " + std::to_string(committed_reader->batch) +
                        ", planner 0, index " + std::to_string(committed_reader->index) +
                        "): the values it read differ from the serial run's");
  }
  SECTION("a fate") {
    Truth bad = t;
    for (auto& r : bad.records) {
      if (r.code == static_cast<uint8_t>(ResultCode::kAbortedLogic)) {
        r.code = static_cast<uint8_t>(ResultCode::kCommitted);
        break;
      }
    }
    fails_with(bad, "committed but aborts when the txns run serially in planned order");
    Truth bad2 = t;
    for (auto& r : bad2.records) {
      if (r.code == static_cast<uint8_t>(ResultCode::kCommitted)) {
        r.code = static_cast<uint8_t>(ResultCode::kAbortedLogic);
        break;
      }
    }
    fails_with(bad2, "aborted but commits");
  }
  SECTION("rejected, failed and cascade results are violations") {
    for (ResultCode code : {ResultCode::kRejected, ResultCode::kFailed, ResultCode::kAbortedCascade}) {
      Truth bad = t;
      Rec(bad, 1, 3).code = static_cast<uint8_t>(code);
      fails_with(bad, std::string("connection 1 txn #3 (batch 0, planner 0, index 7) was answered ") +
                          cluster::proto::ResultCodeName(code));
    }
  }
  SECTION("a connection's txns planned out of its send order") {
    Truth bad = t;
    std::swap(Rec(bad, 0, 10).batch, Rec(bad, 0, 11).batch);
    std::swap(Rec(bad, 0, 10).index, Rec(bad, 0, 11).index);
    fails_with(bad, "connection 0 txn #11 (batch 2, planner 0, index 5) is planned out of its connection's send order "
                    "(expected txn #10 next)");
  }
  SECTION("two txns at one position") {
    Truth bad = t;
    Rec(bad, 1, 7).batch = Rec(bad, 0, 5).batch;
    Rec(bad, 1, 7).index = Rec(bad, 0, 5).index;
    fails_with(bad, "shares its planned position with");
  }
  SECTION("a result for a txn never sent, or for a connection that does not exist") {
    Truth bad = t;
    bad.sent[1] = 119;
    fails_with(bad, "connection 1 txn #119");
    fails_with(bad, "a result for a txn never sent (connection sent 119)");
    Truth bad2 = t;
    bad2.records[0].connection = 2;
    fails_with(bad2, "a result for connection 2 of a 2-connection run");
  }
}
