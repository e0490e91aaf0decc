// The row messages' codec (cluster/row/row_messages.h): round trips, and every malformed input
// refused with a message naming it.
#include <catch2/catch.hpp>

#include <string>

#include "cluster/row/row_input.h"
#include "cluster/row/row_messages.h"
#include "planner/input_slice.h"
#include "planner/row_planner.h"
#include "storage/key_map.h"

using namespace qrstore;
using namespace qrstore::cluster;
using storage::KeyMapper;

namespace {
template <typename M>
void RequireRefusedWhenCut(const std::string& bytes) {
  for (size_t n = 0; n < bytes.size(); ++n) {
    M m;
    const Status s = DecodeRowMessage(std::string_view(bytes).substr(0, n), &m);
    INFO("cut at " << n << " of " << bytes.size());
    REQUIRE(s.code() == StatusCode::kCorruption);
    REQUIRE(s.message().find("row message (") == 0);
  }
  M m;
  REQUIRE(DecodeRowMessage(bytes + "x", &m).message().find("trailing bytes") != std::string::npos);
}
}  // namespace

TEST_CASE("row messages: each kind round-trips byte for byte and refuses every cut and trailing byte") {
  RowDepValues v{12345678901ull, 7, {{0, 0}, {3, -1}, {4, INT64_MIN}, {UINT32_MAX, INT64_MAX}}};
  const std::string vb = EncodeRowMessage(v);
  RowDepValues v2;
  REQUIRE(DecodeRowMessage(vb, &v2).ok());
  CHECK(v2.batch == v.batch);
  CHECK(v2.slice == 7);
  REQUIRE(v2.values.size() == 4);
  CHECK(v2.values[2].value == INT64_MIN);
  CHECK(v2.values[3].slot == UINT32_MAX);
  CHECK(EncodeRowMessage(v2) == vb);
  RequireRefusedWhenCut<RowDepValues>(vb);

  RowVotes votes{9, 2, 1, {{0, 5}, {0, 9}, {3, 0}}};
  const std::string ob = EncodeRowMessage(votes);
  RowVotes o2;
  REQUIRE(DecodeRowMessage(ob, &o2).ok());
  CHECK(o2.ids == votes.ids);
  CHECK(o2.from == 2);
  CHECK(o2.round == 1);
  CHECK(EncodeRowMessage(o2) == ob);
  RequireRefusedWhenCut<RowVotes>(ob);

  RowSubSlice s{4, 1, 3, "QS2-not-really", ""};
  const std::string sb = EncodeRowMessage(s);
  RowSubSlice s2;
  REQUIRE(DecodeRowMessage(sb, &s2).ok());
  CHECK(s2.slice_bytes == s.slice_bytes);
  CHECK(s2.input.empty());
  CHECK(EncodeRowMessage(s2) == sb);
  RequireRefusedWhenCut<RowSubSlice>(sb);
  // Under replication.point = input a sub-slice carries its home slice's input too.
  RowSubSlice si{4, 1, 3, "QS2-not-really", "QI1-not-really"};
  const std::string sib = EncodeRowMessage(si);
  REQUIRE(DecodeRowMessage(sib, &s2).ok());
  CHECK(s2.slice_bytes == si.slice_bytes);
  CHECK(s2.input == si.input);
  CHECK(EncodeRowMessage(s2) == sib);
  RequireRefusedWhenCut<RowSubSlice>(sib);

  RowHomeInput hi{77, 3, 1, "QI1-not-really"};
  const std::string hib = EncodeRowMessage(hi);
  CHECK(PeekRowMessage(hib).value() == RowMsgKind::kHomeInput);
  RowHomeInput hi2;
  REQUIRE(DecodeRowMessage(hib, &hi2).ok());
  CHECK(hi2.batch == 77);
  CHECK(hi2.slice == 3);
  CHECK(hi2.from == 1);
  CHECK(hi2.input == hi.input);
  CHECK(EncodeRowMessage(hi2) == hib);
  RequireRefusedWhenCut<RowHomeInput>(hib);
  CHECK(DecodeRowMessage(hib, &s2).message().find("kind 9, expected 1") != std::string::npos);

  CHECK(PeekRowMessage(vb).value() == RowMsgKind::kDepValues);
  CHECK(PeekRowMessage(ob).value() == RowMsgKind::kVotes);
  CHECK(PeekRowMessage(sb).value() == RowMsgKind::kSubSlice);
}

