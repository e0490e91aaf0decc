#include <catch2/catch.hpp>

#include <vector>

#include "commit/committer.h"
#include "planner/planner.h"
#include "storage/key_map.h"

using namespace qrstore;

TEST_CASE("commit: outcomes carry planned positions, contexts and fates in slice order") {
  planner::Planner p(storage::KeyMapper(storage::KeyMapper::Kind::kHash, 2, 0));
  std::vector<storage::Txn> txns(3);
  for (size_t i = 0; i < txns.size(); ++i) {
    txns[i].id = 100 + i;
    txns[i].client = static_cast<uint32_t>(7 + i);
    txns[i].submit_ns = static_cast<int64_t>(1000 * i);
    txns[i].ops = {{storage::OpKind::kUpdate, i}, {storage::OpKind::kRead, i + 10}, {storage::OpKind::kCredit, i + 20, 0, 5}};
  }
  planner::PlannedSlice s;
  p.PlanSlice(4, 1, txns, &s);

  executor::BatchFates none;
  std::vector<commit::TxnOutcome> out;
  commit::SliceTally t = commit::BuildSliceOutcomes(s, none, 555, &out);
  REQUIRE(out.size() == 3);
  CHECK(t.committed == 3);
  CHECK(t.aborted_logic == 0);
  for (uint32_t i = 0; i < 3; ++i) {
    CHECK(out[i].txn_id == 100 + i);
    CHECK(out[i].client == 7 + i);
    CHECK(out[i].submit_ns == 1000 * i);
    CHECK(out[i].commit_ns == 555);
    CHECK(out[i].write_ops == 2);
    CHECK(out[i].status == commit::TxnStatus::kCommitted);
    CHECK(out[i].pos == commit::PlannedPos{4, 1, i});
  }
  CHECK(out[0].pos < out[1].pos);
  CHECK(commit::PlannedPos{3, 9, 9} < commit::PlannedPos{4, 0, 0});
  CHECK(commit::PlannedPos{4, 0, 9} < commit::PlannedPos{4, 1, 0});

  executor::BatchFates some;
  some.any_abort = true;
  some.fates = {{}, {executor::Fate::kCommit, executor::Fate::kLogic, executor::Fate::kCommit}};
  t = commit::BuildSliceOutcomes(s, some, 9, &out);
  CHECK(t.committed == 2);
  CHECK(t.aborted_logic == 1);
  CHECK(out[1].status == commit::TxnStatus::kAbortedLogic);
  CHECK(std::string(commit::TxnStatusName(out[1].status)) == "aborted-logic");
}
