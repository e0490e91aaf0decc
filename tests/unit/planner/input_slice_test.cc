// A slice's sequenced input (planner/input_slice.h): what a leader replicates under
// replication.point = input. Every field a follower's planning reads survives the round trip;
// every damaged input is refused with kCorruption, never a crash or a huge allocation.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/codec.h"
#include "planner/eq.h"
#include "planner/input_slice.h"
#include "planner/planner.h"
#include "tests/unit/executor/serial_applier.h"

using namespace qrstore;
using planner::DecodeInputSlice;
using planner::EncodeInputSlice;

namespace {

std::vector<storage::Txn> Mixed(uint64_t seed, size_t n) {
  testing::GenOptions g;
  g.keys = 1000;
  g.max_ops = 10;
  g.abort_per_100 = 5;
  g.debit_per_100 = 10;
  std::vector<storage::Txn> txns = testing::RandomTxns(seed, n, g);
  for (size_t i = 0; i < txns.size(); ++i) {
    if (i % 3 == 0) {
      txns[i].session = 7 + i;
      txns[i].seq = 100 + i;
    }
    txns[i].submit_ns = 12345;  // the planning node's own: not encoded
  }
  storage::Txn open;
  open.id = UINT64_MAX - 1;
  open.client = UINT32_MAX;
  open.session = storage::kOpenSession;
  txns.push_back(open);
  storage::Txn big;  // keys and args at the edges of their varints
  big.id = 99;
  big.ops.push_back({storage::OpKind::kDepWrite, UINT64_MAX, UINT64_MAX - 5, 0});
  big.ops.push_back({storage::OpKind::kCredit, 1ull << 40, 0, UINT64_MAX});
  big.ops.push_back({storage::OpKind::kUpdate, 3, 0, 17});  // an arg on a kind that ignores it
  txns.push_back(big);
  return txns;
}

void RequireSame(const std::vector<storage::Txn>& a, const std::vector<storage::Txn>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("txn " << i);
    REQUIRE(a[i].id == b[i].id);
    REQUIRE(a[i].client == b[i].client);
    REQUIRE(a[i].session == b[i].session);
    REQUIRE(a[i].seq == b[i].seq);
    REQUIRE(a[i].ops.size() == b[i].ops.size());
    for (size_t j = 0; j < a[i].ops.size(); ++j) {
      REQUIRE(a[i].ops[j].kind == b[i].ops[j].kind);
      REQUIRE(a[i].ops[j].key == b[i].ops[j].key);
      REQUIRE(a[i].ops[j].arg == b[i].ops[j].arg);
      if (a[i].ops[j].kind == storage::OpKind::kDepWrite) REQUIRE(a[i].ops[j].src_key == b[i].ops[j].src_key);
    }
  }
}

}  // namespace

TEST_CASE("input slice: a round trip keeps what planning reads, and plans to the same slice") {
  const std::vector<storage::Txn> txns = Mixed(3, 300);
  const std::string bytes = EncodeInputSlice(41, 2, txns);
  CHECK(planner::IsInputSlice(bytes));
  CHECK(bytes.capacity() >= bytes.size() + 64);  // room for the replication layers' headers
  uint64_t b = 0;
  uint32_t p = 0;
  std::vector<storage::Txn> got(5);  // reused: resized to the input's count
  REQUIRE(DecodeInputSlice(bytes, &b, &p, &got).ok());
  CHECK(b == 41);
  CHECK(p == 2);
  RequireSame(txns, got);
  CHECK(got[0].submit_ns == 0);

  // The follower's slice is the leader's, fragment for fragment (submit_ns aside, which is
  // not in a slice's encoding either).
  const planner::Planner planner(storage::KeyMapper(storage::KeyMapper::Kind::kHash, 3, 0));
  planner::PlannedSlice leader, follower;
  planner.PlanSlice(41, 2, txns, &leader);
  planner.PlanSlice(41, 2, got, &follower);
  CHECK(planner::EncodeSlice(leader) == planner::EncodeSlice(follower));

  // An empty slice (a promoted leader's padding).
  REQUIRE(DecodeInputSlice(EncodeInputSlice(5, 0, {}), &b, &p, &got).ok());
  CHECK(got.empty());
  CHECK(b == 5);
}

TEST_CASE("input slice: damaged bytes are refused with kCorruption") {
  const std::vector<storage::Txn> txns = Mixed(4, 40);
  const std::string bytes = EncodeInputSlice(1, 0, txns);
  uint64_t b = 0;
  uint32_t p = 0;
  std::vector<storage::Txn> got;
  // Every truncation.
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO("first " << n << " bytes");
    Status st = DecodeInputSlice(std::string_view(bytes).substr(0, n), &b, &p, &got);
    REQUIRE(st.code() == StatusCode::kCorruption);
  }
  CHECK(DecodeInputSlice(bytes + "x", &b, &p, &got).message().find("trailing") != std::string::npos);
  std::string magic = bytes;
  magic[1] = 'S';
  CHECK(DecodeInputSlice(magic, &b, &p, &got).message().find("bad magic") != std::string::npos);
  // An unknown op kind: the first op's kind byte of a one-txn input.
  storage::Txn t;
  t.id = 1;
  t.ops.push_back({storage::OpKind::kUpdate, 5, 0, 0});
  std::string one = EncodeInputSlice(0, 0, {t});
  const size_t kind_at = one.size() - 3;  // kind, key 5, arg 0
  REQUIRE(one[kind_at] == static_cast<char>(storage::OpKind::kUpdate));
  one[kind_at] = 9;
  CHECK(DecodeInputSlice(one, &b, &p, &got).message().find("unknown op kind 9") != std::string::npos);
  // Counts the bytes cannot hold.
  Writer w;
  w.PutRaw(planner::kInputMagic, 3);
  w.PutVarint(0);
  w.PutVarint(0);
  w.PutVarint(1ull << 40);  // txns
  CHECK(DecodeInputSlice(w.data(), &b, &p, &got).code() == StatusCode::kCorruption);
  Writer w2;
  w2.PutRaw(planner::kInputMagic, 3);
  w2.PutVarint(0);
  w2.PutVarint(1ull << 33);  // a planner beyond 32 bits
  w2.PutVarint(0);
  CHECK(DecodeInputSlice(w2.data(), &b, &p, &got).message().find("planner") != std::string::npos);
  // Every single-bit flip either decodes or is refused; none crashes.
  size_t refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flip = bytes;
    flip[i] ^= static_cast<char>(1u << (i % 8));
    refused += DecodeInputSlice(flip, &b, &p, &got).ok() ? 0 : 1;
  }
  CHECK(refused > 0);
}