TEST_CASE("row messages: wrong magic, version or kind, unsorted votes and absurd counts are refused") {
  const std::string ob = EncodeRowMessage(RowVotes{1, 0, 0, {{1, 1}}});
  RowVotes o;
  std::string bad = ob;
  bad[0] = 'X';
  CHECK(DecodeRowMessage(bad, &o).message().find("bad magic") != std::string::npos);
  CHECK_FALSE(PeekRowMessage(bad).ok());
  bad = ob;
  bad[2] = 2;
  CHECK(DecodeRowMessage(bad, &o).message().find("version 2, expected 1") != std::string::npos);
  CHECK(PeekRowMessage(bad).status().message().find("version 2") != std::string::npos);
  bad = ob;
  bad[3] = 11;
  CHECK(PeekRowMessage(bad).status().message().find("unknown kind 11") != std::string::npos);
  RowDepValues v;
  CHECK(DecodeRowMessage(ob, &v).message().find("kind 3, expected 2") != std::string::npos);
  const std::string unsorted = EncodeRowMessage(RowVotes{1, 0, 0, {{1, 2}, {1, 2}}});
  CHECK(DecodeRowMessage(unsorted, &o).message().find("not strictly increasing at 1") != std::string::npos);
  // A count claiming far more values than bytes follow: refused before allocating.
  std::string huge = EncodeRowMessage(RowDepValues{1, 1, {}});
  huge.pop_back();
  huge += std::string("\xff\xff\xff\xff\x0f", 5);
  CHECK(DecodeRowMessage(huge, &v).message().find("bad or truncated value count") != std::string::npos);
  const std::string from = EncodeRowMessage(RowVotes{1, 5000, 0, {}});
  CHECK(DecodeRowMessage(from, &o).message().find("from partition 5000") != std::string::npos);
}

TEST_CASE("row messages: a sub-slice opens only on its partition, as the row sub-slice it claims to be") {
  const KeyMapper parts(KeyMapper::Kind::kRange, 2, 1000);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  storage::Txn t;
  t.id = 1;
  t.ops.push_back(storage::Op{storage::OpKind::kDepWrite, 10, 600, 0});
  planner::RowPlanner rp(parts, ranges, 0);
  std::vector<planner::PlannedSlice> subs;
  rp.PlanSlices(3, 1, {t}, &subs);
  RowSubSlice m{3, 1, 0, planner::EncodeSlice(subs[1]), ""};
  planner::PlannedSlice out;
  REQUIRE(OpenRowSubSlice(m, ranges, planner::RowPlace{parts, 1}, &out).ok());
  CHECK(out.eqs.size() == 2);
  CHECK_FALSE(OpenRowSubSlice(m, ranges, planner::RowPlace{parts, 0}, &out).ok());
  m.batch = 4;  // the message says batch 4, its slice batch 3
  CHECK(OpenRowSubSlice(m, ranges, planner::RowPlace{parts, 1}, &out).message().find("carries batch 3") !=
        std::string::npos);
  subs[1].row = false;
  subs[1].eqs[0].clear();
  subs[1].eqs[1].clear();
  subs[1].txns.clear();
  subs[1].dep_slots = 0;
  subs[1].may_abort = false;
  RowSubSlice plain{3, 1, 0, planner::EncodeSlice(subs[1]), ""};
  CHECK(OpenRowSubSlice(plain, ranges, planner::RowPlace{parts, 1}, &out).message().find("not a row sub-slice") !=
        std::string::npos);
}

