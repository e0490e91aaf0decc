// What a leader replicates under replication.point = writes (planner/write_slice.h): the txns'
// contexts and fates and the batch's last images survive the round trip; an entry that does not
// fit the executing node (batch, planner, record size, executor ranges) or is damaged is refused
// with kCorruption naming what is wrong.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/codec.h"
#include "planner/eq.h"
#include "planner/write_slice.h"
#include "storage/key_map.h"

using namespace qrstore;
using planner::DecodeWriteSlice;
using planner::EncodeWriteSlice;

namespace {

constexpr uint32_t kRec = 16;
const storage::KeyMapper kRanges(storage::KeyMapper::Kind::kHash, 2, 0);

planner::PlannedSlice Txns(uint64_t b, uint32_t p, size_t n) {
  planner::PlannedSlice s;
  s.Reset(b, p, 2);
  for (size_t i = 0; i < n; ++i) {
    planner::TxnContext t;
    t.txn_id = 1000 + i;
    t.client = static_cast<uint32_t>(i % 3);
    t.session = i % 2 == 0 ? 0 : 7;
    t.seq = i % 2 == 0 ? 0 : 100 + i;
    t.write_ops = static_cast<uint32_t>(i % 4);
    s.txns.push_back(t);
  }
  return s;
}

// n keys spread over the two ranges (every 977th key, each in its own range's list, increasing),
// each image its key's letter repeated.
void Images(size_t n, std::vector<std::vector<storage::Key>>* keys, std::vector<std::string>* images) {
  keys->assign(2, {});
  images->assign(2, {});
  for (storage::Key i = 0; i < n; ++i) {
    const storage::Key k = i * 977;
    const uint32_t r = kRanges.Of(k);
    (*keys)[r].push_back(k);
    (*images)[r] += std::string(kRec, static_cast<char>('a' + i % 26));
  }
}

}  // namespace

TEST_CASE("write slice: a round trip keeps the txns, fates and images") {
  const planner::PlannedSlice s = Txns(9, 0, 40);
  std::vector<uint8_t> fates(40, 0);
  fates[3] = fates[17] = 1;
  std::vector<std::vector<storage::Key>> keys;
  std::vector<std::string> images;
  Images(50, &keys, &images);
  const std::string bytes = EncodeWriteSlice(s, fates, &keys, &images, kRec);
  CHECK(planner::IsWriteSlice(bytes));
  CHECK(bytes.capacity() >= bytes.size() + 64);
  planner::PlannedSlice got;
  REQUIRE(DecodeWriteSlice(bytes, kRec, kRanges, 9, 0, &got).ok());
  CHECK(got.writes.given);
  CHECK(got.writes.fates == fates);
  CHECK(got.writes.keys == keys);
  CHECK(got.writes.images == images);
  REQUIRE(got.txns.size() == 40);
  for (size_t i = 0; i < 40; ++i) {
    CHECK(got.txns[i].txn_id == s.txns[i].txn_id);
    CHECK(got.txns[i].client == s.txns[i].client);
    CHECK(got.txns[i].session == s.txns[i].session);
    CHECK(got.txns[i].seq == s.txns[i].seq);
    CHECK(got.txns[i].write_ops == s.txns[i].write_ops);
    CHECK(got.txns[i].home_index == i);
    CHECK(got.txns[i].fragments == 0);
  }
  REQUIRE(got.eqs.size() == 2);
  CHECK(got.eqs[0].empty());
  // A slice other than planner 0's: no images; reusing the decoded slice for it clears them.
  const planner::PlannedSlice s1 = Txns(9, 1, 3);
  REQUIRE(DecodeWriteSlice(EncodeWriteSlice(s1, {0, 0, 1}, nullptr, nullptr, kRec), kRec, kRanges, 9, 1, &got).ok());
  CHECK(got.writes.keys[0].empty());
  CHECK(got.writes.keys[1].empty());
  CHECK(got.writes.fates == std::vector<uint8_t>{0, 0, 1});
  // Reset of a given slice clears it: the slot is a planned slice again.
  got.Reset(10, 0, 2);
  CHECK_FALSE(got.writes.given);
}

TEST_CASE("write slice: an entry that does not fit this node, or is damaged, is refused") {
  const planner::PlannedSlice s = Txns(9, 0, 10);
  std::vector<std::vector<storage::Key>> keys;
  std::vector<std::string> images;
  Images(12, &keys, &images);
  const std::string bytes = EncodeWriteSlice(s, std::vector<uint8_t>(10, 0), &keys, &images, kRec);
  planner::PlannedSlice got;
  auto refused = [&](const std::string& b, uint32_t rec, const storage::KeyMapper& ranges, uint64_t batch, uint32_t p) {
    Status st = DecodeWriteSlice(b, rec, ranges, batch, p, &got);
    REQUIRE(st.code() == StatusCode::kCorruption);
    return st.message();
  };
  CHECK(refused(bytes, kRec, kRanges, 8, 0).find("carries batch 9, planner 0") != std::string::npos);
  CHECK(refused(bytes, kRec, kRanges, 9, 1).find("carries batch 9, planner 0") != std::string::npos);
  CHECK(refused(bytes, 32, kRanges, 9, 0).find("records of 16 bytes, this node's are 32") != std::string::npos);
  CHECK(refused(bytes, kRec, storage::KeyMapper(storage::KeyMapper::Kind::kHash, 3, 0), 9, 0)
            .find("2 ranges of images for 3 executor ranges") != std::string::npos);
  // The same key count, other ranges: a key outside its range.
  CHECK(refused(bytes, kRec, storage::KeyMapper(storage::KeyMapper::Kind::kRange, 2, 1 << 20), 9, 0)
            .find("is not in executor range") != std::string::npos);
  CHECK(refused(EncodeWriteSlice(Txns(9, 1, 0), {}, &keys, &images, kRec), kRec, kRanges, 9, 1)
            .find("images in slice 1's entry") != std::string::npos);
  for (size_t n = 0; n < bytes.size(); ++n) {
    INFO("first " << n << " bytes");
    refused(bytes.substr(0, n), kRec, kRanges, 9, 0);
  }
  CHECK(refused(bytes + "x", kRec, kRanges, 9, 0).find("trailing") != std::string::npos);
  std::vector<uint8_t> bad(10, 0);
  bad[2] = 2;  // a cascade: no single partition gives it
  const planner::PlannedSlice s2 = Txns(9, 1, 10);
  CHECK(refused(EncodeWriteSlice(s2, bad, nullptr, nullptr, kRec), kRec, kRanges, 9, 1).find("unknown fate 2") !=
        std::string::npos);
  // Keys that repeat (a second delta of 0), written by hand: the encoder refuses to.
  Writer w;
  w.PutRaw(planner::kWriteMagic, 3);
  w.PutVarint(9);     // batch
  w.PutVarint(0);     // planner
  w.PutVarint(kRec);  // record size
  w.PutVarint(0);     // txns
  w.PutVarint(2);     // ranges
  w.PutVarint(2);     // range 0: two keys
  storage::Key k0 = 0;
  while (kRanges.Of(k0) != 0) ++k0;
  w.PutVarint(k0);
  w.PutVarint(0);
  w.PutRaw(std::string(2 * kRec, 'x').data(), 2 * kRec);
  w.PutVarint(0);  // range 1: none
  CHECK(refused(w.data(), kRec, kRanges, 9, 0).find("do not strictly increase") != std::string::npos);
}
