#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "storage/ops.h"
#include "storage/table.h"
#include "workloads/reference_executor.h"
#include "workloads/workload.h"

using namespace qrstore;
using namespace qrstore::workloads;
using storage::Op;
using storage::OpKind;
using storage::Txn;

namespace {

constexpr storage::RecordLayout kLayout{4, 8};

std::unique_ptr<ReferenceExecutor> Make(uint64_t records, int64_t counter) {
  auto ref = std::make_unique<ReferenceExecutor>(kLayout, records);
  std::vector<char> rec(kLayout.size());
  for (uint64_t k = 0; k < records; ++k) {
    storage::InitRecord(rec.data(), kLayout, k, counter);
    REQUIRE(ref->mutable_table()->Insert(k, rec.data()).ok());
  }
  return ref;
}

Txn T(uint64_t id, std::vector<Op> ops) {
  Txn t;
  t.id = id;
  t.ops = std::move(ops);
  return t;
}

int64_t Counter(ReferenceExecutor& ref, uint64_t key) { return storage::GetCounter(ref.table().Find(key)); }

std::vector<char> Bytes(ReferenceExecutor& ref, uint64_t key) {
  const char* r = ref.table().Find(key);
  return std::vector<char>(r, r + kLayout.size());
}

}  // namespace

TEST_CASE("reference: updates and dependent writes use the shared op semantics") {
  auto ref = Make(10, 5);
  auto r = ref->Apply(T(17, {{OpKind::kUpdate, 1, 0, 0}, {OpKind::kRead, 2, 0, 0}}));
  REQUIRE(r.ok());
  CHECK(r.value());
  // The same bytes as applying storage/ops.h by hand.
  std::vector<char> expect(kLayout.size());
  storage::InitRecord(expect.data(), kLayout, 1, 5);
  storage::ApplyUpdate(expect.data(), kLayout, 17, 1);
  CHECK(Bytes(*ref, 1) == expect);
  CHECK(Counter(*ref, 2) == 5);

  // x = 3 <- y = 1: y's counter is 6 now.
  REQUIRE(ref->Apply(T(18, {{OpKind::kDepWrite, 3, 1, 0}})).value());
  storage::InitRecord(expect.data(), kLayout, 3, 5);
  storage::ApplyDepWrite(expect.data(), kLayout, 18, 6);
  CHECK(Bytes(*ref, 3) == expect);
  CHECK(ref->committed() == 2u);
}

TEST_CASE("reference: an abort leaves no trace, even after earlier writes of the txn") {
  auto ref = Make(10, 0);
  uint64_t before = ref->table().Digest();
  // arg 10000 always fires; the updates before it (one key twice) must be rolled back.
  Txn t = T(5, {{OpKind::kUpdate, 1, 0, 0},
                {OpKind::kUpdate, 1, 0, 0},
                {OpKind::kDepWrite, 2, 1, 0},
                {OpKind::kAbortIf, 3, 0, 10000}});
  auto r = ref->Apply(t);
  REQUIRE(r.ok());
  CHECK_FALSE(r.value());
  CHECK(ref->table().Digest() == before);
  CHECK(ref->aborted() == 1u);
  // arg 0 never fires.
  t.ops.back().arg = 0;
  CHECK(ref->Apply(t).value());
  CHECK(Counter(*ref, 1) == 2);
  CHECK(ref->table().Digest() != before);
}

TEST_CASE("reference: kAbortIf follows AbortFires on the value read") {
  auto ref = Make(4, 0);
  // Find txn ids for which the condition fires / does not fire on counter 0 at 50%.
  int fired = 0, held = 0;
  for (uint64_t id = 1; id <= 200; ++id) {
    uint64_t before = ref->table().Digest();
    auto r = ref->Apply(T(id, {{OpKind::kAbortIf, 0, 0, 5000}, {OpKind::kUpdate, 1, 0, 0}}), /*keep=*/false);
    REQUIRE(r.ok());
    CHECK(r.value() == !storage::AbortFires(0, id, 5000));
    CHECK(ref->table().Digest() == before);  // dry runs never change the state
    (r.value() ? held : fired)++;
  }
  CHECK(fired > 50);
  CHECK(held > 50);
}