TEST_CASE("row input: a follower planning a home slice's input gets every part its home planned, byte for byte") {
  // replication.point = input (cluster/row/row_input.h): home 1 of a 3-partition row plans a
  // home slice with cross-partition dependencies, debits and a session txn; its input, logged
  // and planned again by PlanHomeInput (a fresh RowPlanner, as on a follower), gives the same
  // encoded parts for every partition. Entries of another batch, stream or home are refused.
  const KeyMapper parts(KeyMapper::Kind::kHash, 3, 1000);
  const KeyMapper ranges = KeyMapper::Within(parts, 2);
  constexpr uint32_t kPerHome = 2;
  constexpr uint32_t kSlice = 1 * kPerHome + 1;  // home 1, planner 1
  std::vector<storage::Txn> txns;
  for (uint64_t i = 0; i < 40; ++i) {
    storage::Txn t;
    t.id = 100 + i;
    t.client = static_cast<uint32_t>(i % 3);
    t.submit_ns = 12345 + static_cast<int64_t>(i);  // the home's own: not in the input
    if (i % 7 == 0) {
      t.session = 9;
      t.seq = i;
    }
    t.ops.push_back(storage::Op{storage::OpKind::kDepWrite, (i * 37) % 1000, (i * 91 + 5) % 1000, 0});
    t.ops.push_back(storage::Op{storage::OpKind::kRead, (i * 13) % 1000, 0, 0});
    t.ops.push_back(storage::Op{i % 5 == 0 ? storage::OpKind::kDebit : storage::OpKind::kUpdate, (i * 53) % 1000, 0, i});
    txns.push_back(t);
  }
  planner::RowPlanner home(parts, ranges, 1);
  std::vector<planner::PlannedSlice> subs;
  home.PlanSlices(7, kSlice, txns, &subs);
  const std::string entry = EncodeRowMessage(RowHomeInput{7, kSlice, 1, planner::EncodeInputSlice(7, kSlice, txns)});
  HomeInputParts planned;
  REQUIRE(PlanHomeInput(entry, 7, kSlice, kPerHome, parts, ranges, &planned).ok());
  CHECK(planned.from == 1);
  REQUIRE(planned.parts.size() == 3);
  size_t dep_sends = 0;
  for (uint32_t p = 0; p < 3; ++p) {
    INFO("partition " << p);
    CHECK(planned.parts[p] == planner::EncodeSlice(subs[p]));
    for (const auto& eq : subs[p].eqs) {
      for (const auto& f : eq) dep_sends += f.kind == planner::FragKind::kDepSend ? 1 : 0;
    }
  }
  CHECK(dep_sends > 0);  // the slice crosses partitions: the slots are the home's numbering
  CHECK(planned.input == planner::EncodeInputSlice(7, kSlice, txns));

  auto refused = [&](const std::string& e, uint64_t b, uint32_t slice, const char* why) {
    const Status st = PlanHomeInput(e, b, slice, kPerHome, parts, ranges, &planned);
    INFO(st.ToString());
    CHECK(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find(why) != std::string::npos);
  };
  refused(entry, 8, kSlice, "where batch 8, slice 3");
  refused(entry, 7, 2, "where batch 7, slice 2");
  refused(EncodeRowMessage(RowHomeInput{7, kSlice, 0, planner::EncodeInputSlice(7, kSlice, txns)}), 7, kSlice,
          "home 0");
  refused(EncodeRowMessage(RowHomeInput{7, kSlice, 1, planner::EncodeInputSlice(6, kSlice, txns)}), 7, kSlice,
          "the input of batch 6");
  refused(EncodeRowMessage(RowHomeInput{7, kSlice, 1, "QI1"}), 7, kSlice, "input");
  refused(EncodeRowMessage(RowSubSlice{7, kSlice, 1, "x", ""}), 7, kSlice, "kind 1, expected 9");
}

