// Writes the seed corpora of the fuzz targets from real encodings, and the known-bad inputs that
// are regression tests from the start (run by hand after a format change; the output is
// checked in under tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/):
//   build/bin/fuzz_make_seeds tests/fuzz
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cluster/protocol.h"
#include "common/rng.h"
#include "planner/eq.h"
#include "planner/planner.h"
#include "storage/key_map.h"

using namespace qrstore;
namespace proto = cluster::proto;

namespace {
void Write(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::vector<storage::Txn> Txns(uint64_t seed, size_t n, uint64_t keys) {
  Rng rng(seed);
  std::vector<storage::Txn> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].id = seed * 1000 + i;
    const size_t ops = 1 + rng.Uniform(5);
    for (size_t j = 0; j < ops; ++j) {
      storage::Op op;
      op.key = rng.Uniform(keys);
      switch (rng.Uniform(6)) {
        case 0: op.kind = storage::OpKind::kRead; break;
        case 1: op.kind = storage::OpKind::kUpdate; break;
        case 2: op.kind = storage::OpKind::kDepWrite; op.src_key = rng.Uniform(keys); break;
        case 3: op.kind = storage::OpKind::kAbortIf; op.arg = 5000; break;
        case 4: op.kind = storage::OpKind::kDebit; op.arg = rng.Uniform(2000); break;
        default: op.kind = storage::OpKind::kCredit; op.arg = rng.Uniform(2000); break;
      }
      out[i].ops.push_back(op);
    }
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds tests/fuzz\n");
    return 2;
  }
  const std::filesystem::path root = std::filesystem::path(argv[1]) / "corpus";
  const std::filesystem::path regressions = std::filesystem::path(argv[1]) / "regressions";
  {
    // Two txns sharing dependency slots crosswise: accepted by the first slice decoder and then
    // deadlocked the executors (executor 0 ran A's write, waiting for slot 1, before B's read of
    // slot 1 in the same EQ). The format now carries slot counts only, so this is what a writer
    // makes of that value; it must be refused.
    planner::Planner p(storage::KeyMapper(storage::KeyMapper::Kind::kRange, 2, 100));
    std::vector<storage::Txn> txns(2);
    txns[0].id = 1;
    txns[0].ops.push_back(storage::Op{storage::OpKind::kDepWrite, 10, 60, 0});
    txns[1].id = 2;
    txns[1].ops.push_back(storage::Op{storage::OpKind::kDepWrite, 70, 20, 0});
    planner::PlannedSlice s;
    p.PlanSlice(0, 0, txns, &s);
    s.txns[0].deps = 2;
    s.txns[1].dep_begin = 0;
    s.txns[1].deps = 2;
    s.eqs[0][0].slot = 1;
    s.eqs[1][1].slot = 0;
    Write(regressions / "fuzz_slice", "crosswise-dependency-slots", std::string(1, '\1') + planner::EncodeSlice(s));
  }
  // Slices: a byte for the range mapping, then the encoding.
  int n = 0;
  for (uint32_t ranges : {1u, 2u, 3u}) {
    for (uint64_t seed : {1u, 2u}) {
      const bool range_map = seed % 2 == 0;
      planner::Planner p(storage::KeyMapper(range_map ? storage::KeyMapper::Kind::kRange : storage::KeyMapper::Kind::kHash,
                                            ranges, 256));
      planner::PlannedSlice s;
      p.PlanSlice(seed, 0, Txns(seed * 7 + ranges, 3 + seed * 2, 256), &s);
      Write(root / "fuzz_slice", "seed-" + std::to_string(n++), std::string(1, range_map ? '\1' : '\0') + planner::EncodeSlice(s));
    }
  }
  // Client messages: a selector byte, then the body.
  proto::TxnRequest req;
  req.request_id = 7;
  req.txns = Txns(3, 4, 1000);
  Write(root / "fuzz_client_messages", "txn-request", std::string(1, '\0') + proto::EncodeTxnRequest(req));
  proto::TxnReply rep;
  rep.request_id = 7;
  rep.record_bytes = 4;
  proto::TxnResult r;
  r.batch = 3;
  r.index = 2;
  r.reads = 1;
  r.values = "abcd";
  rep.results.push_back(r);
  proto::TxnResult rej;
  rej.code = proto::ResultCode::kRejected;
  rej.detail = "op 0: key 9 out of range [0, 5)";
  rep.results.push_back(rej);
  Write(root / "fuzz_client_messages", "txn-reply", std::string(1, '\1') + proto::EncodeTxnReply(rep));
  Write(root / "fuzz_client_messages", "error",
        std::string(1, '\2') + proto::EncodeError({4, StatusCode::kUnavailable, "stopping"}));
  Write(root / "fuzz_client_messages", "not-leader",
        std::string(1, '\3') + proto::EncodeNotLeader({5, "n0", "127.0.0.1:7100"}));
  Write(root / "fuzz_client_messages", "status-request", std::string(1, '\4') + proto::EncodeStatusRequest({6}));
  proto::NodeStatus st;
  st.node = "n0";
  st.role = "leader";
  st.state = "serving";
  st.followers.push_back(proto::FollowerView{"n1", true, 4, 0, 4, 0, true});
  Write(root / "fuzz_client_messages", "status-reply", std::string(1, '\5') + proto::EncodeStatusReply(st));
  Write(root / "fuzz_client_messages", "follower-report",
        std::string(1, '\6') + proto::EncodeFollowerReport({"n1", 3, false, {{1, 2}, {2, 3}}}));
  std::printf("seeds written under %s\n", root.c_str());
  return 0;
}