TEST_CASE("reference: transfers conserve money, a short debit aborts") {
  auto ref = Make(3, 100);
  REQUIRE(ref->Apply(T(1, {{OpKind::kDebit, 0, 0, 60}, {OpKind::kCredit, 1, 0, 60}})).value());
  CHECK(Counter(*ref, 0) == 40);
  CHECK(Counter(*ref, 1) == 160);
  // 0 holds 40: debiting 41 aborts, and the credit (listed first here) is rolled back.
  auto r = ref->Apply(T(2, {{OpKind::kCredit, 2, 0, 41}, {OpKind::kDebit, 0, 0, 41}}));
  REQUIRE(r.ok());
  CHECK_FALSE(r.value());
  CHECK(Counter(*ref, 0) == 40);
  CHECK(Counter(*ref, 2) == 100);
  // Exactly the balance is allowed.
  REQUIRE(ref->Apply(T(3, {{OpKind::kDebit, 0, 0, 40}, {OpKind::kCredit, 2, 0, 40}})).value());
  CHECK(Counter(*ref, 0) + Counter(*ref, 1) + Counter(*ref, 2) == 300);
}

TEST_CASE("reference: random transfers conserve the total") {
  WorkloadOptions o;
  o.kind = WorkloadKind::kTransfer;
  o.transfer.accounts = 20;
  o.transfer.initial_balance = 100;
  o.transfer.max_amount = 150;
  ReferenceExecutor ref(o.Layout(), o.RecordCount());
  REQUIRE(LoadTable(o, ref.mutable_table()).ok());
  auto g = MakeGenerator(o, 12);
  REQUIRE(g.ok());
  for (int i = 0; i < 5000; ++i) REQUIRE(ref.Apply(g.value()->Next()).ok());
  int64_t total = 0;
  bool negative = false;
  ref.table().ForEach([&](uint64_t, const char* rec) {
    total += storage::GetCounter(rec);
    negative |= storage::GetCounter(rec) < 0;
  });
  CHECK(total == 2000);
  CHECK_FALSE(negative);
  CHECK(ref.aborted() > 100u);  // amounts up to 150 against balances near 100
  CHECK(ref.committed() > 1000u);
}

TEST_CASE("reference: a missing key is an error and changes nothing") {
  auto ref = Make(4, 0);
  uint64_t before = ref->table().Digest();
  auto r = ref->Apply(T(1, {{OpKind::kUpdate, 1, 0, 0}, {OpKind::kUpdate, 99, 0, 0}}));
  CHECK_FALSE(r.ok());
  auto r2 = ref->Apply(T(2, {{OpKind::kUpdate, 1, 0, 0}, {OpKind::kDepWrite, 2, 99, 0}}));
  CHECK_FALSE(r2.ok());
  CHECK(ref->table().Digest() == before);
}

TEST_CASE("reference: a committed txn reports the record of each read at its op, an aborted one nothing") {
  auto ref = Make(10, 5);
  std::string reads = "prefix";
  // Read 2, update 2, read 2 again, read 4: the second read sees the update.
  REQUIRE(ref->Apply(T(21, {{OpKind::kRead, 2, 0, 0}, {OpKind::kUpdate, 2, 0, 0}, {OpKind::kRead, 2, 0, 0},
                            {OpKind::kRead, 4, 0, 0}}),
                     true, &reads)
              .value());
  REQUIRE(reads.size() == 6 + 3 * kLayout.size());
  std::vector<char> expect(kLayout.size());
  storage::InitRecord(expect.data(), kLayout, 2, 5);
  CHECK(std::memcmp(reads.data() + 6, expect.data(), kLayout.size()) == 0);
  storage::ApplyUpdate(expect.data(), kLayout, 21, 2);
  CHECK(std::memcmp(reads.data() + 6 + kLayout.size(), expect.data(), kLayout.size()) == 0);
  CHECK(std::memcmp(reads.data() + 6 + 2 * kLayout.size(), ref->table().Find(4), kLayout.size()) == 0);
  // An abort after a read: nothing appended.
  reads.resize(6);
  REQUIRE_FALSE(ref->Apply(T(22, {{OpKind::kRead, 1, 0, 0}, {OpKind::kAbortIf, 3, 0, 10000}}), true, &reads).value());
  CHECK(reads == "prefix");
}