TEST_CASE("row messages: reports and control messages round-trip and refuse malformed input") {
  RowReport r{77, 5, 2, {}};
  r.report.Add(3, commit::TxnStatus::kCommitted, "0123456789");
  r.report.Add(4, commit::TxnStatus::kAbortedLogic, "");
  r.report.Add(UINT32_MAX, commit::TxnStatus::kAbortedCascade, "");
  const std::string rb = EncodeRowMessage(r);
  RowReport r2;
  REQUIRE(DecodeRowMessage(rb, &r2).ok());
  CHECK(r2.batch == 77);
  CHECK(r2.slice == 5);
  CHECK(r2.from == 2);
  REQUIRE(r2.report.txns.size() == 3);
  CHECK(r2.report.txns[0].home_index == 3);
  CHECK(r2.report.txns[1].home_index == 4);
  CHECK(r2.report.txns[2].home_index == UINT32_MAX);
  CHECK(r2.report.txns[1].status == commit::TxnStatus::kAbortedLogic);
  CHECK(r2.report.txns[0].values_size == 10);
  CHECK(r2.report.values == "0123456789");
  CHECK(EncodeRowMessage(r2) == rb);
  RequireRefusedWhenCut<RowReport>(rb);
  REQUIRE(PeekRowMessage(rb).value() == RowMsgKind::kReport);

  // An unknown status, and values listed longer than the message holds.
  RowReport r3;
  {
    RowReport one{1, 0, 0, {}};
    one.report.Add(0, commit::TxnStatus::kCommitted, "");
    std::string b = EncodeRowMessage(one);
    b[b.size() - 2] = 7;  // status
    const Status s = DecodeRowMessage(b, &r3);
    CHECK(s.message().find("unknown status 7") != std::string::npos);
    b = EncodeRowMessage(one);
    b.back() = 5;  // values_size 5 with no values behind it
    CHECK(DecodeRowMessage(b, &r3).message().find("values longer than the message") != std::string::npos);
  }

  RowControl c{3, RowControlKind::kInputEnded, 123456};
  const std::string cb = EncodeRowMessage(c);
  RowControl c2;
  REQUIRE(DecodeRowMessage(cb, &c2).ok());
  CHECK(c2.from == 3);
  CHECK(c2.what == RowControlKind::kInputEnded);
  CHECK(c2.batch == 123456);
  CHECK(EncodeRowMessage(c2) == cb);
  RequireRefusedWhenCut<RowControl>(cb);
  std::string cbad = cb;
  cbad[5] = 9;  // from (1 byte), then the control kind
  CHECK(DecodeRowMessage(cbad, &c2).message().find("unknown control kind 9") != std::string::npos);
}

TEST_CASE("row messages: a home bundle round-trips, names its home's part and refuses malformed input") {
  RowHomeBundle hb{42, 5, 1, {"QS2-part-for-0", "QS2-own-part", ""}};
  const std::string bb = EncodeRowMessage(hb);
  CHECK(PeekRowMessage(bb).value() == RowMsgKind::kHomeBundle);
  RowHomeBundle h2;
  REQUIRE(DecodeRowMessage(bb, &h2).ok());
  CHECK(h2.batch == 42);
  CHECK(h2.slice == 5);
  CHECK(h2.from == 1);
  CHECK(h2.parts == hb.parts);
  CHECK(EncodeRowMessage(h2) == bb);
  RequireRefusedWhenCut<RowHomeBundle>(bb);

  // The home must be one of the parts: a bundle without its home's part is refused.
  const std::string no_home = EncodeRowMessage(RowHomeBundle{42, 5, 3, {"a", "b", "c"}});
  Status s = DecodeRowMessage(no_home, &h2);
  CHECK(s.code() == StatusCode::kCorruption);
  CHECK(s.message().find("home partition 3 of 3 parts") != std::string::npos);
  // A bundle is not a sub-slice, nor the other way round (the kind is checked).
  RowSubSlice sub;
  CHECK(DecodeRowMessage(bb, &sub).message().find("kind 6, expected 1") != std::string::npos);
  CHECK(DecodeRowMessage(EncodeRowMessage(RowSubSlice{1, 0, 0, "x", ""}), &h2).message().find("kind 1, expected 6") !=
        std::string::npos);
}

TEST_CASE("row messages: a batch-end record round-trips and refuses disorder, strays and malformed input") {
  RowBatchEnd e{77, 2, {{0, 1, -5}, {0, 9, INT64_MAX}, {3, 0, INT64_MIN}}, {{1, 4}}, {{0, 2}, {1, 4}, {2, 0}},
                {{{1, 4}}, {{0, 2}, {2, 0}}, {}}};
  const std::string eb = EncodeRowMessage(e);
  CHECK(PeekRowMessage(eb).value() == RowMsgKind::kBatchEnd);
  RowBatchEnd e2;
  REQUIRE(DecodeRowMessage(eb, &e2).ok());
  CHECK(e2.batch == 77);
  CHECK(e2.partition == 2);
  REQUIRE(e2.values.size() == 3);
  CHECK(e2.values[1].slot == 9);
  CHECK(e2.values[1].value == INT64_MAX);
  CHECK(e2.values[2].value == INT64_MIN);
  CHECK(e2.fired == e.fired);
  CHECK(e2.aborted == e.aborted);
  CHECK(e2.votes == e.votes);  // the leader's own votes, round by round, an empty last round kept
  CHECK(EncodeRowMessage(e2) == eb);
  RequireRefusedWhenCut<RowBatchEnd>(eb);
  // An empty record (nothing received, nothing aborted) is the common case.
  const std::string empty = EncodeRowMessage(RowBatchEnd{3, 0, {}, {}, {}, {}});
  REQUIRE(DecodeRowMessage(empty, &e2).ok());
  CHECK(e2.values.empty());
  CHECK(e2.votes.empty());

  auto refused = [&](const RowBatchEnd& m, const std::string& why) {
    RowBatchEnd out;
    const Status s = DecodeRowMessage(EncodeRowMessage(m), &out);
    INFO(s.ToString());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(s.message().find(why) != std::string::npos);
  };
  refused(RowBatchEnd{1, 0, {{0, 3, 1}, {0, 3, 2}}, {}, {}, {}}, "values not strictly increasing by (slice, slot) at 1");
  refused(RowBatchEnd{1, 0, {{1, 0, 1}, {0, 5, 2}}, {}, {}, {}}, "values not strictly increasing");
  refused(RowBatchEnd{1, 0, {}, {{1, 1}, {0, 0}}, {{0, 0}, {1, 1}}, {}}, "fired txn ids not strictly increasing at 1");
  refused(RowBatchEnd{1, 0, {}, {}, {{2, 2}, {2, 2}}, {}}, "aborted txn ids not strictly increasing");
  refused(RowBatchEnd{1, 0, {}, {{0, 7}}, {{0, 6}}, {}}, "fired txn (0, 7) is not among the aborted");
  refused(RowBatchEnd{1, 0, {}, {}, {}, {{}, {{3, 1}, {3, 1}}}}, "round 1 vote ids not strictly increasing at 1");
  // Neither a vote message nor a bundle passes for one.
  CHECK(DecodeRowMessage(EncodeRowMessage(RowVotes{1, 0, 0, {}}), &e2).message().find("kind 3, expected 7") !=
        std::string::npos);
}

TEST_CASE("row messages: a batch's writes entry round-trips and refuses disorder, strays and malformed input") {
  // replication.point = writes: the record inside, the values sent, the reports, the images.
  RowBatchWrites w;
  w.end = RowBatchEnd{12, 1, {{0, 2, 7}}, {{0, 3}}, {{0, 3}, {2, 1}}, {{{0, 3}}, {}}};
  w.sent = {{0, 2, 0, -9}, {0, 2, 4, INT64_MAX}, {0, 3, 1, INT64_MIN}, {2, 0, 0, 1}};
  commit::RowSliceReport rep;
  rep.Add(0, commit::TxnStatus::kCommitted, std::string(3, 'a'));
  rep.Add(4, commit::TxnStatus::kAbortedCascade, std::string());
  w.reports = {EncodeRowMessage(RowReport{12, 0, 1, rep}), EncodeRowMessage(RowReport{12, 2, 1, {}})};
  w.record_bytes = 3;
  w.keys = {{0, 5, 1000}, {}, {1ull << 40}};
  w.images = {"abcdefghi", "", "xyz"};
  const std::string wb = EncodeRowMessage(w);
  CHECK(PeekRowMessage(wb).value() == RowMsgKind::kBatchWrites);
  RowBatchWrites w2;
  REQUIRE(DecodeRowMessage(wb, &w2).ok());
  CHECK(w2.end.batch == 12);
  CHECK(w2.end.partition == 1);
  CHECK(w2.end.aborted == w.end.aborted);
  CHECK(w2.end.votes == w.end.votes);
  REQUIRE(w2.sent.size() == 4);
  CHECK(w2.sent[1].value == INT64_MAX);
  CHECK(w2.sent[2].value == INT64_MIN);
  CHECK(w2.reports == w.reports);
  CHECK(w2.record_bytes == 3);
  CHECK(w2.keys == w.keys);
  CHECK(w2.images == w.images);
  CHECK(EncodeRowMessage(w2) == wb);
  RequireRefusedWhenCut<RowBatchWrites>(wb);
  // A batch that wrote nothing here and sent nothing: no ranges.
  RowBatchWrites none;
  none.end.batch = 4;
  REQUIRE(DecodeRowMessage(EncodeRowMessage(none), &w2).ok());
  CHECK(w2.keys.empty());
  CHECK(w2.sent.empty());

  auto refused = [&](const RowBatchWrites& m, const std::string& why) {
    RowBatchWrites out;
    const Status s = DecodeRowMessage(EncodeRowMessage(m), &out);
    INFO(s.ToString());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(s.message().find(why) != std::string::npos);
  };
  RowBatchWrites bad = w;
  std::swap(bad.sent[0], bad.sent[1]);
  refused(bad, "sent values not strictly increasing by (to, slice, slot) at 1");
  bad = w;
  bad.sent[0].to = 1;  // to itself
  refused(bad, "a value sent to partition 1");
  bad = w;
  std::swap(bad.reports[0], bad.reports[1]);
  refused(bad, "reports not strictly increasing by slice at 1");
  bad = w;
  bad.reports[1] = EncodeRowMessage(RowReport{11, 2, 1, {}});
  refused(bad, "a report of batch 11 from partition 1");
  bad = w;
  bad.reports[1] = EncodeRowMessage(RowReport{12, 2, 0, {}});
  refused(bad, "a report of batch 12 from partition 0");
  bad = w;
  bad.reports[0] = EncodeRowMessage(RowVotes{12, 1, 0, {}});
  refused(bad, "report 0: row message (report): kind 3, expected 4");
  bad = w;
  bad.keys[0] = {5, 5, 1000};
  refused(bad, "range 0: keys do not strictly increase");
  bad = w;
  bad.end.aborted.clear();  // a fired txn not among the aborted: the record's own check
  refused(bad, "fired txn (0, 3) is not among the aborted");
  // Neither a batch-end record nor a bundle passes for one.
  CHECK(DecodeRowMessage(EncodeRowMessage(w.end), &w2).message().find("kind 7, expected 10") != std::string::npos);
}

TEST_CASE("row messages: a resume and its answer round-trip and refuse a missing or stray address") {
  const RowResume r{1, false, 9, 120, 0, "127.0.0.1:7101"};
  const std::string rb = EncodeRowMessage(r);
  CHECK(PeekRowMessage(rb).value() == RowMsgKind::kResume);
  RowResume r2;
  REQUIRE(DecodeRowMessage(rb, &r2).ok());
  CHECK(r2.from == 1);
  CHECK_FALSE(r2.answer);
  CHECK(r2.term == 9);
  CHECK(r2.batch == 120);
  CHECK(r2.address == "127.0.0.1:7101");
  CHECK(EncodeRowMessage(r2) == rb);
  RequireRefusedWhenCut<RowResume>(rb);
  const std::string ab = EncodeRowMessage(RowResume{0, true, 9, 117, 115, ""});
  REQUIRE(DecodeRowMessage(ab, &r2).ok());
  CHECK(r2.answer);
  CHECK(r2.batch == 117);
  CHECK(r2.reports == 115);
  CHECK(EncodeRowMessage(r2) == ab);
  RequireRefusedWhenCut<RowResume>(ab);

  auto refused = [&](const std::string& bytes, const std::string& why) {
    RowResume out;
    const Status s = DecodeRowMessage(bytes, &out);
    INFO(s.ToString());
    CHECK(s.code() == StatusCode::kCorruption);
    CHECK(s.message().find(why) != std::string::npos);
  };
  refused(EncodeRowMessage(RowResume{1, false, 9, 1, 0, ""}), "a resume whose address has 0 bytes");
  refused(EncodeRowMessage(RowResume{1, false, 9, 1, 0, std::string(256, 'a')}), "address has 256 bytes");
  refused(EncodeRowMessage(RowResume{1, true, 9, 1, 0, "h:1"}), "an answer with an address");
  std::string flag = ab;
  flag[5] = 2;  // from (1 byte), then the answer flag
  refused(flag, "answer flag 2");
  // The new control kind: a durable batch.
  RowControl d;
  REQUIRE(DecodeRowMessage(EncodeRowMessage(RowControl{2, RowControlKind::kDurable, 40}), &d).ok());
  CHECK(d.what == RowControlKind::kDurable);
  CHECK(d.batch == 40);
}
